/**
 * IPv6 egress and hostAccess end to end, the twin of e2e_egress_test.ts (agent/README.md, "Egress
 * and the node"): on two simulated nodes with real Open vSwitch (userspace datapath) and their own
 * kernels, pods of a dual-stack network with `egress` reach an external host over IPv6 (a netns of
 * the test's own on the underlay, with no route to any pod subnet) by TCP, UDP and ping, seen from
 * their own node's IPv6 address; two tenants' egress networks with the same subnets and pod
 * addresses do so at once; a network without egress reaches nothing. With `hostAccess`, a node
 * reaches its own pods over IPv6 (a probe), not another node's.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, startStack } from "../devstack/stack.ts";
import { startCapture } from "./support/capture.ts";
import { externalHost } from "./support/external_host.ts";
import {
  addressesOf,
  ipNetnsName,
  knitterList,
  makePod,
  pingFrom,
  type Pod,
} from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

/** The underlay's IPv6 subnet: the external host and each node's own address on it. */
const EXTERNAL6 = "fd00:ff::250";
const NODE6 = ["fd00:ff::1", "fd00:ff::2"];

interface Added extends Pod {
  /** The pod's IPv6 address on eth0. */
  ip6: string;
}

Deno.test("e2e egress IPv6: masqueraded to the node for egress networks only, the same subnets for two tenants at once, probes on hostAccess networks from the pod's own node only", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  const ext = await externalHost(cleanup);
  await run(["ip", "-n", ext, "addr", "add", `${EXTERNAL6}/64`, "dev", "eth0", "nodad"]);
  for (const [i, node] of stack.nodes.entries()) {
    await run([
      "ip",
      "-n",
      node.sim.netns,
      "addr",
      "add",
      `${NODE6[i]}/64`,
      "dev",
      "br-phy",
      "nodad",
    ]);
  }
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  // acme/out and globex/out: egress, the same subnets. acme/web: hostAccess. acme/quiet: neither.
  await network(stack, "acme", "out", 90, { egress: true });
  await network(stack, "globex", "out", 90, { egress: true });
  await network(stack, "acme", "web", 91, { hostAccess: true });
  await network(stack, "acme", "quiet", 92, {});
  // IPv6 only: egress, and hostAccess.
  await create(stack, "tenants/acme/networks", {
    name: "out6",
    cidr: "fd00:93::/64",
    gateway: "fd00:93::1",
    egress: true,
  });
  await create(stack, "tenants/acme/networks", {
    name: "web6",
    cidr: "fd00:94::/64",
    gateway: "fd00:94::1",
    hostAccess: true,
  });

  const acmeOut = await pod(n1, "aout", "acme", { name: "out", ip: "10.90.0.10" });
  const globexOut = await pod(n1, "gout", "globex", { name: "out", ip: "10.90.0.10" });
  const quiet = await pod(n1, "quiet", "acme", "quiet");
  const web = await pod(n1, "web", "acme", "web");
  const acmeOut2 = await pod(n2, "aout2", "acme", "out");
  const only6 = await pod(n1, "only6", "acme", "out6");
  const web6 = await pod(n1, "web6", "acme", "web6");

  await t.step(
    "an egress network's pod reaches the external host over IPv6 (TCP, UDP, ping), as its node",
    async () => {
      await egressWorks(cleanup, acmeOut, ext, NODE6[0]);
      await egressWorks(cleanup, acmeOut2, ext, NODE6[1]);
    },
  );

  await t.step(
    "an IPv6-only network's pod reaches the external host too; the node probes an IPv6-only hostAccess pod",
    async () => {
      await egressWorks(cleanup, only6, ext, NODE6[0]);
      const probe = await tcpExchange(cleanup, n1.sim.netns, ns(web6), web6.ip6, 1000);
      assert.ok(probe.ok, `n1 to ${web6.ip6}: ${JSON.stringify(probe)}`);
    },
  );

  await t.step(
    "a network without egress reaches nothing outside over IPv6, and the external host sees nothing of it",
    async () => {
      const cap = await startCapture(cleanup, ext, "eth0", `ip6 and src host ${quiet.ip6}`, {
        count: 1,
        timeoutMs: 4000,
      });
      assert.equal(await pingFrom(ns(quiet), EXTERNAL6), false, "no ping out of quiet");
      const tcp = await tcpExchange(cleanup, ns(quiet), ext, EXTERNAL6, 1000, { seconds: 2 });
      assert.equal(tcp.ok, false, `no TCP out of quiet: ${JSON.stringify(tcp)}`);
      assert.deepEqual(await cap.done(500), [], "nothing of quiet reached the external host");
      // hostAccess alone is no egress either.
      assert.equal(await pingFrom(ns(web), EXTERNAL6), false, "no ping out of web");
    },
  );

  await t.step(
    "two tenants, the same IPv6 subnet and pod address on one node: both reach out at once",
    async () => {
      assert.equal(acmeOut.ip6, globexOut.ip6);
      const [a, b] = await Promise.all([
        tcpExchange(cleanup, ns(acmeOut), ext, EXTERNAL6, 200_000),
        tcpExchange(cleanup, ns(globexOut), ext, EXTERNAL6, 200_000),
      ]);
      assert.ok(a.ok, `acme: ${JSON.stringify(a)}`);
      assert.ok(b.ok, `globex: ${JSON.stringify(b)}`);
      const [ua, ub] = await Promise.all([
        udpExchange(cleanup, ns(acmeOut), ext, EXTERNAL6, [64, 1200]),
        udpExchange(cleanup, ns(globexOut), ext, EXTERNAL6, [64, 1200]),
      ]);
      assert.ok(ua.ok && ub.ok, `UDP: ${JSON.stringify([ua, ub])}`);
    },
  );

  await t.step(
    "hostAccess: the node reaches its own pod over IPv6 (TCP, ping), another node does not",
    async () => {
      const probe = await tcpExchange(cleanup, n1.sim.netns, ns(web), web.ip6, 1000);
      assert.ok(probe.ok, `n1 to ${web.ip6}: ${JSON.stringify(probe)}`);
      assert.ok(await pingFrom(n1.sim.netns, web.ip6), `n1 pings ${web.ip6}`);
      const far = await tcpExchange(cleanup, n2.sim.netns, ns(web), web.ip6, 100, { seconds: 2 });
      assert.equal(far.ok, false, `n2 to n1's pod: ${JSON.stringify(far)}`);
      // An egress-only network is not the node's to reach.
      const out = await tcpExchange(cleanup, n1.sim.netns, ns(acmeOut), acmeOut.ip6, 100, {
        seconds: 2,
      });
      assert.equal(out.ok, false, `n1 to an egress-only pod: ${JSON.stringify(out)}`);
    },
  );
});

/** TCP, UDP and ping from the pod to the external host, each seen there from `nodeIp` only. */
async function egressWorks(cleanup: Cleanup, p: Added, ext: string, nodeIp: string) {
  const cap = await startCapture(cleanup, ext, "eth0", `ip6 and dst host ${EXTERNAL6}`, {
    count: 5,
    timeoutMs: 15_000,
  });
  const tcp = await tcpExchange(cleanup, ns(p), ext, EXTERNAL6, 100_000);
  assert.ok(tcp.ok, `TCP from ${p.name}: ${JSON.stringify(tcp)}`);
  const udp = await udpExchange(cleanup, ns(p), ext, EXTERNAL6, [1, 512, 1400]);
  assert.ok(udp.ok, `UDP from ${p.name}: ${JSON.stringify(udp)}`);
  assert.ok(await pingFrom(ns(p), EXTERNAL6), `ping -6 from ${p.name}`);
  const seen = (await cap.done(1000)).filter((l) => !l.includes("ICMP6, neighbor"));
  assert.ok(seen.length > 0, "the external host saw the traffic");
  for (const line of seen) {
    // tcpdump -nn -e: "... length N: fd00:ff::1.40000 > fd00:ff::250.20000: ..." (ICMP6: no ports)
    assert.ok([".", " "].some((c) => line.includes(`: ${nodeIp}${c}`)), `from ${nodeIp}: ${line}`);
    assert.ok(!line.includes(p.ip6), `no pod address on the wire: ${line}`);
  }
}

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

async function pod(
  node: Stack["nodes"][number],
  name: string,
  tenant: string,
  network: string | Record<string, unknown>,
): Promise<Added> {
  const p = await makePod(node, name, tenant, knitterList([network]));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const v6 = addressesOf(r.out).find((a) => a.address.includes(":"));
  assert.ok(v6, `${name} has an IPv6 address: ${JSON.stringify(r.out)}`);
  return Object.assign(p, { ip6: v6.address.split("/")[0] });
}

/** A dual-stack network: 10.N.0.0/24 and fd00:N::/64, gateways .1 and ::1. */
async function network(
  stack: Stack,
  tenant: string,
  name: string,
  n: number,
  more: Record<string, unknown>,
): Promise<void> {
  await create(stack, `tenants/${tenant}/networks`, {
    name,
    cidr: `10.${n}.0.0/24`,
    gateway: `10.${n}.0.1`,
    cidr6: `fd00:${n}::/64`,
    gateway6: `fd00:${n}::1`,
    ...more,
  });
}

async function create(stack: Stack, path: string, body: unknown): Promise<void> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
}
