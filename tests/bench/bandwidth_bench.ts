/**
 * What a bandwidth limit costs a pod ADD and DEL: the real plugin wrapper against a one-node stack,
 * the same pods' netns with and without runtimeConfig.bandwidth, in alternating rounds (the ADD
 * without a limit is the yardstick of the same run). The limit adds one step to the wiring: `tc`
 * on the veth's host end and in the pod's netns (agent/interfaces/shaper.ts).
 *
 *   deno run -A tests/bench/bandwidth_bench.ts [--quick]     (as root; also part of bench:cni)
 */
import { Cleanup } from "../../devstack/cleanup.ts";
import { knitterJobs, knitterSubject, latency, type LatencyFigures } from "./cni_bench.ts";
import type { DriverRun } from "./driver.ts";
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
  const runs = {
    without: { add: [] as number[], del: [] as number[] },
    limited: { add: [] as number[], del: [] as number[] },
  };
  const idx = Array.from({ length: per }, (_, k) => k);
  // Round 0 warms up (the plugin's first compile, OVS's first ports) and is not counted.
  for (let r = 0; r <= opts.rounds; r++) {
    const order = r % 2 === 0 ? ["without", "limited"] as const : ["limited", "without"] as const;
    for (const which of order) {
      const s = which === "without" ? plain : limited;
      const added = await drive(plain.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.add(`bw${which[0]}${r}`, i)),
      }, `bandwidth ${which} ADD`);
      const deleted = await drive(plain.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.del(`bw${which[0]}${r}`, i, added.runs[i])),
      }, `bandwidth ${which} DEL`);
      if (r === 0) continue;
      runs[which].add.push(...added.runs.map((x) => x.ms));
      runs[which].del.push(...deleted.runs.map((x) => x.ms));
    }
  }
  return {
    pods: per * opts.rounds,
    without: { add: latency(runs.without.add), del: latency(runs.without.del) },
    limited: { add: latency(runs.limited.add), del: latency(runs.limited.del) },
  };
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
