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
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod } from "./support/pods.ts";
import { type Stack, startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import { tcpExchange } from "./support/traffic.ts";
import { SLOW_PATH_LIMITS } from "../agent/punt/router_slow_path.ts";

interface Added {
  name: string;
  ns: string;
  ip: string;
}

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
  const red = await pod(n1, "red-1", ["red"]);
  const other = await pod(n1, "red-2", ["red"]);
  const blue = await pod(n2, "blue-2", ["blue"]);
  const small = await pod(n2, "small-2", ["small"]);
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
      // TCP across the step: the small pod's veth (both ends) says 1450, so its MSS invites
      // full-size segments from red; those are not forwarded, and only the router's answer lets the
      // stream shrink to fit (PMTU discovery). Small's own big segments to red pass: no route into
      // a larger MTU checks.
      const peer = /eth0@if(\d+)/.exec((await sh(small, "ip -o link show eth0")).stdout)?.[1];
      const host = new RegExp(`^${peer}: ([^@:]+)`, "m")
        .exec((await run(["ip", "-n", n2.sim.netns, "-o", "link"])).stdout)?.[1];
      assert.ok(host, `the host end of small's veth (ifindex ${peer})`);
      await run(["ip", "-n", n2.sim.netns, "link", "set", host, "mtu", "1450"]);
      await sh(small, "ip link set eth0 mtu 1450");
      await sh(red, `ip route flush cache`);
      const tcp = await tcpExchange(cleanup, red.ns, small.ns, small.ip, 256 * 1024);
      assert.ok(tcp.ok, `TCP across the MTU step: ${JSON.stringify(tcp)}`);
      const route = await sh(red, `ip route get ${small.ip}`);
      assert.match(route.stdout, /mtu 1300/, route.stdout);
    },
  );

  await t.step(
    "attack: red-1 floods TTL-1 packets; red-2's traceroute is still answered",
    async () => {
      // Four pings at once, 400 echo requests with TTL 1 each as fast as ping sends them (each
      // slows to ~80 a second when nothing but errors come back): more than the switch's packet-in
      // limit of 100 a second, for about 5 s, while the traceroutes run.
      const one = `ping -n -q -i 0.001 -c 400 -t 1 ${blue.ip}`;
      const flood = new Deno.Command("ip", {
        args: ["netns", "exec", red.ns, "sh", "-c", `${one} & ${one} & ${one} & ${one} & wait`],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      cleanup.pid(flood.pid);
      // The agent's CPU time over the flood, for the record (a figure, not an assertion).
      const cpuBefore = await cpuSeconds(n1.agentPid);
      const wallBefore = performance.now();
      const flooded = flood.output();
      let ended = false;
      flooded.finally(() => ended = true);
      let traces = 0;
      while (!ended || traces < 3) {
        const r = await sh(other, `busybox traceroute -n -q 1 -w 2 -m 3 ${blue.ip}`);
        assert.deepEqual(
          traceHops(r.stdout),
          ["10.71.0.1", blue.ip],
          `during the flood: ${r.stdout}`,
        );
        traces++;
        // A traceroute's pace: its own port's budget (10 answers a second) is not what is tested.
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      const out = new TextDecoder().decode((await flooded).stdout);
      const cpu = (await cpuSeconds(n1.agentPid)) - cpuBefore;
      const wall = (performance.now() - wallBefore) / 1000;
      console.log(`agent CPU during the flood: ${cpu.toFixed(2)} s in ${wall.toFixed(1)} s`);
      // The flooder got its port's budget of answers (a burst of 10, then 10 a second), far fewer
      // than it sent; ping says how long it ran.
      const sum = (re: RegExp) => [...out.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
      const sent = sum(/(\d+) packets transmitted/g);
      const errors = sum(/\+(\d+) errors/g);
      const seconds = Math.max(...[...out.matchAll(/time (\d+)ms/g)].map((m) => Number(m[1]))) /
        1000;
      // A second more: the four pings start a moment apart, each timing itself.
      const budget = SLOW_PATH_LIMITS.perPortBurst + SLOW_PATH_LIMITS.perPort * (seconds + 1);
      assert.ok(sent > 4 * budget, `the flood sent ${sent}: ${out}`);
      assert.ok(errors > 0 && errors <= budget, `answered ${errors} of ${sent}: ${out}`);
    },
  );
});

/** User and system CPU seconds of process `pid` so far (/proc/PID/stat, clock ticks of 1/100 s). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The address of each hop, in order (`*` where none answered). */
function traceHops(out: string): string[] {
  return out.split("\n").flatMap((line) => {
    const m = /^\s*\d+\s+(\S+)/.exec(line);
    return m && !line.startsWith("traceroute") ? [m[1]] : [];
  });
}

async function pod(node: Stack["nodes"][number], name: string, networks: string[]): Promise<Added> {
  const p = await makePod(node, name, "acme", knitterList(networks));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  return { name, ns: ipNetnsName(p.netns), ip: addressOf(r.out) };
}

function sh(from: Added, command: string) {
  return run(["ip", "netns", "exec", from.ns, "sh", "-c", command], { check: false });
}
