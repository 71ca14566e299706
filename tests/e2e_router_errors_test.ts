/**
 * The distributed router's ICMP errors end to end (agent/PIPELINE.md, "Router errors"), on two
 * simulated nodes with real Open vSwitch (userspace datapath): a tenant's router joins red and
 * blue. traceroute from a red pod to a blue pod on the other node shows the router's hop (red's
 * gateway) and then the destination; a ping with TTL 1 gets "time to live exceeded"; a
 * destination no route covers gets "net unreachable" (ping says so, a TCP connect fails with it at
 * once, not by timeout); the gateway's own address answers a TCP connect with "port unreachable".
 * Attack: a pod floods packets whose TTL runs out, and another pod's traceroute is still answered.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import {
  floodWhileTracing,
  routerPod,
  sh,
  tcpAcrossMtuStep,
  traceHops,
} from "./support/router_errors.ts";

Deno.test("e2e router errors: traceroute shows the router's hop, TTL exceeded and unreachable come back from the gateway, a flood does not starve another pod", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" });
  for (
    const body of [
      { name: "red", cidr: "10.71.0.0/24", gateway: "10.71.0.1" },
      { name: "blue", cidr: "10.72.0.0/24", gateway: "10.72.0.1" },
      // A smaller MTU than red's 1450 (VXLAN's default).
      { name: "small", cidr: "10.73.0.0/24", gateway: "10.73.0.1", mtu: 1300 },
    ]
  ) await api(stack, "POST", "tenants/acme/networks", body);
  await api(stack, "POST", "tenants/acme/routers", {
    name: "r",
    networks: ["red", "blue", "small"],
  });
  const red = await routerPod(n1, "red-1", ["red"]);
  const other = await routerPod(n1, "red-2", ["red"]);
  const blue = await routerPod(n2, "blue-2", ["blue"]);
  const small = await routerPod(n2, "small-2", ["small"]);
  // The destination's own port unreachables are not what is tested: its kernel's rate limit off.
  await sh(blue, "sysctl -qw net.ipv4.icmp_ratelimit=0");
  await waitFor(
    `${red.name} -> ${blue.name}`,
    async () => (await sh(red, `ping -c 1 -W 1 ${blue.ip}`)).code === 0,
    20_000,
  );

  await t.step("UDP traceroute: hop 1 is red's gateway, hop 2 the blue pod", async () => {
    const r = await sh(red, `busybox traceroute -n -q 1 -w 2 -m 5 ${blue.ip}`);
    const hops = traceHops(r.stdout);
    assert.deepEqual(hops, ["10.71.0.1", blue.ip], r.stdout + r.stderr);
  });

  await t.step("ICMP: ping with TTL 1 gets time to live exceeded from the gateway", async () => {
    const r = await sh(red, `ping -n -c 1 -W 2 -t 1 ${blue.ip}`);
    assert.match(r.stdout, /From 10\.71\.0\.1 icmp_seq=1 Time to live exceeded/, r.stdout);
    // With TTL 2 it arrives.
    assert.equal((await sh(red, `ping -n -c 1 -W 2 -t 2 ${blue.ip}`)).code, 0);
  });

  await t.step(
    "no route: ping gets net unreachable, a TCP connect fails with it at once",
    async () => {
      const p = await sh(red, "ping -n -c 1 -W 2 10.99.0.5");
      assert.match(p.stdout, /From 10\.71\.0\.1 icmp_seq=1 Destination Net Unreachable/, p.stdout);
      // Without the error, the connect would wait out its SYN retries (timeout answers 124).
      const c = await sh(red, "timeout 20 bash -c 'exec 3<>/dev/tcp/10.99.0.5/80'");
      assert.match(c.stderr, /Network is unreachable/, c.stderr);
    },
  );

  await t.step(
    "the gateway's own address: a TCP connect is refused (port unreachable)",
    async () => {
      const c = await sh(red, "timeout 20 bash -c 'exec 3<>/dev/tcp/10.71.0.1/80'");
      assert.match(c.stderr, /Connection refused/, c.stderr);
    },
  );

  await t.step("without DF, a packet larger than small's MTU goes on in fragments", async () => {
    // The small pod reassembles and answers; red's kernel learns no smaller MTU.
    const r = await sh(red, `ping -n -c 1 -W 2 -M dont -s 1400 ${small.ip}`);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /Frag needed/);
    assert.doesNotMatch((await sh(red, `ip route get ${small.ip}`)).stdout, /mtu/);
  });

  await t.step(
    "PMTU: a DF packet larger than small's MTU gets fragmentation needed; TCP adapts",
    async () => {
      const p = await sh(red, `ping -n -c 1 -W 2 -M do -s 1400 ${small.ip}`);
      assert.match(
        p.stdout,
        /From 10\.71\.0\.1 icmp_seq=1 Frag needed and DF set \(mtu = 1300\)/,
        p.stdout,
      );
      // The kernel keeps the path's MTU now: a second try is refused locally, a fitting one passes.
      const again = await sh(red, `ping -n -c 1 -W 2 -M do -s 1400 ${small.ip}`);
      assert.match(again.stdout + again.stderr, /message too long, mtu=1300/);
      assert.equal((await sh(red, `ping -n -c 1 -W 2 -M do -s 1272 ${small.ip}`)).code, 0);
      await tcpAcrossMtuStep(cleanup, n2, red, small, 1300);
    },
  );

  await t.step(
    "attack: red-1 floods TTL-1 packets; red-2's traceroute is still answered",
    async () => {
      await floodWhileTracing({
        cleanup,
        agentPid: n1.agentPid,
        flooder: red,
        tracer: other,
        dst: blue.ip,
        hops: ["10.71.0.1", blue.ip],
        family: 4,
      });
    },
  );
});
