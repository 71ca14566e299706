/**
 * The allocation path (issue 32): port allocations with the address history on, in process
 * (sequential, alternating slice by slice with the raw Deno KV commit, its yardstick; and from 16
 * callers on one network), and over HTTP (16 clients, a manager process with the connection guard on). Each round
 * runs in its own process; with `--base DIR` (another checkout of the project, e.g. main's code)
 * the rounds of the two trees alternate, so that the older code is measured in the same run.
 *
 *   deno run -A manager/bench/alloc_path_bench.ts [--rounds 3] [--n 3000] [--http 6000] [--base DIR]
 */
import { parseArgs } from "node:util";
import { putPort } from "../service/ports/mod.ts";
import { httpAllocations, putPorts } from "./http_bench.ts";
import { median, rate } from "./ipam_bench.ts";
import { benchContext, percentile, spawnManager, waitReady, withTempDir } from "./support.ts";

interface Round {
  raw: number;
  seq: number;
  conc: number;
  http: number;
  httpP99: number;
  httpErrors: number;
}

const HISTORY_DAYS = 30;

/** Ports allocated per slice: raw commits and allocations alternate slice by slice. */
const SLICE = 250;

/**
 * Sequential raw Deno KV commits and sequential allocations, alternating slice by slice on two
 * files of the same directory, so that both see the same disk and the same neighbours.
 */
async function sequential(dir: string, n: number): Promise<{ raw: number; seq: number }> {
  const kv = await Deno.openKv(`${dir}/raw.kv`);
  const ctx = await benchContext(`${dir}/seq.kv`, { historyRetentionDays: HISTORY_DAYS });
  let rawMs = 0;
  let seqMs = 0;
  try {
    for (let at = 0; at < n; at += SLICE) {
      let t = performance.now();
      for (let i = at; i < at + SLICE; i++) {
        const r = await kv.atomic().check({ key: ["k", i], versionstamp: null })
          .set(["k", i], { i }).commit();
        if (!r.ok) throw new Error("raw commit failed");
      }
      rawMs += performance.now() - t;
      t = performance.now();
      for (let i = at; i < at + SLICE; i++) await putPort(ctx, port(i));
      seqMs += performance.now() - t;
    }
  } finally {
    kv.close();
    ctx.store.close();
  }
  const done = Math.ceil(n / SLICE) * SLICE;
  return { raw: done / (rawMs / 1000), seq: done / (seqMs / 1000) };
}

function port(i: number) {
  return {
    principal: { scope: "admin" },
    tenant: "bench",
    network: "big",
    id: `p-${i}`,
    body: { node: "n1", interface: "eth0" },
  } as const;
}

async function concurrent(dir: string, n: number): Promise<number> {
  const ctx = await benchContext(`${dir}/conc.kv`, { historyRetentionDays: HISTORY_DAYS });
  try {
    return await rate(n, 16, async (i) => {
      await putPort(ctx, port(i));
    });
  } finally {
    ctx.store.close();
  }
}

/** One round in this process: the figures of this tree's code. */
async function round(n: number, httpRequests: number): Promise<Round> {
  return await withTempDir(async (dir) => {
    const { raw, seq } = await sequential(dir, n);
    const conc = await concurrent(dir, n);
    const h = await httpAllocations(16, httpRequests, { historyRetentionDays: HISTORY_DAYS });
    return { raw, seq, conc, http: h.perSecond, httpP99: h.p99Ms, httpErrors: h.errors };
  });
}

interface HttpSide {
  root: string;
  ms: number;
  done: number;
  latencies: number[];
  errors: number;
}

/**
 * HTTP allocations against a manager of each checkout at once (each on its own file in one
 * directory), slice by slice in turn, so that both meet the same disk and neighbours: per
 * checkout, allocations per second over its slices and its p99.
 */
async function httpSideBySide(roots: string[], requests: number, slices: number) {
  return await withTempDir(async (dir) => {
    const sides: HttpSide[] = roots.map((root) => ({
      root,
      ms: 0,
      done: 0,
      latencies: [],
      errors: 0,
    }));
    const managers = [];
    try {
      for (const [i, side] of sides.entries()) {
        const path = `${dir}/http-${i}.kv`;
        (await benchContext(path)).store.close();
        const m = await spawnManager(dir, path, { historyRetentionDays: HISTORY_DAYS }, side.root);
        managers.push(m);
        await waitReady(m.url, performance.now());
      }
      const per = Math.ceil(requests / slices);
      for (let k = 0; k < slices; k++) {
        const order = k % 2 === 0 ? [0, 1] : [1, 0];
        for (const i of order.slice(0, sides.length)) {
          await slice(managers[i].url, sides[i], per);
        }
      }
    } finally {
      for (const m of managers) await m.stop();
    }
    return sides.map((s) => ({
      root: s.root,
      perSecond: s.done / (s.ms / 1000),
      p99Ms: percentile(s.latencies.sort((a, b) => a - b), 99),
      errors: s.errors,
    }));
  });
}

/** `n` allocations from 16 clients, added to `side`'s time and latencies. */
async function slice(url: string, side: HttpSide, n: number): Promise<void> {
  const run = await putPorts(url, { clients: 16, requests: n, first: side.done });
  side.ms += run.ms;
  side.done += n;
  side.latencies.push(...run.latencies);
  side.errors += run.errors;
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
      console.log(`\nHTTP, this code / base, rounds apart: **${f(ratio, 2)}×**`);
      // The rounds meet different disks: the two managers side by side, slice by slice, too.
      console.error("bench: HTTP, both managers side by side");
      const [a, b] = await httpSideBySide([here, values.base!], httpRequests * 2, 8);
      console.log(
        `HTTP side by side (16 clients, ${f(httpRequests * 2)} allocations each in 8 slices ` +
          `taking turns, guard and history on): this code ${f(a.perSecond)}/s, p99 ${
            f(a.p99Ms, 1)
          } ms, ${a.errors} errors; base ${f(b.perSecond)}/s, p99 ${
            f(b.p99Ms, 1)
          } ms, ${b.errors} ` +
          `errors: **${f(a.perSecond / b.perSecond, 2)}×**`,
      );
    }
  }
}
