/**
 * What flow records cost (issue 30): iperf3 TCP throughput between two pods on one node, on three
 * simulated nodes of one stack (real OVS, userspace datapath) that differ only in the agent's
 * flowRecords: off, every packet sampled (1 in 1), and 1 in 100. The pods have no security groups
 * (one sample per packet, where it enters br-int). Rounds alternate the order of the nodes, so the
 * machine's other load falls on all three alike; the first round is a warm-up and not counted.
 * Records go to a UDP port nobody listens on (a remote collector costs the node the same send).
 *
 *   deno run -A tests/bench/flow_records_bench.ts [--rounds N] [--seconds S]    (as root)
 */
import { parseArgs } from "node:util";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type StackNode, startStack } from "../../devstack/stack.ts";
import { iperfRate } from "../support/iperf.ts";
import { log, machine, median, ovsVersion } from "./support.ts";
import {
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  podBook,
} from "../support/pods.ts";

/** The nodes and their agents' flowRecords; undefined: off. */
const SETTINGS: { node: string; label: string; sampling?: number }[] = [
  { node: "off", label: "flow records off" },
  { node: "every", label: "every packet sampled (1 in 1)", sampling: 1 },
  { node: "hundredth", label: "1 packet in 100 sampled", sampling: 100 },
];

const { values } = parseArgs({
  args: Deno.args,
  options: { rounds: { type: "string", default: "5" }, seconds: { type: "string", default: "5" } },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);

await using cleanup = new Cleanup();
const stack = await startStack({ cleanup, nodes: SETTINGS.map((s) => s.node), logLevel: "warn" });
const byName = new Map(stack.nodes.map((n) => [n.name, n]));
for (const s of SETTINGS) {
  await configure(byName.get(s.node)!, s.sampling);
}
await createTenant(stack, "bench");
await createNetwork(stack, "bench", "net", "10.80.0.0/16");
const book = podBook();
const streams = new Map<string, { from: string; to: string; addr: string }>();
for (const s of SETTINGS) {
  const node = byName.get(s.node)!;
  const a = await makePod(node, `${s.node}a`, "bench", knitterList(["net"]));
  const b = await makePod(node, `${s.node}b`, "bench", knitterList(["net"]));
  await book.add(a);
  await book.add(b);
  streams.set(s.node, {
    from: ipNetnsName(a.netns),
    to: ipNetnsName(b.netns),
    addr: book.ips[b.name],
  });
}

const rates = new Map<string, number[]>(SETTINGS.map((s) => [s.node, []]));
for (let r = 0; r <= rounds; r++) {
  const order = r % 2 === 0 ? SETTINGS : [...SETTINGS].reverse();
  for (const s of order) {
    const bps = await iperfRate(cleanup, streams.get(s.node)!, seconds);
    if (r > 0) rates.get(s.node)!.push(bps);
    log(`round ${r} ${s.label}: ${gbit(bps)} Gbit/s`);
  }
}

const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
const off = median(rates.get("off")!);
console.log(
  `${new Date().toISOString()}, ${machine()}, Open vSwitch ${await ovsVersion()}; iperf3 TCP ` +
    `between two pods on one node, ${seconds} s streams, median of ${rounds} rounds (range), ` +
    `load average at the end ${load}:\n`,
);
console.log("| agent's flowRecords | throughput | against off |");
console.log("| --- | --- | --- |");
for (const s of SETTINGS) {
  const rs = rates.get(s.node)!;
  const m = median(rs);
  console.log(
    `| ${s.label} | ${gbit(m)} Gbit/s (${gbit(Math.min(...rs))}–${gbit(Math.max(...rs))}) | ${
      s.sampling ? `${((m / off - 1) * 100).toFixed(1)} %` : "—"
    } |`,
  );
}

/** The node's agent restarted with flow records as given (a UDP port nobody listens on). */
async function configure(node: StackNode, sampling: number | undefined): Promise<void> {
  await node.stopAgent();
  const config = JSON.parse(await Deno.readTextFile(node.agentConfig));
  if (sampling === undefined) delete config.flowRecords;
  else config.flowRecords = { collectors: ["127.0.0.1:9"], sampling };
  await Deno.writeTextFile(node.agentConfig, JSON.stringify(config));
  await node.startAgent();
}

function gbit(bps: number): string {
  return (bps / 1e9).toFixed(2);
}
