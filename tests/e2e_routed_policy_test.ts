/**
 * Security groups on routed traffic end to end (agent/PIPELINE.md, "Security groups" and
 * "Routing"), on two simulated nodes with real Open vSwitch (userspace datapath, connection
 * tracking): a router connects acme's red and blue. A red port may open TCP to blue's CIDR, a blue
 * port takes TCP from red's: the connection carries its payload both ways (the replies need no
 * rule), on one node and across nodes. UDP no rule allows is dropped going out and coming in, and a
 * red port whose groups allow nothing outbound reaches nothing through the router. Routing changes
 * the packet's network before FORWARD: the egress rules follow the port, not the network, and the
 * networks a router joins track their connections in one conntrack zone.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import {
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  type Pod,
  podBook,
} from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";
import { startCapture } from "./support/capture.ts";

const RED = "10.71.0.0/24";
const BLUE = "10.72.0.0/24";
const WEB = 8080;
/** UDP the red port may send, but no blue port takes. */
const DNS = 5353;
/** What a refused exchange waits before it says so (a bound, not a measure). */
const REFUSED = { seconds: 3 };

const GROUPS = [
  {
    name: "red-out",
    rules: [
      { direction: "egress", protocol: "tcp", peer: { cidr: BLUE } },
      { direction: "egress", protocol: "udp", ports: String(DNS), peer: { cidr: BLUE } },
    ],
  },
  { name: "blue-in", rules: [{ direction: "ingress", protocol: "tcp", peer: { cidr: RED } }] },
  // Nothing allowed: neither out nor in.
  { name: "mute", rules: [] },
];

Deno.test("e2e routed policy: security groups hold on traffic a router carries, on one node and across nodes", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "red", RED);
  await createNetwork(stack, "acme", "blue", BLUE);
  await api(
    stack,
    "POST",
    "tenants/acme/routers",
    { name: "planes", networks: ["red", "blue"] },
    201,
  );
  for (const g of GROUPS) await api(stack, "POST", "tenants/acme/security-groups", g, 201);

  const book = podBook();
  const pod = async (node: StackNode, name: string, network: string) => {
    const p = await makePod(node, name, "acme", knitterList([network]));
    await book.add(p);
    return p;
  };
  const red = await pod(n1, "red", "red");
  const mute = await pod(n1, "mute", "red");
  const blueNear = await pod(n1, "blue-near", "blue");
  const blueFar = await pod(n2, "blue-far", "blue");
  // Without groups: the replies of a red port with rules come back through the router.
  const bluePlain = await pod(n2, "blue-plain", "blue");
  const ip = book.ips;
  const tcp = (from: Pod, to: Pod, opts = {}) =>
    tcpExchange(cleanup, ns(from), ns(to), ip[to.name], 128 * 1024, { port: WEB, ...opts });
  const udp = (from: Pod, to: Pod, port: number, opts = {}) =>
    udpExchange(cleanup, ns(from), ns(to), ip[to.name], [100, 1200], { port, ...opts });

  // Routed, before any group: every pair is reached (the router works).
  await waitFor(
    "red -> blue-far routed",
    async () => (await tcp(red, blueFar, REFUSED)).ok,
    20_000,
  );

  await setGroups(stack, red, "red", ["red-out"]);
  await setGroups(stack, mute, "red", ["mute"]);
  await setGroups(stack, blueNear, "blue", ["blue-in"]);
  await setGroups(stack, blueFar, "blue", ["blue-in"]);
  await untilFlow(n1, "table=51", `nw_src=${RED}`);
  await untilFlow(n2, "table=51", `nw_src=${RED}`);
  await untilFlow(n1, "table=30", `dl_dst=${(await macOf(stack, mute)).toLowerCase()}`);

  await t.step(
    "TCP red -> blue through the router, payload both ways, on one node and across",
    async () => {
      for (const to of [blueNear, blueFar, bluePlain]) {
        const r = await tcp(red, to);
        assert.ok(r.ok && r.received === r.sent, `red -> ${to.name}: ${JSON.stringify(r)}`);
      }
    },
  );

  await t.step("UDP no rule allows is dropped: out of red, and into blue", async () => {
    // Out: red's egress rules allow UDP to blue's port DNS only.
    for (const to of [blueNear, blueFar]) {
      const r = await udp(red, to, DNS + 1, REFUSED);
      assert.equal(r.ok, false, `red -> ${to.name} UDP ${DNS + 1}: ${JSON.stringify(r)}`);
    }
    // In: red may send UDP to DNS, but blue's ports take TCP only; a port without groups takes it.
    for (const to of [blueNear, blueFar]) {
      const r = await udp(red, to, DNS, REFUSED);
      assert.equal(r.ok, false, `red -> ${to.name} UDP ${DNS}: ${JSON.stringify(r)}`);
    }
    const plain = await udp(red, bluePlain, DNS);
    assert.ok(plain.ok, `red -> blue-plain UDP ${DNS}: ${JSON.stringify(plain)}`);
    // blue's ports have no egress rule: they open nothing, routed or not.
    const back = await udp(blueFar, red, DNS, REFUSED);
    assert.equal(back.ok, false, `blue-far -> red UDP: ${JSON.stringify(back)}`);
  });

  await t.step(
    "a port whose groups allow nothing out reaches nothing through the router",
    async () => {
      for (const to of [blueNear, blueFar, bluePlain]) {
        // Nothing arrives at all (not only no answer): blue's ports would take the TCP, blue-plain
        // anything, so only mute's own egress rules stop it.
        const filter = `src host ${ip[mute.name]} and (tcp or udp)`;
        const cap = await startCapture(cleanup, ns(to), "eth0", filter, { timeoutMs: 12_000 });
        const r = await tcp(mute, to, REFUSED);
        assert.equal(r.ok, false, `mute -> ${to.name} TCP: ${JSON.stringify(r)}`);
        const u = await udp(mute, to, DNS, REFUSED);
        assert.equal(u.ok, false, `mute -> ${to.name} UDP: ${JSON.stringify(u)}`);
        assert.deepEqual(await cap.done(), [], `${to.name} sees nothing of mute`);
      }
    },
  );

  await t.step("the networks a router joins share one conntrack zone on each node", async () => {
    for (const node of [n1, n2]) {
      const cts = (await flows(node)).flatMap((l) => l.match(/ct\([^)]*\)/g) ?? []);
      assert.ok(cts.length > 0, `${node.name} tracks connections`);
      const zones = new Set(cts.map((ct) => /zone=(\d+)/.exec(ct)?.[1]));
      assert.equal(zones.size, 1, `${node.name}: ${[...zones]}`);
      assert.ok(!zones.has(undefined), `${node.name}: ${cts.join(" ")}`);
    }
  });
});

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

// deno-lint-ignore no-explicit-any
async function portOf(stack: Stack, pod: Pod): Promise<any> {
  const ports = await api(stack, "GET", `ports?pod=acme/${pod.name}`, undefined, 200);
  assert.equal(ports.items.length, 1, `one port of ${pod.name}`);
  return ports.items[0];
}

async function macOf(stack: Stack, pod: Pod): Promise<string> {
  return (await portOf(stack, pod)).mac;
}

/** Sets the groups of the pod's port through the manager (a second PUT of the port). */
async function setGroups(stack: Stack, pod: Pod, network: string, groups: string[]) {
  const port = await portOf(stack, pod);
  const path = `tenants/acme/networks/${network}/ports/${port.id}`;
  await api(stack, "PUT", path, { securityGroups: groups }, 200);
}

/** The node's br-int flows (canonical, sorted). */
function flows(node: StackNode, match?: string): Promise<string[]> {
  return new Ovs(node.sim.ovs).dumpFlows("br-int", match);
}

/** Waits until a flow of `match` holds `text`. */
async function untilFlow(node: StackNode, match: string, text: string) {
  await waitFor(`${node.name}: a flow with ${text}`, async () => {
    return (await flows(node, match)).some((l) => l.includes(text));
  }, 15_000);
}
