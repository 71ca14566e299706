/**
 * The cost of the address history (service/history.ts): port allocations and releases through the
 * service layer on a Deno KV file, with the history off (retention 0) and on (30 days), alternating
 * over several rounds with the raw Deno KV commit as the yardstick of the same run; then HTTP
 * allocations from 16 clients against a manager process, off and on.
 *
 *   deno run --allow-all manager/bench/history_bench.ts [--quick]
 */
import { deletePort, putPort } from "../service/ports/mod.ts";
import { httpAllocations, type HttpFigures } from "./http_bench.ts";
import { median, rate, rawRound } from "./ipam_bench.ts";
import { benchContext, withTempDir } from "./support.ts";

export interface HistoryFigures {
  rounds: number;
  n: number;
  raw: number;
  /** Operations per second, median over the rounds. */
  off: { seq: number; conc: number; release: number };
  on: { seq: number; conc: number; release: number };
  http?: { off: number; on: number; offP99: number; onP99: number };
}

/** Sequential allocations, 16 concurrent ones, then sequential releases of the first batch. */
async function ports(dir: string, name: string, n: number, days: number) {
  const ctx = await benchContext(`${dir}/${name}.kv`, { historyRetentionDays: days });
  const big = { principal: { scope: "admin" }, tenant: "bench", network: "big" } as const;
  try {
    const body = { node: "n1", interface: "eth0" };
    const seq = await rate(n, 1, async (i) => {
      await putPort(ctx, { ...big, id: `s-${i}`, body });
    });
    const conc = await rate(n, 16, async (i) => {
      await putPort(ctx, { ...big, id: `c-${i}`, body });
    });
    const release = await rate(n, 1, async (i) => {
      await deletePort(ctx, { ...big, id: `s-${i}` });
    });
    return { seq, conc, release };
  } finally {
    ctx.store.close();
  }
}

export async function historyFigures(
  n: number,
  rounds: number,
  httpRequests = 0,
): Promise<HistoryFigures> {
  return await withTempDir(async (dir) => {
    const raws: number[] = [];
    const off: { seq: number; conc: number; release: number }[] = [];
    const on: typeof off = [];
    for (let round = 0; round < rounds; round++) {
      // Alternate which goes first, so that neither always gets the warmer machine.
      raws.push(await rawRound(dir, round, n, 1));
      if (round % 2 === 0) {
        off.push(await ports(dir, `off-${round}`, n, 0));
        on.push(await ports(dir, `on-${round}`, n, 30));
      } else {
        on.push(await ports(dir, `on-${round}`, n, 30));
        off.push(await ports(dir, `off-${round}`, n, 0));
      }
    }
    const pick = (xs: typeof off) => ({
      seq: median(xs.map((x) => x.seq)),
      conc: median(xs.map((x) => x.conc)),
      release: median(xs.map((x) => x.release)),
    });
    const figures: HistoryFigures = { rounds, n, raw: median(raws), off: pick(off), on: pick(on) };
    if (httpRequests > 0) {
      // Off and on alternate here too, over three rounds each, first one then the other.
      const hOff: HttpFigures[] = [], hOn: HttpFigures[] = [];
      for (let round = 0; round < 3; round++) {
        const off = () => httpAllocations(16, httpRequests, { historyRetentionDays: 0 });
        const on = () => httpAllocations(16, httpRequests, { historyRetentionDays: 30 });
        for (const which of round % 2 === 0 ? [off, on] : [on, off]) {
          (which === off ? hOff : hOn).push(await which());
        }
      }
      figures.http = {
        off: median(hOff.map((h) => h.perSecond)),
        on: median(hOn.map((h) => h.perSecond)),
        offP99: median(hOff.map((h) => h.p99Ms)),
        onP99: median(hOn.map((h) => h.p99Ms)),
      };
    }
    return figures;
  });
}

const f = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits });

/** The figures as a Markdown table for docs/benchmarks.md. */
export function historyTable(h: HistoryFigures): string {
  const pct = (on: number, off: number) => `${f((on / off) * 100)} %`;
  const rows = [
    `| raw Deno KV \`atomic().check().set().commit()\`, sequential, file | ${
      f(h.raw)
    } commits/s | | yardstick |`,
    `| port allocation in process, sequential | ${f(h.off.seq)}/s | ${f(h.on.seq)}/s | **${
      pct(h.on.seq, h.off.seq)
    }** of off |`,
    `| port allocation in process, 16 concurrent callers | ${f(h.off.conc)}/s | ${
      f(h.on.conc)
    }/s | **${pct(h.on.conc, h.off.conc)}** of off |`,
    `| port release in process, sequential | ${f(h.off.release)}/s | ${f(h.on.release)}/s | **${
      pct(h.on.release, h.off.release)
    }** of off |`,
  ];
  if (h.http) {
    rows.push(
      `| port allocation over HTTP, 16 clients | ${f(h.http.off)}/s, p99 ${
        f(h.http.offP99, 1)
      } ms | ${f(h.http.on)}/s, p99 ${f(h.http.onP99, 1)} ms | **${
        pct(h.http.on, h.http.off)
      }** of off |`,
    );
  }
  return [
    "| what | history off | history on (30 days) | on vs off |",
    "|---|---|---|---|",
    ...rows,
  ].join("\n") + "\n";
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const n = quick ? 1000 : 4000;
  const rounds = quick ? 3 : 5;
  console.error(`bench: history off vs on, ${rounds} rounds of ${n} allocations and releases`);
  const h = await historyFigures(n, rounds, quick ? 2000 : 8000);
  console.log(historyTable(h));
}
