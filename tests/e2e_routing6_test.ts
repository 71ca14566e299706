/**
 * IPv6 routing end to end, the twin of e2e_routing_test.ts and e2e_routed_policy_test.ts
 * (agent/PIPELINE.md, "Routing"), on two simulated nodes with real Open vSwitch (userspace
 * datapath): a router connects acme's red (VXLAN, dual stack: routed over its IPv6 subnet) and
 * blue (VLAN, IPv6 only). Pods of red reach pods of blue on the other node and on their own with
 * TCP and UDP payloads and ping -6, one hop limit less; green (IPv6, on no router) and globex (the
 * same CIDRs, a router of its own) stay apart. A security group that takes TCP only still refuses
 * routed UDP. Then static IPv6 routes send the traffic between the planes through a pod that routes
 * (a CNF with IPv6 forwarding): two hops less, and the CNF sees it.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressesOf, ipNetnsName, knitterList, makePod } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";
import { type Stack, startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import {
  type Added,
  ping as pingFamily,
  reachRouted,
  routedWorld,
} from "./support/routed_world.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { expectExit } from "../knitctl/test_support.ts";
import type { TraceReport } from "../knitctl/trace.ts";

const FAMILY = 6;

const RED6 = "fd00:81::/64";
const BLUE6 = "fd00:82::/64";
/** What a refused exchange waits before it says so (a bound, not a measure). */
const REFUSED = { seconds: 3 };

Deno.test("e2e IPv6 routing: a router connects IPv6 subnets across nodes (TCP, UDP, ping -6, hop limit); other networks and tenants stay apart; security groups hold; static routes through a CNF pod", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const nets = (tenant: string) => [
    {
      name: "red",
      cidr: "10.81.0.0/24",
      gateway: "10.81.0.1",
      cidr6: RED6,
      gateway6: "fd00:81::1",
    },
    { name: "blue", type: "vlan", physnet: "phys1", cidr: BLUE6, gateway: "fd00:82::1" },
    ...(tenant === "acme" ? [{ name: "green", cidr: "fd00:83::/64", gateway: "fd00:83::1" }] : []),
  ];
  const { n1, red, blueFar, blueNear, green, globexRed, globexBlue } = await routedWorld(
    stack,
    nets,
    FAMILY,
  );

  await t.step(
    "red reaches blue on the other node and on its own: ping -6 one hop less, TCP, UDP",
    async () => {
      for (const to of [blueFar, blueNear]) await reachRouted(cleanup, red, to, FAMILY);
    },
  );

  await t.step(
    "knitctl trace, live and offline, follows the routed IPv6 packet to the other node",
    async () => {
      const ctl = await knitctlOn(stack);
      for (const mode of [[], ["--offline"]]) {
        for (const proto of ["tcp", "udp", "icmp"]) {
          const args = ["trace", ...mode, "--src", red.ip, "-t", "acme", "--dst", blueFar.ip];
          const ask = [...args, "--proto", proto, "-o", "json"];
          const r = expectExit(await ctl(ask), 0, ask.join(" ")).json() as TraceReport;
          const seen = JSON.stringify(
            r.hops.map((h) => [h.node, h.steps.map((s) => s.kind), h.outcomes]),
          );
          assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"], `${mode} ${proto}: ${seen}`);
          const kinds = r.hops[0].steps.map((s) => s.kind);
          assert.deepEqual(
            kinds.slice(1),
            ["spoofIpv6", "routeIn", "routeTo", "nextHop", "forwardRemote"],
            `${mode} ${proto}: ${kinds}`,
          );
          assert.equal(r.packet.ipSrc, red.ip, "the source's IPv6 address");
          assert.ok(r.delivered, `${mode} ${proto}: ${r.result}`);
          assert.equal(r.result, "delivered on n2 to acme/blue-2/eth0");
        }
      }
      // Into green, on no router: stopped in ROUTE, saying so.
      const args = ["trace", "--offline", "--src", red.ip, "-t", "acme", "--dst", green.ip];
      const r = expectExit(await ctl([...args, "-o", "json"]), 0, args.join(" "))
        .json() as TraceReport;
      assert.equal(r.delivered, false, r.result);
      assert.match(r.result, /no route/, r.result);
    },
  );

  await t.step("green (on no router) is not reached, and does not reach red", async () => {
    assert.equal((await ping(red, green.ip)).ok, false);
    assert.equal((await ping(green, red.ip)).ok, false);
    const tcp = await tcpExchange(cleanup, red.ns, green.ns, green.ip, 1024, REFUSED);
    assert.equal(tcp.ok, false, JSON.stringify(tcp));
  });

  await t.step(
    "globex, with the same CIDRs and a router of its own, routes to its own pods only",
    async () => {
      // globex's blue pod has the same address as one of acme's (the same CIDR, the same pool).
      const twin = [blueFar, blueNear].find((b) => b.ip === globexBlue.ip);
      assert.ok(twin, `a globex address is also acme's: ${globexBlue.ip}`);
      const cap = await startCapture(cleanup, twin.ns, "eth0", "icmp6[0] == 128 or tcp", {
        timeoutMs: 4_000,
      });
      await waitFor(
        "globex red -> globex blue",
        async () => (await ping(globexRed, globexBlue.ip)).ok,
        20_000,
      );
      const tcp = await tcpExchange(cleanup, globexRed.ns, globexBlue.ns, globexBlue.ip, 64 * 1024);
      assert.ok(tcp.ok, JSON.stringify(tcp));
      assert.deepEqual(await cap.done(), [], `acme's ${twin.name} sees none of globex's traffic`);
      assert.equal((await ping(globexBlue, globexRed.ip)).ttl, 63);
    },
  );

  await t.step(
    "a security group taking TCP from red only: routed TCP passes, routed UDP is refused, on one node and across",
    async () => {
      const group = {
        name: "blue-in6",
        rules: [{ direction: "ingress", protocol: "tcp", peer: { cidr: RED6 } }],
      };
      await api(stack, "POST", "tenants/acme/security-groups", group, 201);
      for (const to of [blueNear, blueFar]) await setGroups(stack, to, "blue", ["blue-in6"]);
      for (const to of [blueNear, blueFar]) {
        await waitFor(
          `UDP red -> ${to.name} refused`,
          async () => !(await udpExchange(cleanup, red.ns, to.ns, to.ip, [100], REFUSED)).ok,
          20_000,
        );
        const udp = await udpExchange(cleanup, red.ns, to.ns, to.ip, [100, 1200], REFUSED);
        assert.equal(udp.ok, false, `UDP red -> ${to.name}: ${JSON.stringify(udp)}`);
        const tcp = await tcpExchange(cleanup, red.ns, to.ns, to.ip, 128 * 1024);
        assert.ok(
          tcp.ok && tcp.received === tcp.sent,
          `TCP red -> ${to.name}: ${JSON.stringify(tcp)}`,
        );
      }
      for (const to of [blueNear, blueFar]) await setGroups(stack, to, "blue", []);
    },
  );

  await t.step(
    "static IPv6 routes carry red <-> blue through a CNF pod (forwarding on): two hops less",
    async () => {
      const cnf = await makePod(
        n1,
        "cnf-1",
        "acme",
        knitterList(["red", { name: "blue", interface: "eth1" }]),
      );
      const added = await cnf.add();
      assert.equal(added.code, 0, `ADD cnf: ${JSON.stringify(added.out)} ${added.stderr}`);
      const cnfRed = v6Of(added.out, "eth0");
      const cnfBlue = v6Of(added.out, "eth1");
      const ns = ipNetnsName(cnf.netns);
      await run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
      await api(stack, "PUT", "tenants/acme/routers/planes", {
        networks: ["red", "blue"],
        routes: [{ dst: BLUE6, via: cnfRed }, { dst: RED6, via: cnfBlue }],
      }, 200);
      // A static route wins over the connected one of the same length: the CNF's hop shows as one
      // more hop; the CNF itself sees the echo requests.
      await waitFor(
        "red -> blue through the CNF",
        async () => (await ping(red, blueFar.ip)).ttl === 62,
        20_000,
      );
      const cap = await startCapture(
        cleanup,
        ns,
        "eth0",
        `icmp6[0] == 128 and dst host ${blueFar.ip}`,
        { count: 2, timeoutMs: 10_000 },
      );
      assert.deepEqual(await ping(red, blueFar.ip), { ok: true, ttl: 62 });
      assert.equal((await cap.done()).length, 2, "the CNF forwards the echo requests");
      assert.deepEqual(await ping(blueNear, red.ip), { ok: true, ttl: 62 });
      const tcp = await tcpExchange(cleanup, red.ns, blueFar.ns, blueFar.ip, 256 * 1024);
      assert.ok(tcp.ok, `TCP through the CNF: ${JSON.stringify(tcp)}`);
      const udp = await udpExchange(cleanup, blueFar.ns, red.ns, red.ip, [64, 1200]);
      assert.ok(udp.ok, `UDP through the CNF: ${JSON.stringify(udp)}`);
      // Taking the CNF's forwarding away cuts the planes apart: the traffic really goes through it.
      await run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"]);
      assert.equal((await ping(red, blueFar.ip)).ok, false);
    },
  );
});

/** The IPv6 address (no prefix) of `ifName` in a CNI result. */
// deno-lint-ignore no-explicit-any
function v6Of(result: any, ifName: string): string {
  const v6 = addressesOf(result, ifName).find((a) => a.address.includes(":"));
  assert.ok(v6, `an IPv6 address on ${ifName}: ${JSON.stringify(result)}`);
  return v6.address.split("/")[0];
}

/** Three pings of the test's family (routed_world.ts). */
function ping(from: Added, ip: string) {
  return pingFamily(from, ip, FAMILY);
}

/** Sets the groups of the pod's port through the manager (a second PUT of the port). */
async function setGroups(stack: Stack, added: Added, network: string, groups: string[]) {
  const ports = await api(stack, "GET", `ports?pod=acme/${added.name}`, undefined, 200);
  assert.equal(ports.items.length, 1, `one port of ${added.name}`);
  const path = `tenants/acme/networks/${network}/ports/${ports.items[0].id}`;
  await api(stack, "PUT", path, { securityGroups: groups }, 200);
}
