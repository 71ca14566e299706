/**
 * What flow records cost (issue 30): iperf3 TCP throughput between two pods on one simulated node
 * (real OVS, userspace datapath), with the agent's flowRecords off, every packet sampled (1 in 1),
 * and 1 packet in 100. The same node, pods and switch for all three: before each measure the agent
 * is restarted with the setting and the stream waits until the bridge's flows have (or have not)
 * their sample actions. Rounds rotate the order of the settings, so the machine's other load falls
 * on all three alike; the first round is a warm-up and not counted. The pods have no security
 * groups (one sample per packet, where it enters br-int). Records go to a UDP port nobody listens
 * on (a remote collector costs the node the same send).
 *
 *   deno run -A tests/bench/flow_records_bench.ts [--rounds N] [--seconds S]    (as root)
 */
import { parseArgs } from "node:util";
import { Cleanup } from "../../devstack/cleanup.ts";
import { ovsPid } from "../../devstack/sim_node.ts";
import { type StackNode, startStack, waitFor } from "../../devstack/stack.ts";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import { sampleProbability } from "@knitter/wasm";
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

/** The settings measured: the agent's flowRecords.sampling; undefined: off. */
const SETTINGS: { label: string; sampling?: number }[] = [
  { label: "flow records off" },
  { label: "every packet sampled (1 in 1)", sampling: 1 },
  { label: "1 packet in 100 sampled", sampling: 100 },
];

const { values } = parseArgs({
  args: Deno.args,
  options: { rounds: { type: "string", default: "5" }, seconds: { type: "string", default: "5" } },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);

await using cleanup = new Cleanup();
const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "warn" });
const [node] = stack.nodes;
await createTenant(stack, "bench");
await createNetwork(stack, "bench", "net", "10.80.0.0/16");
const book = podBook();
const a = await makePod(node, "a", "bench", knitterList(["net"]));
const b = await makePod(node, "b", "bench", knitterList(["net"]));
await book.add(a);
await book.add(b);
const stream = { from: ipNetnsName(a.netns), to: ipNetnsName(b.netns), addr: book.ips.b };

const rates = new Map<string, number[]>(SETTINGS.map((s) => [s.label, []]));
/** CPU milliseconds of ovs-vswitchd and of the agent per GB the stream carried. */
const cpu = new Map<string, { ovs: number[]; agent: number[] }>(
  SETTINGS.map((s) => [s.label, { ovs: [], agent: [] }]),
);
for (let r = 0; r <= rounds; r++) {
  const order = [...SETTINGS.slice(r % 3), ...SETTINGS.slice(0, r % 3)];
  for (const s of order) {
    await configure(node, s.sampling);
    const pids = { ovs: await ovsPid(node.sim, "vswitchd"), agent: node.agentPid };
    const before = { ovs: await cpuMs(pids.ovs), agent: await cpuMs(pids.agent) };
    const bps = await iperfRate(cleanup, stream, seconds);
    // The stream's bytes over its whole time (iperf3 runs one second more than it reports).
    const gb = bps * (seconds + 1) / 8 / 1e9;
    const used = {
      ovs: (await cpuMs(pids.ovs) - before.ovs) / gb,
      agent: (await cpuMs(pids.agent) - before.agent) / gb,
    };
    if (r > 0) {
      rates.get(s.label)!.push(bps);
      cpu.get(s.label)!.ovs.push(used.ovs);
      cpu.get(s.label)!.agent.push(used.agent);
    }
    log(
      `round ${r} ${s.label}: ${gbit(bps)} Gbit/s, CPU per GB: ovs-vswitchd ${
        used.ovs.toFixed(0)
      } ms, agent ${used.agent.toFixed(0)} ms`,
    );
  }
}

const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
const off = median(rates.get(SETTINGS[0].label)!);
console.log(
  `${new Date().toISOString()}, ${machine()}, Open vSwitch ${await ovsVersion()}; iperf3 TCP ` +
    `between two pods on one node, ${seconds} s streams, median of ${rounds} rounds (range), ` +
    `load average at the end ${load}:\n`,
);
console.log(
  "| agent's flowRecords | throughput | against off | ovs-vswitchd CPU per GB | agent CPU per GB |",
);
console.log("| --- | --- | --- | --- | --- |");
const range = (xs: number[], f: (x: number) => string) =>
  `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
const ms = (x: number) => `${x.toFixed(0)} ms`;
for (const s of SETTINGS) {
  const rs = rates.get(s.label)!;
  const c = cpu.get(s.label)!;
  console.log(
    `| ${s.label} | ${range(rs, gbit)} Gbit/s | ${
      s.sampling ? `${((median(rs) / off - 1) * 100).toFixed(1)} %` : "—"
    } | ${range(c.ovs, ms)} | ${range(c.agent, ms)} |`,
  );
}

/**
 * The node's agent restarted with flow records as given (records to a UDP port nobody listens
 * on), once its flows on the bridge have, or have not, the sample actions.
 */
async function configure(node: StackNode, sampling: number | undefined): Promise<void> {
  await node.stopAgent();
  const config = JSON.parse(await Deno.readTextFile(node.agentConfig));
  if (sampling === undefined) delete config.flowRecords;
  else config.flowRecords = { collectors: ["127.0.0.1:9"], sampling };
  await Deno.writeTextFile(node.agentConfig, JSON.stringify(config));
  await node.startAgent();
  const probability = sampling === undefined ? null : `probability=${sampleProbability(sampling)},`;
  await waitFor(`the flows of flowRecords.sampling ${sampling}`, async () => {
    const lines = await new Ovs(node.sim.ovs).dumpFlows("br-int", "table=0");
    const sampled = lines.filter((l) => l.includes("sample("));
    return probability === null
      ? sampled.length === 0
      : sampled.length > 0 && sampled.every((l) => l.includes(probability));
  }, 20_000);
}

function gbit(bps: number): string {
  return (bps / 1e9).toFixed(2);
}

/** A process's CPU time so far (user and system), milliseconds. */
async function cpuMs(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  // After the command's name in parentheses: fields 14 and 15 of proc(5), in clock ticks (100/s).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
