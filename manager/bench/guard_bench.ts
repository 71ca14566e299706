/**
 * What the slow-client protection costs (issue 32): HTTP allocations (http_bench.ts, 16 clients,
 * history on) against a manager with the protection on and one serving `Deno.serve` as it is
 * (`limits.headerTimeoutMs: 0`), alternating, the same number of rounds each; medians.
 *
 *   deno run -A manager/bench/guard_bench.ts [--rounds N] [--requests N]
 */
import { httpAllocations, type HttpFigures } from "./http_bench.ts";
import { median } from "./ipam_bench.ts";

export interface GuardFigures {
  rounds: number;
  requests: number;
  guarded: HttpFigures[];
  direct: HttpFigures[];
}

const HISTORY_ON = { historyRetentionDays: 30 };

export async function guardFigures(rounds: number, requests: number): Promise<GuardFigures> {
  const guarded: HttpFigures[] = [];
  const direct: HttpFigures[] = [];
  for (let round = 0; round < rounds; round++) {
    // Each round in the other order, so that neither always runs on a warmer machine.
    const pair = [
      async () => guarded.push(await httpAllocations(16, requests, HISTORY_ON)),
      async () =>
        direct.push(
          await httpAllocations(16, requests, { ...HISTORY_ON, limits: { headerTimeoutMs: 0 } }),
        ),
    ];
    if (round % 2 === 1) pair.reverse();
    for (const run of pair) await run();
  }
  return { rounds, requests, guarded, direct };
}

export function guardTable(g: GuardFigures): string {
  const f = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits });
  const row = (what: string, xs: HttpFigures[]) => {
    const per = median(xs.map((x) => x.perSecond));
    const p99 = median(xs.map((x) => x.p99Ms));
    const each = xs.map((x) => f(x.perSecond)).join(", ");
    const errors = xs.reduce((n, x) => n + x.errors, 0);
    return `| ${what} | ${f(per)}/s (${each}) | ${f(p99, 2)} ms | ${errors} |`;
  };
  const ratio = median(g.guarded.map((x) => x.perSecond)) /
    median(g.direct.map((x) => x.perSecond));
  return `| server (16 clients, ${
    f(g.requests)
  } allocations a round, history on) | median (each round) | p99 (median) | errors |
|---|---|---|---|
${row("slow-client protection on", g.guarded)}
${row("Deno.serve as it is (yardstick)", g.direct)}

Protected / direct: **${f(ratio * 100)} %** (goal ≥ 90 %).`;
}

if (import.meta.main) {
  const arg = (name: string, fallback: number) => {
    const i = Deno.args.indexOf(name);
    return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
  };
  const rounds = arg("--rounds", 3);
  const requests = arg("--requests", 6000);
  console.error(`bench: protection on vs off, ${rounds} rounds of ${requests} HTTP allocations`);
  console.log(guardTable(await guardFigures(rounds, requests)));
}
