/**
 * Where an ADD (and a DEL) of our plugin spends its time. The stack's agent is swapped for the same
 * agent with stopwatches (traced_agent.ts: every command, every manager call, every plugin request
 * it serves); pods are then added and deleted one after the other through the real plugin, and each
 * trace event is attributed to the pod whose exec window holds it.
 */
import { type Cleanup, stopPid } from "../../devstack/cleanup.ts";
import { agentReady, type Stack, waitFor } from "../../devstack/stack.ts";
import { knitterJobs } from "./cni_bench.ts";
import type { DriverRun } from "./driver.ts";
import { drive, log, mean, podNetns, ROOT } from "./support.ts";
import type { TraceEvent } from "./traced_agent.ts";

export interface PhaseShare {
  phase: string;
  /** Mean milliseconds per pod. */
  ms: number;
  /** Mean number of such calls per pod. */
  calls: number;
  /**
   * When the phase's first call started and its last ended, in mean milliseconds from the exec's
   * start (pods without such a call left out): the order the steps run in, side by side or not.
   */
  from?: number;
  to?: number;
}

export interface BurstPhase {
  phase: string;
  calls: number;
  /** Mean milliseconds per call. */
  meanMs: number;
}

export interface Profile {
  pods: number;
  add: { totalMs: number; phases: PhaseShare[] };
  del: { totalMs: number; phases: PhaseShare[] };
  /** A burst of concurrent ADDs under the same stopwatches: what each kind of call cost then. */
  burst: { pods: number; wallMs: number; phases: BurstPhase[] };
  /** The burst of concurrent DELs that follows it, the same way. */
  burstDel: { pods: number; wallMs: number; phases: BurstPhase[] };
  /** Mean milliseconds per call of each phase in the sequential ADDs, to compare with the burst. */
  sequentialPerCall: Map<string, number>;
  /** The same of the sequential DELs. */
  sequentialDelPerCall: Map<string, number>;
}

function perCall(events: TraceEvent[], from: number, to: number): BurstPhase[] {
  const sums = new Map<string, { ms: number; calls: number }>();
  for (const e of events) {
    if (e.start < from || e.end > to) continue;
    const phase = phaseOf(e);
    if (phase === null) continue;
    // KV by operation: which of them a burst multiplies.
    const name = phase === "serve"
      ? "agent: whole request (POST /v1/cni/exec)"
      : e.kind === "kv"
      ? `Deno KV: ${e.what}`
      : phase;
    const s = sums.get(name) ?? { ms: 0, calls: 0 };
    s.ms += e.end - e.start;
    s.calls += 1;
    sums.set(name, s);
  }
  return [...sums].map(([phase, s]) => ({ phase, calls: s.calls, meanMs: s.ms / s.calls }))
    .sort((a, b) => b.meanMs * b.calls - a.meanMs * a.calls);
}

/** Overlaps the others (it holds the flow bundle and KV writes): in the burst table only. */
const SYNC = "waiting for dataplane.sync (queue for the flow mutex, model, compile, bundle, KV)";

/** A trace event's phase name; null for events that are not part of a pod's call. */
function phaseOf(e: TraceEvent): string | null {
  const w = e.what;
  if (e.kind === "serve") return w.startsWith("POST /v1/cni/") ? "serve" : null;
  if (e.kind === "kv") return "Deno KV (agent state: journal, counters)";
  if (e.kind === "sync") return SYNC;
  if (e.kind === "ovsdb") {
    return w === "add ports"
      ? "OVSDB: add ports (one transaction, waits for ovs-vswitchd)"
      : "OVSDB: delete ports (one transaction; ovs-vswitchd lets them go after)";
  }
  if (e.kind === "http") {
    if (w.includes("/api/v1/feed")) return null; // the change feed's long poll runs on its own
    if (w.startsWith("PUT ") && w.includes("/ports/")) {
      return "manager: PUT port (HTTP, unix socket)";
    }
    if (w.startsWith("DELETE ") && w.includes("/ports/")) return "manager: DELETE port";
    return `manager: ${w}`;
  }
  if (/\bip (-n \S+ )?-json -batch -/.test(w)) {
    return "ip -batch in the pod netns (ip -n): MAC, addresses, routes (the veth pair sent before)";
  }
  if (w.includes("ovs-vsctl") && w.includes("add-port")) {
    return "ovs-vsctl add-port (one transaction, waits for ovs-vswitchd)";
  }
  if (w.includes("ovs-vsctl") && w.includes("del-port")) {
    return "ovs-vsctl del-port (waits for ovs-vswitchd)";
  }
  if (w.includes("ovs-vsctl") && w.includes(" list Interface")) {
    return "ovs-vsctl list Interface (read ofports)";
  }
  if (w.includes("ovs-ofctl") && w.includes(" bundle ")) {
    return "ovs-ofctl bundle (flow difference)";
  }
  if (w.includes("ovs-ofctl")) return "ovs-ofctl (other)";
  if (/\bip link del\b/.test(w)) return "ip link del (host end of the veth)";
  return `other command: ${w.split(" ").slice(0, 3).join(" ")}`;
}

function attribute(
  runs: DriverRun[],
  events: TraceEvent[],
): { totalMs: number; phases: PhaseShare[] } {
  const sums = new Map<string, { ms: number; calls: number }>();
  const add = (phase: string, ms: number, calls = 1) => {
    const s = sums.get(phase) ?? { ms: 0, calls: 0 };
    s.ms += ms;
    s.calls += calls;
    sums.set(phase, s);
  };
  const spans = new Map<string, { from: number[]; to: number[] }>();
  for (const r of runs) {
    const inside = events.filter((e) => e.start >= r.start && e.end <= r.end);
    for (const [phase, [from, to]] of spansOf(inside)) {
      const s = spans.get(phase) ?? { from: [], to: [] };
      s.from.push(from - r.start);
      s.to.push(to - r.start);
      spans.set(phase, s);
    }
    const serve = inside.filter((e) => phaseOf(e) === "serve");
    const served = serve.reduce((a, e) => a + (e.end - e.start), 0);
    const timedSpans: [number, number][] = [];
    for (const e of inside) {
      const phase = phaseOf(e);
      if (phase === null || phase === "serve" || phase === SYNC) continue;
      add(phase, e.end - e.start);
      timedSpans.push([e.start, e.end]);
    }
    // Some steps run side by side: the rest is what no timed step covers.
    const accounted = coveredMs(timedSpans);
    add("plugin process: exec, request to the agent, result", r.ms - served, 0);
    add(
      "agent, rest: flow compile, JSON, waiting for the event loop",
      served - accounted,
      0,
    );
  }
  const n = runs.length;
  const phases = [...sums].map(([phase, s]) => {
    const span = spans.get(phase);
    const when = span ? { from: mean(span.from), to: mean(span.to) } : {};
    return { phase, ms: s.ms / n, calls: s.calls / n, ...when };
  }).sort((a, b) => b.ms - a.ms);
  return { totalMs: mean(runs.map((r) => r.ms)), phases };
}

/** Each timed phase's first start and last end among `events` (one pod's). */
function spansOf(events: TraceEvent[]): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  for (const e of events) {
    const phase = phaseOf(e);
    if (phase === null || phase === "serve") continue;
    const [from, to] = out.get(phase) ?? [e.start, e.end];
    out.set(phase, [Math.min(from, e.start), Math.max(to, e.end)]);
  }
  return out;
}

function meansOf(phases: BurstPhase[]): Map<string, number> {
  return new Map(phases.map((p) => [p.phase, p.meanMs]));
}

/** How long at least one of the spans was running. */
function coveredMs(spans: [number, number][]): number {
  let total = 0;
  let reach = -Infinity;
  for (const [start, end] of spans.sort((a, b) => a[0] - b[0])) {
    if (end <= reach) continue;
    total += end - Math.max(start, reach);
    reach = end;
  }
  return total;
}

export async function addProfile(
  cleanup: Cleanup,
  stack: Stack,
  pods: number,
  burst: number,
): Promise<Profile> {
  const node = stack.nodes[0];
  const agentConfig = `${node.sim.stateDir}/agent.json`;
  await Deno.stat(agentConfig); // the stack's layout; fail loudly if it changed
  const trace = `${await cleanup.tempDir()}/trace.jsonl`;
  log(`ADD profile: the agent with stopwatches, ${pods} pods one after the other`);
  await node.stopAgent();
  const child = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      node.sim.netns,
      Deno.execPath(),
      "run",
      "-A",
      `${ROOT}/tests/bench/traced_agent.ts`,
      "--config",
      agentConfig,
    ],
    cwd: ROOT,
    env: { KNITTER_BENCH_TRACE: trace },
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  cleanup.pid(child.pid);
  await waitFor("traced agent", () => agentReady(node.agentSocket), 20_000);

  const netnsPaths: string[] = [];
  for (let i = 0; i < Math.max(pods, burst); i++) {
    netnsPaths.push(await podNetns(cleanup, `fp${i}`));
  }
  const job = knitterJobs(node.agentSocket, netnsPaths);
  const idx = Array.from({ length: pods }, (_, i) => i);
  // The first two warm the plugin and agent paths up; they are not counted.
  const added = await drive(node.sim.netns, {
    mode: "sequential",
    jobs: idx.map((i) => job("ADD", "f", i)),
  }, "profile ADD");
  const deleted = await drive(node.sim.netns, {
    mode: "sequential",
    jobs: idx.map((i) => job("DEL", "f", i, JSON.parse(added.runs[i].stdout))),
  }, "profile DEL");
  log(`ADD profile: ${burst} concurrent ADDs under the same stopwatches`);
  const bidx = Array.from({ length: burst }, (_, i) => i);
  const burstAdded = await drive(node.sim.netns, {
    mode: "concurrent",
    jobs: bidx.map((i) => job("ADD", "g", i)),
  }, "profile burst ADD");
  const burstDeleted = await drive(node.sim.netns, {
    mode: "concurrent",
    jobs: bidx.map((i) => job("DEL", "g", i, JSON.parse(burstAdded.runs[i].stdout))),
  }, "profile burst DEL");

  await stopPid(child.pid);
  await child.status;
  const events: TraceEvent[] = (await Deno.readTextFile(trace)).split("\n").filter((l) => l)
    .map((l) => JSON.parse(l));
  // Leave the stack as it was: its own agent again.
  await node.startAgent();
  const span = (runs: DriverRun[]) =>
    [Math.min(...runs.map((r) => r.start)), Math.max(...runs.map((r) => r.end))] as const;
  const phasesIn = (runs: DriverRun[]) => perCall(events, ...span(runs));
  return {
    pods: pods - 2,
    add: attribute(added.runs.slice(2), events),
    del: attribute(deleted.runs.slice(2), events),
    burst: { pods: burst, wallMs: burstAdded.wallMs, phases: phasesIn(burstAdded.runs) },
    burstDel: { pods: burst, wallMs: burstDeleted.wallMs, phases: phasesIn(burstDeleted.runs) },
    sequentialPerCall: meansOf(phasesIn(added.runs.slice(2))),
    sequentialDelPerCall: meansOf(phasesIn(deleted.runs.slice(2))),
  };
}
