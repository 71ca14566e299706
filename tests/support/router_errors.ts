/**
 * What the router errors' e2e tests (IPv4 and IPv6) share: a pod with its address of one family,
 * a shell in it, traceroute's hops, TCP across an MTU step, and the flood attack.
 * @module
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { addressesOf, ipNetnsName, knitterList, makePod } from "./pods.ts";
import type { Stack } from "../../devstack/stack.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { tcpExchange } from "./traffic.ts";
import { SLOW_PATH_LIMITS } from "../../agent/punt/router_slow_path.ts";

export interface Added {
  name: string;
  ns: string;
  /** The pod's eth0 address of the family it was added with. */
  ip: string;
}

/** A pod of tenant acme on `networks`, with its eth0 address of `family`. */
export async function routerPod(
  node: Stack["nodes"][number],
  name: string,
  networks: string[],
  family: 4 | 6 = 4,
): Promise<Added> {
  const p = await makePod(node, name, "acme", knitterList(networks));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ip = addressesOf(r.out).find((a) => a.address.includes(":") === (family === 6));
  assert.ok(ip, `an IPv${family} address of ${name}: ${JSON.stringify(r.out)}`);
  return { name, ns: ipNetnsName(p.netns), ip: ip.address.split("/")[0] };
}

/** `command` in the pod's namespace, by sh; never throws on its exit code. */
export function sh(from: Added, command: string) {
  return run(["ip", "netns", "exec", from.ns, "sh", "-c", command], { check: false });
}

/** The address of each hop, in order (`*` where none answered). */
export function traceHops(out: string): string[] {
  return out.split("\n").flatMap((line) => {
    const m = /^\s*\d+\s+(\S+)/.exec(line);
    return m && !line.startsWith("traceroute") ? [m[1]] : [];
  });
}

/** User and system CPU seconds of process `pid` so far (/proc/PID/stat, clock ticks of 1/100 s). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * TCP from `from` across the MTU step into `to` (on `node`), whose network's MTU is `mtu`: both
 * ends of `to`'s veth say 1450, so its MSS invites full-size segments from `from`; those are not
 * forwarded, and only the router's answer lets the stream shrink to fit (PMTU discovery), which
 * `from`'s kernel then keeps for the path. `to`'s own big segments pass: no route into a larger
 * MTU checks.
 */
export async function tcpAcrossMtuStep(
  cleanup: Cleanup,
  node: Stack["nodes"][number],
  from: Added,
  to: Added,
  mtu: number,
) {
  const ip = to.ip.includes(":") ? "ip -6" : "ip";
  const peer = /eth0@if(\d+)/.exec((await sh(to, "ip -o link show eth0")).stdout)?.[1];
  const host = new RegExp(`^${peer}: ([^@:]+)`, "m")
    .exec((await run(["ip", "-n", node.sim.netns, "-o", "link"])).stdout)?.[1];
  assert.ok(host, `the host end of ${to.name}'s veth (ifindex ${peer})`);
  await run(["ip", "-n", node.sim.netns, "link", "set", host, "mtu", "1450"]);
  await sh(to, "ip link set eth0 mtu 1450");
  await sh(from, `${ip} route flush cache`);
  const tcp = await tcpExchange(cleanup, from.ns, to.ns, to.ip, 256 * 1024);
  assert.ok(tcp.ok, `TCP across the MTU step: ${JSON.stringify(tcp)}`);
  const route = await sh(from, `${ip} route get ${to.ip}`);
  assert.match(route.stdout, new RegExp(`mtu ${mtu}`), route.stdout);
}

/** The flood attack: who floods, who traces meanwhile, and what the trace must show. */
export interface FloodCase {
  cleanup: Cleanup;
  /** The agent of the flooder's node, whose CPU time over the flood is recorded. */
  agentPid: number;
  flooder: Added;
  tracer: Added;
  /** The destination both send to (beyond the router). */
  dst: string;
  /** The hops the tracer's traceroute must show during the flood. */
  hops: string[];
  family: 4 | 6;
}

/**
 * `flooder` sends four pings at once, 400 echo requests with TTL (hop limit) 1 each as fast as
 * ping sends them (each slows to ~80 a second when nothing but errors come back): more than the
 * switch's packet-in limit of 100 a second, for about 5 s, while `tracer`'s traceroutes run and
 * must still be answered; the flooder gets no more answers than its port's budget.
 */
export async function floodWhileTracing(c: FloodCase) {
  const v6 = c.family === 6 ? "-6 " : "";
  const one = `ping ${v6}-n -q -i 0.001 -c 400 -t 1 ${c.dst}`;
  const flood = new Deno.Command("ip", {
    args: ["netns", "exec", c.flooder.ns, "sh", "-c", `${one} & ${one} & ${one} & ${one} & wait`],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  c.cleanup.pid(flood.pid);
  // The agent's CPU time over the flood, for the record (a figure, not an assertion).
  const cpuBefore = await cpuSeconds(c.agentPid);
  const wallBefore = performance.now();
  const flooded = flood.output();
  let ended = false;
  flooded.finally(() => ended = true);
  let traces = 0;
  const trace = c.family === 6 ? "traceroute6" : "traceroute";
  while (!ended || traces < 3) {
    const r = await sh(c.tracer, `busybox ${trace} -n -q 1 -w 2 -m 3 ${c.dst}`);
    assert.deepEqual(traceHops(r.stdout), c.hops, `during the flood: ${r.stdout}`);
    traces++;
    // A traceroute's pace: its own port's budget (10 answers a second) is not what is tested.
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const out = new TextDecoder().decode((await flooded).stdout);
  const cpu = (await cpuSeconds(c.agentPid)) - cpuBefore;
  const wall = (performance.now() - wallBefore) / 1000;
  console.log(`agent CPU during the flood: ${cpu.toFixed(2)} s in ${wall.toFixed(1)} s`);
  // The flooder got its port's budget of answers (a burst of 10, then 10 a second), far fewer
  // than it sent; ping says how long it ran.
  const sum = (re: RegExp) => [...out.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  const sent = sum(/(\d+) packets transmitted/g);
  const errors = sum(/\+(\d+) errors/g);
  const seconds = Math.max(...[...out.matchAll(/time (\d+)ms/g)].map((m) => Number(m[1]))) / 1000;
  // A second more: the four pings start a moment apart, each timing itself.
  const budget = SLOW_PATH_LIMITS.perPortBurst + SLOW_PATH_LIMITS.perPort * (seconds + 1);
  assert.ok(sent > 4 * budget, `the flood sent ${sent}: ${out}`);
  assert.ok(errors > 0 && errors <= budget, `answered ${errors} of ${sent}: ${out}`);
}
