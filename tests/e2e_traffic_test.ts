/**
 * Application traffic, not pings: TCP streams and UDP datagrams with random payloads, echoed and
 * compared byte for byte, between pods on one node and across nodes, on VXLAN, VLAN and flat
 * networks and through a second interface; megabytes at the network's MTU; datagrams larger than
 * the MTU; and all of it again after the agent restarts.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";
import { type Exchange, tcpExchange, udpExchange } from "./support/traffic.ts";

/** One interface of a pod: where to send from (its netns) and its address. */
interface End {
  label: string;
  netns: string;
  ip: string;
}

const MB = 1 << 20;

Deno.test("e2e traffic: TCP and UDP with real payloads between pods, on one node and across nodes, on VXLAN, VLAN, flat and second interfaces, at the MTU and beyond, also after an agent restart", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const [n1, n2] = stack.nodes;
  await create(stack, "physnets", { name: "phys1", vlanRanges: [{ start: 300, end: 309 }] });
  await create(stack, "tenants", { name: "acme" });
  const overlay = await create(stack, "tenants/acme/networks", {
    name: "web",
    cidr: "10.50.0.0/24",
    gateway: "10.50.0.1",
  });
  const vlan = await create(stack, "tenants/acme/networks", {
    name: "storage",
    type: "vlan",
    physnet: "phys1",
    cidr: "10.51.0.0/24",
    gateway: "10.51.0.1",
  });
  await create(stack, "tenants/acme/networks", {
    name: "legacy",
    type: "flat",
    physnet: "phys1",
    cidr: "10.52.0.0/24",
    gateway: "10.52.0.1",
  });

  const a = await added(n1, "a", ["web", { name: "storage", interface: "net1" }]);
  const b = await added(n2, "b", ["web", { name: "storage", interface: "net1" }]);
  const c = await added(n1, "c", ["web"]);
  const f1 = await added(n1, "f1", ["legacy"]);
  const f2 = await added(n2, "f2", ["legacy"]);
  const paths: [string, End, End][] = [
    ["VXLAN, one node", end(a, "eth0"), end(c, "eth0")],
    ["VXLAN, across nodes", end(a, "eth0"), end(b, "eth0")],
    ["VLAN on a second interface, across nodes", end(a, "net1"), end(b, "net1")],
    ["flat, across nodes", end(f1, "eth0"), end(f2, "eth0")],
  ];

  const exchanges = async (label: string) => {
    for (const [what, from, to] of paths) {
      expectOk(
        await tcpExchange(cleanup, from.netns, to.netns, to.ip, 64 * 1024),
        `${label}: TCP ${what} (${from.label} -> ${to.label})`,
      );
      expectOk(
        await udpExchange(cleanup, to.netns, from.netns, from.ip, [1, 512, 1400]),
        `${label}: UDP ${what} (${to.label} -> ${from.label})`,
      );
    }
  };

  await t.step("TCP and UDP on every kind of path", () => exchanges("before any restart"));

  await t.step("megabytes over TCP at the network's MTU, byte for byte", async () => {
    assert.equal(await mtuOf(end(a, "eth0")), overlay.mtu, "the pod's MTU is the network's");
    assert.equal(await mtuOf(end(a, "net1")), vlan.mtu);
    assert.ok(overlay.mtu < vlan.mtu, "the VXLAN network's MTU leaves room for the header");
    for (const [what, from, to] of paths.slice(1, 3)) {
      expectOk(
        await tcpExchange(cleanup, from.netns, to.netns, to.ip, 4 * MB, { seconds: 30 }),
        `4 MB over ${what}`,
      );
    }
  });

  await t.step(
    "larger than the MTU: fragmented as the kernel does, or refused at the sender",
    async () => {
      const [from, to] = [end(a, "eth0"), end(b, "eth0")];
      const payload = overlay.mtu - 28; // IPv4 and ICMP headers
      assert.equal(await dfPing(from, to.ip, payload), "reply", "a full-MTU packet crosses");
      assert.equal(
        await dfPing(from, to.ip, payload + 1),
        "too long",
        "one byte more with don't-fragment is refused at the sender, never dropped silently",
      );
      expectOk(
        await udpExchange(cleanup, from.netns, to.netns, to.ip, [4000, 9000]),
        "UDP datagrams larger than the MTU arrive whole (IP fragments across the tunnel)",
      );
    },
  );

  await t.step(
    "after the agent restarts: the same traffic, and new pods get the same settings",
    async () => {
      // As an agent that predates the fix would have left it.
      await run(["ethtool", "-K", "eth0", "tx", "on"], { netns: ipNetnsName(c.pod.netns) });
      await n1.stopAgent(true);
      await n1.startAgent();
      await waitFor(async () => !(await txChecksumming(end(c, "eth0"))), "restart turns it off");
      await exchanges("after an agent restart");
      const d = await added(n1, "d", ["web"]);
      expectOk(
        await tcpExchange(
          cleanup,
          end(d, "eth0").netns,
          end(b, "eth0").netns,
          end(b, "eth0").ip,
          MB,
        ),
        "a pod added after the restart",
      );
    },
  );

  for (const p of [a, b, c, f1, f2]) assert.equal((await p.pod.del()).code, 0);
});

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

interface Added {
  pod: Pod;
  // deno-lint-ignore no-explicit-any
  result: any;
}

async function added(
  node: Stack["nodes"][number],
  name: string,
  networks: (string | Record<string, unknown>)[],
): Promise<Added> {
  const pod = await makePod(node, name, "acme", knitterList(networks));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  return { pod, result: r.out };
}

function end(p: Added, ifName: string): End {
  return {
    label: `${p.pod.name}/${ifName}`,
    netns: ipNetnsName(p.pod.netns),
    ip: addressOf(p.result, ifName),
  };
}

function expectOk(x: Exchange, what: string): void {
  assert.ok(x.ok, `${what}: ${x.error} (${x.received} of ${x.sent} bytes back)`);
  assert.equal(x.received, x.sent, what);
}

async function mtuOf(e: End): Promise<number> {
  const ifName = e.label.split("/")[1];
  const [link] = JSON.parse(
    (await run(["ip", "-n", e.netns, "-j", "link", "show", ifName])).stdout,
  );
  return link.mtu;
}

async function txChecksumming(e: End): Promise<boolean> {
  const out = (await run(["ethtool", "-k", e.label.split("/")[1]], { netns: e.netns })).stdout;
  return /^tx-checksumming: on/m.test(out);
}

/** A ping with don't-fragment set: "reply", "too long" (refused locally) or "lost". */
async function dfPing(from: End, ip: string, size: number): Promise<string> {
  const r = await run(
    ["ping", "-c", "1", "-W", "2", "-M", "do", "-s", String(size), ip],
    { netns: from.netns, check: false },
  );
  if (r.code === 0) return "reply";
  return /message too long|Message too long|mtu=/.test(r.stdout + r.stderr) ? "too long" : "lost";
}

async function waitFor(fn: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
