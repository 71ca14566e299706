/**
 * What a bandwidth limit costs a pod ADD and DEL: the real plugin wrapper against a one-node stack,
 * the same pods' netns with and without runtimeConfig.bandwidth, in alternating rounds (the ADD
 * without a limit is the yardstick of the same run). The limit adds one step to the wiring: `tc`
 * on the veth's host end and in the pod's netns (agent/interfaces/shaper.ts).
 *
 *   deno run -A tests/bench/bandwidth_bench.ts [--quick]     (as root; also part of bench:cni)
 */
import { Cleanup } from "../../devstack/cleanup.ts";
import {
  knitterJobs,
  knitterSubject,
  latency,
  type LatencyFigures,
  type Subject,
} from "./cni_bench.ts";
import type { DriverJob, DriverRun } from "./driver.ts";
import { drive, log } from "./support.ts";

export interface BandwidthFigures {
  pods: number;
  without: { add: LatencyFigures; del: LatencyFigures };
  limited: { add: LatencyFigures; del: LatencyFigures };
}

const BANDWIDTH = { ingressRate: 20_000_000, egressRate: 20_000_000 };

export async function bandwidthFigures(
  cleanup: Cleanup,
  opts: { pods: number; rounds: number },
): Promise<BandwidthFigures> {
  const per = Math.ceil(opts.pods / opts.rounds);
  log(`bandwidth: a one-node knitter stack, ${per} pods, ${opts.rounds} rounds with and without`);
  const [plain, stack] = await knitterSubject(cleanup, per);
  const limitedJob = knitterJobs(stack.nodes[0].agentSocket, plain.pods, {
    runtimeConfig: { bandwidth: BANDWIDTH },
  });
  const limited = {
    add: (phase: string, i: number) => limitedJob("ADD", phase, i),
    del: (phase: string, i: number, added: DriverRun) =>
      limitedJob("DEL", phase, i, JSON.parse(added.stdout)),
  };
  const runs = await pairedRounds(plain, limited, { per, rounds: opts.rounds, tag: "bw" });
  return {
    pods: per * opts.rounds,
    without: { add: latency(runs.without.add), del: latency(runs.without.del) },
    limited: { add: latency(runs.other.add), del: latency(runs.other.del) },
  };
}

/** ADD and DEL jobs of one way to attach the same pods. */
export interface PodJobs {
  add(phase: string, i: number): DriverJob;
  del(phase: string, i: number, added: DriverRun): DriverJob;
}

/**
 * The same `per` pods added then deleted one by one, the plain way and the other way in turns, in
 * `rounds` rounds after an uncounted warm-up (the plugin's first compile, OVS's first ports); the
 * order alternates per round so that the machine's drift hits both alike. Milliseconds per exec.
 */
export async function pairedRounds(
  plain: Subject,
  other: PodJobs,
  opts: { per: number; rounds: number; tag: string },
): Promise<Record<"without" | "other", { add: number[]; del: number[] }>> {
  const runs = {
    without: { add: [] as number[], del: [] as number[] },
    other: { add: [] as number[], del: [] as number[] },
  };
  const idx = Array.from({ length: opts.per }, (_, k) => k);
  for (let r = 0; r <= opts.rounds; r++) {
    const order = r % 2 === 0 ? ["without", "other"] as const : ["other", "without"] as const;
    for (const which of order) {
      const s = which === "without" ? plain : other;
      const phase = `${opts.tag}${which[0]}${r}`;
      const added = await drive(plain.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.add(phase, i)),
      }, `${opts.tag} ${which} ADD`);
      const deleted = await drive(plain.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.del(phase, i, added.runs[i])),
      }, `${opts.tag} ${which} DEL`);
      if (r === 0) continue;
      runs[which].add.push(...added.runs.map((x) => x.ms));
      runs[which].del.push(...deleted.runs.map((x) => x.ms));
    }
  }
  return runs;
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  await using cleanup = new Cleanup();
  const b = await bandwidthFigures(cleanup, { pods: quick ? 20 : 60, rounds: quick ? 2 : 6 });
  console.log(bandwidthMarkdown(b));
}

/** The figures as rows of docs/benchmarks.md's table. */
export function bandwidthMarkdown(b: BandwidthFigures): string {
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const lat = (l: LatencyFigures) => `p50 ${ms(l.p50)}, p99 ${ms(l.p99)}`;
  return [
    `| knitter pod ADD with a bandwidth limit (runtimeConfig, both directions), ${b.pods} pods | **${
      lat(b.limited.add)
    }** (+${ms(b.limited.add.p50 - b.without.add.p50)} p50) | without a limit, same run: ${
      lat(b.without.add)
    } |`,
    `| knitter pod DEL of those pods | ${lat(b.limited.del)} | without a limit: ${
      lat(b.without.del)
    } |`,
  ].join("\n");
}
