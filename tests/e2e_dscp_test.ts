/**
 * End to end: a network's DSCP marking on the wire. Two sim nodes on real Open vSwitch (userspace
 * datapath); tcpdump on the underlay between them and on the physnet segment reads the TOS byte
 * (IPv4) and the traffic class (IPv6) of what leaves a node: on VXLAN the outer header (the tunnel
 * port copies the inner one, options:tos=inherit) and the inner one, on VLAN the packet itself.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { startCapture } from "./support/capture.ts";
import { addressesOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

/** EF, the data plane's; AF31 on the VLAN network; AF11 after the PATCH. */
const EF = 46;
const AF31 = 26;
const AF11 = 10;

interface Added {
  pod: Pod;
  ns: string;
  /** IPv4 first, then IPv6 on a dual-stack network. */
  ips: string[];
}

/** One IP header tcpdump printed: its family, DSCP and ECN bits. */
interface Header {
  family: 4 | 6;
  dscp: number;
  ecn: number;
}

/** One captured packet: its VXLAN VNI (if any), its IP headers outermost first, and its text. */
interface Packet {
  vni?: number;
  headers: Header[];
  text: string;
}

Deno.test("e2e dscp: a marked VXLAN network's traffic carries its DSCP on the outer and inner headers, a VLAN network's on its packets, unmarked stays as the pods send it, ECN untouched, a PATCH is seen on the wire", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const [n1, n2] = stack.nodes;
  // The stack's underlay (devstack/stack.ts): a bridge in netns "ul", node n1 on its port sw-n1.
  const underlay = cleanup.name("ul");
  const segment = stack.physnets.phys1;
  await create(stack, "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] });
  await create(stack, "tenants", { name: "acme" });
  const data = await create(stack, "tenants/acme/networks", {
    name: "data",
    cidr: "10.70.0.0/24",
    gateway: "10.70.0.1",
    cidr6: "fd00:70::/64",
    gateway6: "fd00:70::1",
    dscp: EF,
  });
  assert.equal(data.dscp, EF);
  const plain = await create(stack, "tenants/acme/networks", {
    name: "plain",
    cidr: "10.71.0.0/24",
    gateway: "10.71.0.1",
  });
  const storage = await create(stack, "tenants/acme/networks", {
    name: "storage",
    type: "vlan",
    physnet: "phys1",
    cidr: "10.72.0.0/24",
    gateway: "10.72.0.1",
    dscp: AF31,
  });

  const d1 = await added(n1, "d1", "data");
  const d2 = await added(n2, "d2", "data");
  const p1 = await added(n1, "p1", "plain");
  const p2 = await added(n2, "p2", "plain");
  const s1 = await added(n1, "s1", "storage");
  const s2 = await added(n2, "s2", "storage");

  /** TCP and UDP both ways round from `from` to `to`'s address `addr`; payloads come back whole. */
  const exchange = async (from: Added, to: Added, addr: string) => {
    const tcp = await tcpExchange(cleanup, from.ns, to.ns, addr, 256 * 1024);
    assert.ok(tcp.ok, `TCP ${from.pod.name} -> ${addr}: ${tcp.error}`);
    const udp = await udpExchange(cleanup, from.ns, to.ns, addr, [64, 1200]);
    assert.ok(udp.ok, `UDP ${from.pod.name} -> ${addr}: ${udp.error}`);
  };
  /** The VXLAN packets n1 and n2 exchange while `traffic` runs. */
  const tunnelled = (traffic: () => Promise<void>) =>
    captured(cleanup, underlay, "sw-n1", "udp port 4789", traffic);
  /** The packets of the storage network's VLAN on n1's port of the physnet segment. */
  const tagged = (traffic: () => Promise<void>) =>
    captured(
      cleanup,
      segment.netns,
      segment.ports.n1,
      `vlan ${storage.segmentId} and (tcp or udp or icmp)`,
      traffic,
    );

  await t.step(
    "VXLAN: IPv4 and IPv6 TCP and UDP of the marked network carry EF outside and inside, both ways; the unmarked network's carry 0",
    async () => {
      const packets = await tunnelled(async () => {
        await exchange(d1, d2, d2.ips[0]);
        await exchange(d1, d2, d2.ips[1]);
        await exchange(p1, p2, p2.ips[0]);
      });
      const marked = packets.filter((p) => p.vni === data.segmentId);
      const unmarked = packets.filter((p) => p.vni === plain.segmentId);
      for (const [what, list] of [["marked", marked], ["unmarked", unmarked]] as const) {
        for (const proto of ["TCP", "UDP"]) {
          assert.ok(list.some((p) => p.text.includes(proto)), `${what}: ${proto} seen`);
        }
      }
      assert.ok(marked.some((p) => p.headers[1]?.family === 6), "IPv6 inside the tunnel seen");
      for (const p of marked) {
        assert.equal(p.headers.length, 2, `outer and inner header: ${p.text}`);
        assert.equal(p.headers[0].dscp, EF, `outer DSCP: ${p.text}`);
        assert.equal(p.headers[1].dscp, EF, `inner DSCP: ${p.text}`);
        // Neither the marking nor the tunnel sets ECN: the pods' own (0 here) is carried.
        assert.equal(p.headers[0].ecn, p.headers[1].ecn, `ECN copied outward: ${p.text}`);
      }
      for (const p of unmarked) {
        assert.deepEqual(p.headers.map((h) => h.dscp), [0, 0], `not marked: ${p.text}`);
      }
      // Both directions: n2's packets to n1 are marked on n2.
      const fromN2 = marked.filter((p) => p.text.includes(`${n2.sim.underlayIp}.`));
      assert.ok(fromN2.length > 0, "packets n2 sent seen");
    },
  );

  await t.step(
    "ECN bits a pod sets pass through the marking untouched, IPv4 and IPv6",
    async () => {
      const packets = await tunnelled(async () => {
        // ECT(0): 0x02; DSCP 8 (CS1) that the network's marking replaces.
        for (const ip of d2.ips) await ping(d1, ip, ["-Q", "0x22"]);
      });
      const requests = packets.filter((p) =>
        p.vni === data.segmentId && /echo request/.test(p.text)
      );
      assert.ok(requests.some((p) => p.headers[1].family === 4), "IPv4 echo requests seen");
      assert.ok(requests.some((p) => p.headers[1].family === 6), "IPv6 echo requests seen");
      for (const p of requests) {
        for (const h of p.headers) {
          assert.deepEqual([h.dscp, h.ecn], [EF, 2], `EF with the pod's ECT(0): ${p.text}`);
        }
      }
    },
  );

  await t.step(
    "an unmarked network leaves a pod's own DSCP alone: the tunnel copies it outward",
    async () => {
      const packets = await tunnelled(() => ping(p1, p2.ips[0], ["-Q", "0x20"]));
      const requests = packets.filter((p) =>
        p.vni === plain.segmentId && /echo request/.test(p.text)
      );
      assert.ok(requests.length > 0, "echo requests seen");
      // CS1 (8), as the pod set it, outside too (PIPELINE.md, "DSCP marking": unmarked networks).
      for (const p of requests) assert.deepEqual(p.headers.map((h) => h.dscp), [8, 8], p.text);
    },
  );

  await t.step("VLAN: the marked network's IPv4 TCP and UDP leave with AF31", async () => {
    const packets = await tagged(() => exchange(s1, s2, s2.ips[0]));
    for (const proto of ["TCP", "UDP"]) {
      assert.ok(packets.some((p) => p.text.includes(proto)), `${proto} seen on the segment`);
    }
    for (const p of packets) {
      assert.deepEqual(p.headers.map((h) => h.dscp), [AF31], `AF31: ${p.text}`);
    }
  });

  await t.step(
    "a PATCH is seen on the wire: data becomes AF11, storage loses its marking, plain gains EF",
    async () => {
      await patch(stack, "data", { dscp: AF11 });
      await patch(stack, "storage", { dscp: null });
      await patch(stack, "plain", { dscp: EF });
      for (const node of [n1, n2]) {
        await marking(node, AF11, true);
        await marking(node, AF31, false);
        await marking(node, EF, true);
      }
      const packets = await tunnelled(async () => {
        await exchange(d1, d2, d2.ips[0]);
        await exchange(p1, p2, p2.ips[0]);
      });
      const want = new Map([[data.segmentId, AF11], [plain.segmentId, EF]]);
      for (const vni of want.keys()) {
        assert.ok(packets.some((p) => p.vni === vni), `VNI ${vni} seen`);
      }
      for (const p of packets) {
        const dscp = want.get(p.vni);
        assert.deepEqual(p.headers.map((h) => h.dscp), [dscp, dscp], `now ${dscp}: ${p.text}`);
      }
      const vlan = await tagged(() => exchange(s1, s2, s2.ips[0]));
      assert.ok(vlan.length > 0, "storage traffic seen");
      for (const p of vlan) assert.deepEqual(p.headers.map((h) => h.dscp), [0], p.text);
    },
  );

  for (const p of [d1, d2, p1, p2, s1, s2]) assert.equal((await p.pod.del()).code, 0);
});

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function patch(stack: Stack, network: string, body: unknown): Promise<void> {
  const r = await stack.api("PATCH", `tenants/acme/networks/${network}`, body);
  assert.equal(r.status, 200, `PATCH ${network}: ${JSON.stringify(r.body)}`);
}

async function added(node: StackNode, name: string, network: string): Promise<Added> {
  const pod = await makePod(node, name, "acme", knitterList([network]));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ips = addressesOf(r.out).map((a) => a.address.split("/")[0]);
  return { pod, ns: ipNetnsName(pod.netns), ips };
}

/** Waits until the node's flows mark (or no longer mark) with `dscp`: the agent heard the PATCH. */
async function marking(node: StackNode, dscp: number, present: boolean): Promise<void> {
  const ovs = new Ovs(node.sim.ovs);
  await waitFor(`${node.name}: flows ${present ? "" : "no longer "}marking ${dscp}`, async () => {
    const flows = await ovs.dumpFlows("br-int", "table=10");
    return flows.some((f) => f.includes(`set_field:${dscp}->ip_dscp,`)) === present;
  }, 20_000);
}

async function ping(from: Added, ip: string, extra: string[]): Promise<void> {
  const r = await run(
    ["ip", "netns", "exec", from.ns, "ping", "-c", "2", "-i", "0.2", "-W", "1", ...extra, ip],
    { check: false },
  );
  assert.equal(r.code, 0, `ping ${extra.join(" ")} ${ip} from ${from.pod.name}: ${r.stdout}`);
}

/** The packets tcpdump (-v) saw on `iface` in `netns` matching `filter` while `traffic` ran. */
async function captured(
  cleanup: Cleanup,
  netns: string,
  iface: string,
  filter: string,
  traffic: () => Promise<void>,
): Promise<Packet[]> {
  const cap = await startCapture(cleanup, netns, iface, filter, {
    count: 100_000,
    timeoutMs: 120_000,
    verbose: true,
  });
  let lines: string[];
  try {
    await traffic();
  } finally {
    // The traffic is over: what tcpdump has not printed within a second is not coming.
    lines = await cap.done(1000);
  }
  const packets = parsePackets(lines);
  assert.ok(packets.length > 0, `nothing captured on ${iface} in ${netns} for "${filter}"`);
  return packets;
}

/** A packet starts on a line with its timestamp; -v continues it on indented lines. */
function parsePackets(lines: string[]): Packet[] {
  const texts: string[] = [];
  for (const l of lines) {
    if (/^\d{2}:\d{2}:\d{2}\.\d+ /.test(l) || texts.length === 0) texts.push(l);
    else texts[texts.length - 1] += `\n${l}`;
  }
  return texts.map((text) => {
    const vni = /vni (\d+)/.exec(text);
    return { ...(vni ? { vni: Number(vni[1]) } : {}), headers: headersOf(text), text };
  });
}

/**
 * The IP headers tcpdump -v printed, outermost first: IPv4's "(tos 0x..", IPv6's "(class 0x.."
 * (which it leaves out when the traffic class is 0). After 802.1Q, no length precedes them.
 */
function headersOf(text: string): Header[] {
  const at =
    /ethertype (IPv4|IPv6) \(0x[0-9a-f]{4}\),(?: length \d+:)? (\((?:tos|class) (0x[0-9a-f]+))?/g;
  return [...text.matchAll(at)].map((m) => {
    const tos = m[3] === undefined ? 0 : Number.parseInt(m[3], 16);
    return { family: m[1] === "IPv4" ? 4 : 6, dscp: tos >> 2, ecn: tos & 3 };
  });
}
