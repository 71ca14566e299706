/**
 * Routing between a tenant's networks end to end (agent/PIPELINE.md, "Routing"), on two simulated
 * nodes with real Open vSwitch (userspace datapath): a router connects acme's red (VXLAN) and blue
 * (VLAN); pods of red reach pods of blue on the other node and on their own with TCP and UDP
 * payloads and ping, one TTL less; green (on no router) and globex (the same CIDRs, a router of its
 * own) stay apart. A router change reaches every node through the change feed. Then static routes
 * send the traffic between the planes through a pod that routes (a CNF: ip_forward=1): two TTLs
 * less, and the CNF sees it.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { expectExit } from "../knitctl/test_support.ts";
import type { TraceReport } from "../knitctl/trace.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import {
  type Added,
  ping as pingFamily,
  reachRouted,
  routedWorld,
} from "./support/routed_world.ts";

const FAMILY = 4;

Deno.test("e2e routing: a tenant's router connects its planes across nodes (TCP, UDP, ping, TTL); other networks and tenants stay apart; static routes through a CNF pod", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const nets = (tenant: string) => [
    { name: "red", cidr: "10.61.0.0/24", gateway: "10.61.0.1" },
    { name: "blue", type: "vlan", physnet: "phys1", cidr: "10.62.0.0/24", gateway: "10.62.0.1" },
    ...(tenant === "acme" ? [{ name: "green", cidr: "10.63.0.0/24", gateway: "10.63.0.1" }] : []),
  ];
  const { n1, red, blueFar, blueNear, green, globexRed, globexBlue } = await routedWorld(
    stack,
    nets,
    FAMILY,
  );

  await t.step(
    "red reaches blue on the other node and on its own: ping one TTL less, TCP, UDP",
    async () => {
      for (const to of [blueFar, blueNear]) await reachRouted(cleanup, red, to, FAMILY);
    },
  );

  await t.step(
    "knitctl trace, live and offline, follows the routed packet to the other node",
    async () => {
      const ctl = await knitctlOn(stack);
      for (const mode of [[], ["--offline"]]) {
        const args = ["trace", ...mode, "--src", red.ip, "-t", "acme", "--dst", blueFar.ip];
        const r = expectExit(await ctl([...args, "-o", "json"]), 0, args.join(" "))
          .json() as TraceReport;
        const seen = JSON.stringify(
          r.hops.map((h) => [h.node, h.steps.map((s) => s.kind), h.outcomes]),
        );
        assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"], `${mode}: ${seen}`);
        const kinds = r.hops[0].steps.map((s) => s.kind);
        assert.deepEqual(
          kinds.slice(2),
          ["routeIn", "routeTo", "nextHop", "forwardRemote"],
          `${kinds}`,
        );
        assert.ok(r.delivered, `${mode}: ${r.result}`);
        assert.equal(r.result, "delivered on n2 to acme/blue-2/eth0");
      }
    },
  );

  await t.step("green (on no router) is not reached, and does not reach red", async () => {
    assert.equal((await ping(red, green.ip)).ok, false);
    assert.equal((await ping(green, red.ip)).ok, false);
    const tcp = await tcpExchange(cleanup, red.ns, green.ns, green.ip, 1024, { seconds: 3 });
    assert.equal(tcp.ok, false, JSON.stringify(tcp));
  });

  await t.step(
    "globex, with the same CIDRs and a router of its own, routes to its own pods only",
    async () => {
      // globex's blue pod has the same address as one of acme's (the same CIDR, the same pool).
      const twin = [blueFar, blueNear].find((b) => b.ip === globexBlue.ip);
      assert.ok(twin, `a globex address is also acme's: ${globexBlue.ip}`);
      const cap = await startCapture(cleanup, twin.ns, "eth0", "icmp or tcp", { timeoutMs: 4_000 });
      await waitFor(
        "globex red -> globex blue",
        async () => (await ping(globexRed, globexBlue.ip)).ok,
        20_000,
      );
      const tcp = await tcpExchange(cleanup, globexRed.ns, globexBlue.ns, globexBlue.ip, 64 * 1024);
      assert.ok(tcp.ok, JSON.stringify(tcp));
      assert.deepEqual(await cap.done(), [], `acme's ${twin.name} sees none of globex's traffic`);
      // acme's red pod and globex's red pod share an address too, and each is reached in its tenant.
      assert.equal((await ping(globexBlue, globexRed.ip)).ttl, 63);
    },
  );

  await t.step(
    "a router change reaches every node: taken apart, blue is cut off; put back, reached again",
    async () => {
      await api(stack, "PUT", "tenants/acme/routers/planes", { networks: ["red"] }, 200);
      await waitFor("red cut off from blue", async () => !(await ping(red, blueFar.ip)).ok, 20_000);
      assert.equal((await ping(blueNear, red.ip)).ok, false);
      await api(stack, "PUT", "tenants/acme/routers/planes", { networks: ["red", "blue"] }, 200);
      await waitFor("red reaches blue again", async () => (await ping(red, blueFar.ip)).ok, 20_000);
    },
  );

  await t.step(
    "static routes carry red <-> blue through a CNF pod (ip_forward=1): two TTLs less",
    async () => {
      const cnf = await makePod(
        n1,
        "cnf-1",
        "acme",
        knitterList(["red", { name: "blue", interface: "eth1" }]),
      );
      const added = await cnf.add();
      assert.equal(added.code, 0, `ADD cnf: ${JSON.stringify(added.out)} ${added.stderr}`);
      const [cnfRed, cnfBlue] = [addressOf(added.out, "eth0"), addressOf(added.out, "eth1")];
      const ns = ipNetnsName(cnf.netns);
      for (const key of ["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0"]) {
        await run(["ip", "netns", "exec", ns, "sysctl", "-qw", key]);
      }
      await api(stack, "PUT", "tenants/acme/routers/planes", {
        networks: ["red", "blue"],
        routes: [{ dst: "10.62.0.0/24", via: cnfRed }, { dst: "10.61.0.0/24", via: cnfBlue }],
      }, 200);
      // A static route is longer-or-equal than the connected one it overrides: the CNF's hop shows as
      // one more TTL; the CNF itself sees the echo requests.
      await waitFor(
        "red -> blue through the CNF",
        async () => (await ping(red, blueFar.ip)).ttl === 62,
        20_000,
      );
      const cap = await startCapture(cleanup, ns, "eth0", `icmp and dst host ${blueFar.ip}`, {
        count: 2,
        timeoutMs: 10_000,
      });
      assert.deepEqual(await ping(red, blueFar.ip), { ok: true, ttl: 62 });
      assert.equal((await cap.done()).length, 2, "the CNF forwards the echo requests");
      assert.deepEqual(await ping(blueNear, red.ip), { ok: true, ttl: 62 });
      const tcp = await tcpExchange(cleanup, red.ns, blueFar.ns, blueFar.ip, 256 * 1024);
      assert.ok(tcp.ok, `TCP through the CNF: ${JSON.stringify(tcp)}`);
      const udp = await udpExchange(cleanup, blueFar.ns, red.ns, red.ip, [64, 1200]);
      assert.ok(udp.ok, `UDP through the CNF: ${JSON.stringify(udp)}`);
      // Taking the CNF's forwarding away cuts the planes apart: the traffic really goes through it.
      await run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=0"]);
      assert.equal((await ping(red, blueFar.ip)).ok, false);
    },
  );
});

/** Three pings of the test's family (routed_world.ts). */
function ping(from: Added, ip: string) {
  return pingFamily(from, ip, FAMILY);
}
