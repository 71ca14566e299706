/**
 * The allocation path (issue 32): port allocations with the address history on, in process
 * (sequential and from 16 callers on one network) against the raw Deno KV commit of the same
 * round, and over HTTP (16 clients, a manager process with the connection guard on). Each round
 * runs in its own process; with `--base DIR` (another checkout of the project, e.g. main's code)
 * the rounds of the two trees alternate, so that the older code is measured in the same run.
 *
 *   deno run -A manager/bench/alloc_path_bench.ts [--rounds 3] [--n 3000] [--http 6000] [--base DIR]
 */
import { parseArgs } from "node:util";
import { putPort } from "../service/ports/mod.ts";
import { httpAllocations } from "./http_bench.ts";
import { median, rate, rawRound } from "./ipam_bench.ts";
import { benchContext, withTempDir } from "./support.ts";

interface Round {
  raw: number;
  seq: number;
  conc: number;
  http: number;
  httpP99: number;
  httpErrors: number;
}

const HISTORY_DAYS = 30;

async function allocations(dir: string, name: string, n: number, callers: number) {
  const ctx = await benchContext(`${dir}/${name}.kv`, { historyRetentionDays: HISTORY_DAYS });
  const big = { principal: { scope: "admin" }, tenant: "bench", network: "big" } as const;
  try {
    return await rate(n, callers, async (i) => {
      await putPort(ctx, { ...big, id: `p-${i}`, body: { node: "n1", interface: "eth0" } });
    });
  } finally {
    ctx.store.close();
  }
}

/** One round in this process: the figures of this tree's code. */
async function round(n: number, httpRequests: number): Promise<Round> {
  return await withTempDir(async (dir) => {
    const raw = await rawRound(dir, 0, n, 1);
    const seq = await allocations(dir, "seq", n, 1);
    const conc = await allocations(dir, "conc", n, 16);
    const h = await httpAllocations(16, httpRequests, { historyRetentionDays: HISTORY_DAYS });
    return { raw, seq, conc, http: h.perSecond, httpP99: h.p99Ms, httpErrors: h.errors };
  });
}

/** A round in a process of its own, in the tree at `root`. */
async function roundIn(root: string, n: number, httpRequests: number): Promise<Round> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "manager/bench/alloc_path_bench.ts",
      "--one",
      "--n",
      `${n}`,
      "--http",
      `${httpRequests}`,
    ],
    cwd: root,
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`the round in ${root} failed (exit ${out.code})`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

const f = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits });

function summary(name: string, rs: Round[]): string {
  const m = (pick: (r: Round) => number) => median(rs.map(pick));
  const each = (pick: (r: Round) => number) => rs.map((r) => f(pick(r))).join(", ");
  return [
    `| ${name}: raw KV commit, sequential | ${f(m((r) => r.raw))}/s (${each((r) => r.raw)}) |`,
    `| ${name}: allocation in process, sequential, history on | ${f(m((r) => r.seq))}/s = **${
      f(m((r) => r.seq / r.raw) * 100)
    } %** of raw (${each((r) => (r.seq / r.raw) * 100)} %) |`,
    `| ${name}: allocation in process, 16 callers, history on | ${f(m((r) => r.conc))}/s (${
      each((r) => r.conc)
    }) |`,
    `| ${name}: HTTP, 16 clients, guard and history on | ${f(m((r) => r.http))}/s, p99 ${
      f(m((r) => r.httpP99), 1)
    } ms (${each((r) => r.http)}), ${rs.reduce((s, r) => s + r.httpErrors, 0)} errors |`,
  ].join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      one: { type: "boolean" },
      rounds: { type: "string", default: "3" },
      n: { type: "string", default: "3000" },
      http: { type: "string", default: "6000" },
      base: { type: "string" },
    },
  });
  const n = Number(values.n);
  const httpRequests = Number(values.http);
  if (values.one) {
    console.log(JSON.stringify(await round(n, httpRequests)));
  } else {
    const here = new URL("../../", import.meta.url).pathname;
    const mine: Round[] = [];
    const base: Round[] = [];
    for (let r = 0; r < Number(values.rounds); r++) {
      const order = r % 2 === 0 ? ["mine", "base"] : ["base", "mine"];
      for (const which of order) {
        if (which === "base" && values.base === undefined) continue;
        console.error(`bench: round ${r + 1}, ${which}`);
        if (which === "mine") mine.push(await roundIn(here, n, httpRequests));
        else base.push(await roundIn(values.base!, n, httpRequests));
      }
    }
    console.log("| what | median (each round) |\n|---|---|");
    console.log(summary("this code", mine));
    if (base.length > 0) {
      console.log(summary("base", base));
      const ratio = median(mine.map((r) => r.http)) / median(base.map((r) => r.http));
      console.log(`\nHTTP, this code / base: **${f(ratio, 2)}×**`);
    }
  }
}
