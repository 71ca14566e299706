/**
 * The allocation path (issue 32): port allocations with the address history on, in process
 * (sequential, alternating slice by slice with the raw Deno KV commit, its yardstick, and with raw
 * commits shaped like an allocation's, its ceiling; and from 16 callers on one network), and over
 * HTTP (16 clients, a manager process with the connection guard on). Each round runs in its own
 * process; with `--base DIR` (another checkout of the project, e.g. main's code) the rounds of the
 * two trees alternate, so that the older code is measured in the same run (copy this file into
 * DIR's manager/bench/ first: each tree's rounds run its own copy).
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
  /** Raw commits shaped like an allocation's: what the commit alone allows (shapedCommit). */
  shaped: number;
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
 * Sequential raw Deno KV commits, raw commits shaped like an allocation's and sequential
 * allocations, alternating slice by slice on files of the same directory, so that all see the same
 * disk and the same neighbours.
 */
async function sequential(
  dir: string,
  n: number,
): Promise<{ raw: number; shaped: number; seq: number }> {
  const kv = await Deno.openKv(`${dir}/raw.kv`);
  const shapedKv = await Deno.openKv(`${dir}/shaped.kv`);
  const ctx = await benchContext(`${dir}/seq.kv`, { historyRetentionDays: HISTORY_DAYS });
  const ms = { raw: 0, shaped: 0, seq: 0 };
  const timed = async (which: keyof typeof ms, at: number, one: (i: number) => Promise<void>) => {
    const t = performance.now();
    for (let i = at; i < at + SLICE; i++) await one(i);
    ms[which] += performance.now() - t;
  };
  try {
    for (let at = 0; at < n; at += SLICE) {
      await timed("raw", at, async (i) => {
        const r = await kv.atomic().check({ key: ["k", i], versionstamp: null })
          .set(["k", i], { i }).commit();
        if (!r.ok) throw new Error("raw commit failed");
      });
      await timed("shaped", at, (i) => shapedCommit(shapedKv, i));
      await timed("seq", at, async (i) => {
        await putPort(ctx, port(i));
      });
    }
  } finally {
    kv.close();
    shapedKv.close();
    ctx.store.close();
  }
  const done = Math.ceil(n / SLICE) * SLICE;
  const perSecond = (t: number) => done / (t / 1000);
  return { raw: perSecond(ms.raw), shaped: perSecond(ms.shaped), seq: perSecond(ms.seq) };
}

const SHAPED_NET = "78a01333-3f02-4cd5-8749-39fe0cb7903a";

/**
 * A raw commit with what one plain allocation commits (manager/README.md, "IPAM"): six checks
 * (pool head, network, cluster, quota, floating marker, the port's absence) and three writes (port
 * record, pool chunk and head; since issue 32 the history's live holding is the port record and no
 * node index is written), values of the same shapes and sizes. No manager code runs: the allocation's ceiling on
 * this store.
 */
async function shapedCommit(kv: Deno.Kv, i: number): Promise<void> {
  const ip = `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`;
  const at = new Date().toISOString();
  const common = { tenant: "bench", network: "big", networkTenant: "bench", networkId: SHAPED_NET };
  const held = { ip, mac: "02:b8:7e:00:00:02", node: "n1", interface: "eth0" };
  const op = kv.atomic();
  for (const key of [["head"], ["network"], ["cluster"], ["quota"], ["marker"]]) {
    op.check({ key, versionstamp: null });
  }
  op.check({ key: ["port", SHAPED_NET, `p-${i}`], versionstamp: null })
    .set(["port", SHAPED_NET, `p-${i}`], {
      id: `p-${i}`,
      ...common,
      ...held,
      index: i,
      createdAt: at,
      stintFrom: Date.now(),
    })
    .set(["ipam", SHAPED_NET, "chunk", i >> 12], new Uint8Array(512))
    .set(["ipam", SHAPED_NET, "head"], { cursor: i + 1, used: i + 1, chunkUsed: { 0: i + 1 } });
  if (!(await op.commit()).ok) throw new Error("shaped commit failed");
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
    const { raw, shaped, seq } = await sequential(dir, n);
    const conc = await concurrent(dir, n);
    const h = await httpAllocations(16, httpRequests, { historyRetentionDays: HISTORY_DAYS });
    return { raw, shaped, seq, conc, http: h.perSecond, httpP99: h.p99Ms, httpErrors: h.errors };
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
    `| ${name}: raw commit shaped like an allocation, sequential | ${f(m((r) => r.shaped))}/s = ${
      f(m((r) => r.shaped / r.raw) * 100)
    } % of raw (${each((r) => (r.shaped / r.raw) * 100)} %) |`,
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
