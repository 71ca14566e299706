/**
 * What routing costs a packet (issue 16): ping round trips between pods of one network against
 * pods of two networks a router connects (agent/PIPELINE.md, "Routing": two more tables, a MAC
 * rewrite and dec_ttl on the sending node, both ways), on one node and across two nodes of a
 * simulated stack with real userspace Open vSwitch. The four paths take turns, round after round,
 * so the machine's drift hits them alike; the first round is not counted.
 *
 *   deno run -A tests/bench/routing_bench.ts [--quick]     (as root; also part of bench:cni)
 */
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startStack, waitFor } from "../../devstack/stack.ts";
import { addressOf, ipNetnsName, knitterList, makePod } from "../support/pods.ts";
import { latency, type LatencyFigures } from "./cni_bench.ts";
import { log } from "./support.ts";

export interface RoutingFigures {
  pings: number;
  paths: { what: string; routed: boolean; rtt: LatencyFigures }[];
}

/** The round trip times (ms) of `count` pings from netns `ns` to `ip`, 10 ms apart. */
async function rtts(ns: string, ip: string, count: number): Promise<number[]> {
  const r = await run(["ip", "netns", "exec", ns, "ping", "-c", String(count), "-i", "0.01", ip]);
  return [...r.stdout.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1]));
}

export async function routingFigures(
  cleanup: Cleanup,
  opts: { pings: number; rounds: number },
): Promise<RoutingFigures> {
  log("routing: a two-node stack, red and blue (VXLAN) connected by a router");
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const call = async (path: string, body: unknown) => {
    const r = await stack.api("POST", path, body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${JSON.stringify(r.body)}`);
  };
  await call("tenants", { name: "acme" });
  for (const [name, n] of [["red", 71], ["blue", 72]] as const) {
    await call("tenants/acme/networks", { name, cidr: `10.${n}.0.0/24`, gateway: `10.${n}.0.1` });
  }
  await call("tenants/acme/routers", { name: "r", networks: ["red", "blue"] });
  const pods: Record<string, { ns: string; ip: string }> = {};
  for (
    const [name, node, net] of [
      ["src", 0, "red"],
      ["red-near", 0, "red"],
      ["blue-near", 0, "blue"],
      ["red-far", 1, "red"],
      ["blue-far", 1, "blue"],
    ] as const
  ) {
    const pod = await makePod(stack.nodes[node], name, "acme", knitterList([net]));
    const r = await pod.add();
    if (r.code !== 0) throw new Error(`ADD ${name}: ${JSON.stringify(r.out)}`);
    pods[name] = { ns: ipNetnsName(pod.netns), ip: addressOf(r.out) };
  }
  const paths = [
    { what: "one network, one node", routed: false, to: "red-near" },
    { what: "two networks routed, one node", routed: true, to: "blue-near" },
    { what: "one network, across nodes (VXLAN)", routed: false, to: "red-far" },
    { what: "two networks routed, across nodes (VXLAN)", routed: true, to: "blue-far" },
  ];
  for (const p of paths) {
    const ok = async () => (await rtts(pods.src.ns, pods[p.to].ip, 1).catch(() => [])).length > 0;
    await waitFor(`src -> ${p.to}`, ok, 20_000);
  }
  const times = paths.map(() => [] as number[]);
  for (let r = 0; r <= opts.rounds; r++) {
    // Each round starts with another path.
    for (let k = 0; k < paths.length; k++) {
      const i = (r + k) % paths.length;
      const got = await rtts(pods.src.ns, pods[paths[i].to].ip, opts.pings);
      if (r > 0) times[i].push(...got);
    }
  }
  return {
    pings: opts.pings * opts.rounds,
    paths: paths.map((p, i) => ({ what: p.what, routed: p.routed, rtt: latency(times[i]) })),
  };
}

/** The figures as rows of docs/benchmarks.md's table: each routed path against its twin. */
export function routingMarkdown(f: RoutingFigures): string {
  const ms = (x: number) => `${x.toFixed(3)} ms`;
  const lat = (l: LatencyFigures) => `p50 ${ms(l.p50)}, p99 ${ms(l.p99)}`;
  return f.paths.map((p, i) => {
    const twin = p.routed ? f.paths[i - 1] : undefined;
    const extra = twin
      ? ` (${p.rtt.p50 - twin.rtt.p50 >= 0 ? "+" : ""}${
        ms(p.rtt.p50 - twin.rtt.p50)
      } p50 against ${twin.what})`
      : "";
    return `| ping round trip, ${p.what}, ${f.pings} pings | ${lat(p.rtt)}${extra} |`;
  }).join("\n");
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  await using cleanup = new Cleanup();
  const f = await routingFigures(cleanup, { pings: quick ? 50 : 200, rounds: quick ? 2 : 5 });
  console.log(`| path | round trip |\n|---|---|\n${routingMarkdown(f)}`);
}
