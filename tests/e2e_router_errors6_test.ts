/**
 * The distributed router's ICMPv6 errors end to end, the twin of e2e_router_errors_test.ts
 * (agent/PIPELINE.md, "Router errors"), on two simulated nodes with real Open vSwitch (userspace
 * datapath): a tenant's router joins red (dual stack: its IPv6 errors come from its gateway6),
 * blue (IPv6 only) and small (IPv6 only, a smaller MTU). traceroute6 from a red pod to a blue pod
 * on the other node shows red's gateway and then the destination; ping -6 with hop limit 1 gets
 * "time exceeded"; a destination no route covers gets "no route" (a TCP connect fails with it at
 * once); the gateway's own address refuses TCP; a packet larger than small's MTU gets "packet too
 * big" with that MTU (IPv6 routers never fragment) and TCP adapts to it (PMTU discovery).
 * Attack: a pod floods packets whose hop limit runs out, and another pod's traceroute6 is still
 * answered.
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

const RED_GW6 = "fd00:74::1";

Deno.test("e2e IPv6 router errors: traceroute6 shows the router's hop, hop limit exceeded, no route, port unreachable and packet too big come back from the gateway, a flood does not starve another pod", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" });
  for (
    const body of [
      {
        name: "red",
        cidr: "10.74.0.0/24",
        gateway: "10.74.0.1",
        cidr6: "fd00:74::/64",
        gateway6: RED_GW6,
      },
      { name: "blue", cidr: "fd00:75::/64", gateway: "fd00:75::1" },
      // A smaller MTU than red's 1450 (VXLAN's default), above IPv6's minimum of 1280.
      { name: "small", cidr: "fd00:76::/64", gateway: "fd00:76::1", mtu: 1300 },
    ]
  ) await api(stack, "POST", "tenants/acme/networks", body);
  await api(stack, "POST", "tenants/acme/routers", {
    name: "r",
    networks: ["red", "blue", "small"],
  });
  const red = await routerPod(n1, "red-1", ["red"], 6);
  const other = await routerPod(n1, "red-2", ["red"], 6);
  const blue = await routerPod(n2, "blue-2", ["blue"], 6);
  const small = await routerPod(n2, "small-2", ["small"], 6);
  // The destination's own port unreachables are not what is tested: its kernel's rate limit off.
  await sh(blue, "sysctl -qw net.ipv6.icmp.ratelimit=0");
  await waitFor(
    `${red.name} -> ${blue.name}`,
    async () => (await sh(red, `ping -6 -c 1 -W 1 ${blue.ip}`)).code === 0,
    20_000,
  );

  await t.step("UDP traceroute6: hop 1 is red's IPv6 gateway, hop 2 the blue pod", async () => {
    const r = await sh(red, `busybox traceroute6 -n -q 1 -w 2 -m 5 ${blue.ip}`);
    assert.deepEqual(traceHops(r.stdout), [RED_GW6, blue.ip], r.stdout + r.stderr);
  });

  await t.step("ICMPv6: ping -6 with hop limit 1 gets time exceeded from the gateway", async () => {
    const r = await sh(red, `ping -6 -n -c 1 -W 2 -t 1 ${blue.ip}`);
    assert.match(r.stdout, /From fd00:74::1 icmp_seq=1 Time exceeded: Hop limit/, r.stdout);
    // With hop limit 2 it arrives.
    assert.equal((await sh(red, `ping -6 -n -c 1 -W 2 -t 2 ${blue.ip}`)).code, 0);
  });

  await t.step("no route: ping -6 gets no route, a TCP connect fails with it at once", async () => {
    const p = await sh(red, "ping -6 -n -c 1 -W 2 fd00:99::5");
    assert.match(
      p.stdout,
      /From fd00:74::1 icmp_seq=1 Destination unreachable: No route/,
      p.stdout,
    );
    // Without the error, the connect would wait out its SYN retries (timeout answers 124).
    const c = await sh(red, "timeout 20 bash -c 'exec 3<>/dev/tcp/fd00:99::5/80'");
    assert.match(c.stderr, /Network is unreachable/, c.stderr);
  });

  await t.step("the gateway's own IPv6 address: a TCP connect is refused", async () => {
    const c = await sh(red, `timeout 20 bash -c 'exec 3<>/dev/tcp/${RED_GW6}/80'`);
    assert.match(c.stderr, /Connection refused/, c.stderr);
    // Its echo is still answered by its flow, not by an error.
    assert.equal((await sh(red, `ping -6 -n -c 1 -W 2 ${RED_GW6}`)).code, 0);
  });

  await t.step(
    "PMTU: a packet larger than small's MTU gets packet too big; TCP adapts",
    async () => {
      const p = await sh(red, `ping -6 -n -c 1 -W 2 -M do -s 1400 ${small.ip}`);
      assert.match(p.stdout, /From fd00:74::1 icmp_seq=1 Packet too big: mtu=1300/, p.stdout);
      // The kernel keeps the path's MTU now; a fitting packet passes.
      const route = await sh(red, `ip -6 route get ${small.ip}`);
      assert.match(route.stdout, /mtu 1300/, route.stdout);
      assert.equal((await sh(red, `ping -6 -n -c 1 -W 2 -M do -s 1252 ${small.ip}`)).code, 0);
      await tcpAcrossMtuStep(cleanup, n2, red, small, 1300);
    },
  );

  await t.step(
    "attack: red-1 floods hop-limit-1 packets; red-2's traceroute6 is still answered",
    async () => {
      await floodWhileTracing({
        cleanup,
        agentPid: n1.agentPid,
        flooder: red,
        tracer: other,
        dst: blue.ip,
        hops: [RED_GW6, blue.ip],
        family: 6,
      });
    },
  );
});
