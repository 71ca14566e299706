/**
 * Time from process start to a ready manager (and to its first allocation) on a full store, on a
 * Deno KV file and on etcd.
 *
 *   deno run -A manager/bench/startup_bench.ts [--ports N] [--public N] [--etcd N] [--etcd-public N]... [--starts 5]
 *
 * The store is prepared as a manager's first start leaves it (server.ts prepareStore), then filled
 * by port_fill.ts (one port through the allocation path, the rest its copies in commits of
 * hundreds: port, node index, address-history stint each, history on as the manager's default),
 * closed, and a manager process spawned on it: the time from the spawn to `/readyz` answering
 * 200, and to a port's PUT answering 201; then the manager's VmRSS. Yardsticks of the same run: a
 * manager spawned on an empty store (what a start costs without ports), and the time to read every
 * port record straight from the store (Deno KV's own `list` in the bench process; etcd's range
 * API in pages of 10,000), what a start that read its ports would take at least.
 */
import { createLogger } from "@knitter/common";
import { DEFAULT_HISTORY_RETENTION_DAYS } from "../config.ts";
import { prepareStore } from "../server.ts";
import { MAX_TXN_OPS, startEtcd } from "../store/etcd_test_support.ts";
import { type EtcdStore, openEtcdStore } from "../store/etcd_store.ts";
import { fromB64, type RawKv, toB64 } from "../store/etcd_client.ts";
import { concat, prefixRange } from "../store/key_codec.ts";
import { decodeValue } from "../store/value_codec.ts";
import { openKvStore } from "../store/kv_store.ts";
import type { Store } from "../store/store.ts";
import { fillPorts } from "./port_fill.ts";
import {
  ADMIN_TOKEN,
  benchContextOn,
  percentile,
  publicNetwork,
  type Spawned,
  spawnManager,
  waitReady,
  withTempDir,
} from "./support.ts";

/** Where the ports are: "own", a tenant's own network; "public", another tenant's public one. */
export type Layout = "own" | "public";

/** The tenant and network of each layout's ports. */
const LAYOUTS: Record<Layout, { tenant: string; network: string }> = {
  own: { tenant: "bench", network: "big" },
  public: { tenant: "other", network: "shared" },
};

export interface StartupFigures {
  store: "Deno KV file" | "etcd";
  layout: Layout;
  ports: number;
  fillSeconds: number;
  /** Medians over the starts (each a manager process of its own, the stores' starts alternating). */
  readyMs: number;
  firstAllocationMs: number;
  /** Each start's time to ready, in order. */
  readyEachMs: number[];
  /** The manager's VmRSS once the first allocation is in, at most over the starts. */
  rssMiB: number;
  /** Every port record read straight from the store, and how many keys the store holds. */
  rawReadMs: number;
  keys: number;
}

/** What one start of a manager on a filled store measured. */
interface Start {
  readyMs: number;
  firstAllocationMs: number;
  rssMiB: number;
}

/** Ports spread over this many nodes (each with its node index key). */
const NODES = 100;

/** How the bench reaches one backend: a store for the fill and the read, a manager's section. */
interface Backend {
  store: StartupFigures["store"];
  open(): Promise<Store>;
  section: string | Record<string, unknown>;
  /** Reads every port record straight from the store; answers how many. */
  readPorts(): Promise<number>;
  /** How many keys the store holds. */
  countKeys(): Promise<number>;
}

/** A filled store, closed, ready for managers to start on. */
interface Filled {
  backend: Backend;
  layout: Layout;
  ports: number;
  fillSeconds: number;
}

/** Prepares and fills a store with `ports`, and closes it. */
async function fill(backend: Backend, size: { ports: number; layout: Layout }): Promise<Filled> {
  const { ports, layout } = size;
  const store = await backend.open();
  const ctx = await benchContextOn(store, { historyRetentionDays: DEFAULT_HISTORY_RETENTION_DAYS });
  // As a manager running all along leaves it: its first start prepared the store (server.ts).
  await prepareStore(ctx, createLogger("manager", "warn"));
  if (layout === "public") await publicNetwork(ctx);
  const fillStart = performance.now();
  let shown = 0;
  await fillPorts(ctx, {
    ...LAYOUTS[layout],
    count: ports,
    nodes: NODES,
    progress: (done) => {
      if (done - shown < 100_000) return;
      shown = done;
      console.error(`  ${backend.store}: ${done} ports in ${seconds(fillStart)} s`);
    },
  });
  const fillSeconds = seconds(fillStart);
  ctx.feed.close();
  store.close();
  return { backend, layout, ports, fillSeconds };
}

/**
 * Starts a manager `rounds` times on each filled store, the stores taking turns (the machine's
 * load falls on all alike), then reads each store's port records straight from it.
 */
async function measure(dir: string, filled: Filled[], rounds: number): Promise<StartupFigures[]> {
  const starts: Start[][] = filled.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (const [i, f] of filled.entries()) {
      const start = await startAndAllocate(dir, f, `after-${round}`);
      starts[i].push(start);
      console.error(
        `  ${f.backend.store}, ${f.ports} ports: ready in ${start.readyMs.toFixed(0)} ms`,
      );
    }
  }
  const out: StartupFigures[] = [];
  for (const [i, f] of filled.entries()) {
    console.error(`bench: every port record of ${f.ports} read straight from the store`);
    const readStart = performance.now();
    const read = await f.backend.readPorts();
    const rawReadMs = performance.now() - readStart;
    if (read !== f.ports + rounds) {
      throw new Error(`read ${read} port records, not ${f.ports + rounds}`);
    }
    const s = starts[i];
    out.push({
      store: f.backend.store,
      layout: f.layout,
      ports: f.ports,
      fillSeconds: f.fillSeconds,
      readyMs: median(s.map((x) => x.readyMs)),
      firstAllocationMs: median(s.map((x) => x.firstAllocationMs)),
      readyEachMs: s.map((x) => x.readyMs),
      rssMiB: Math.max(...s.map((x) => x.rssMiB)),
      rawReadMs,
      keys: await f.backend.countKeys(),
    });
  }
  return out;
}

function median(xs: number[]): number {
  return percentile([...xs].sort((a, b) => a - b), 50);
}

/** Spawns a manager on the store: ready, a first allocation (port `id`), its RSS. */
async function startAndAllocate(dir: string, filled: Filled, id: string): Promise<Start> {
  const { tenant, network } = LAYOUTS[filled.layout];
  const since = performance.now();
  const m = await spawnManager(dir, filled.backend.section);
  try {
    const readyMs = await waitReady(m.url, since);
    const r = await fetch(`${m.url}/api/v1/tenants/${tenant}/networks/${network}/ports/${id}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: "{}",
    });
    const body = await r.json();
    if (r.status !== 201) {
      throw new Error(`allocation after restart failed: ${r.status} ${JSON.stringify(body)}`);
    }
    return { readyMs, firstAllocationMs: performance.now() - since, rssMiB: await rssOf(m) };
  } finally {
    await m.stop();
  }
}

async function rssOf(m: Spawned): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${m.child.pid}/status`);
  return Number(status.match(/VmRSS:\s+(\d+) kB/)![1]) / 1024;
}

function seconds(since: number): number {
  return (performance.now() - since) / 1000;
}

/** Port records: the same keys on both backends. */
const PORTS_PREFIX = ["port"];

function kvBackend(path: string): Backend {
  return {
    store: "Deno KV file",
    open: () => openKvStore(path),
    section: path,
    readPorts: () => kvCount(path, PORTS_PREFIX),
    countKeys: () => kvCount(path, []),
  };
}

/** Deno KV's own list of a prefix, values and all. */
async function kvCount(path: string, prefix: string[]): Promise<number> {
  const kv = await Deno.openKv(path);
  try {
    let n = 0;
    for await (const _ of kv.list({ prefix })) n++;
    return n;
  } finally {
    kv.close();
  }
}

function etcdBackend(endpoints: string[], prefix: string): Backend {
  const open = () => openEtcdStore({ endpoints, prefix, timeoutMs: 60_000 });
  return {
    store: "etcd",
    open,
    section: { etcd: { endpoints, prefix } },
    readPorts: () => etcdRead(open, PORTS_PREFIX),
    countKeys: () => etcdCount(open),
  };
}

/** The keys under the store's prefix, counted by etcd (one walk of its index). */
async function etcdCount(open: () => Promise<EtcdStore>): Promise<number> {
  const store = await open();
  try {
    const range = prefixRange([]);
    const res = await store.client.call("/v3/kv/range", {
      key: toB64(concat(store.prefix, range.start)),
      range_end: toB64(concat(store.prefix, range.end)),
      count_only: true,
    }) as { count?: string };
    return Number(res.count ?? 0);
  } finally {
    store.close();
  }
}

/** Keys read from etcd's range API in pages of this many. */
const ETCD_PAGE = 10_000;

/**
 * A prefix read from etcd's range API in big pages, each value decoded as the store decodes it.
 * Not the store's own list: etcd 3.4 walks the rest of a range's index for every page it answers,
 * so the store's pages of 500 take minutes over hundreds of thousands of keys (docs/benchmarks.md).
 */
async function etcdRead(open: () => Promise<EtcdStore>, prefix: string[]): Promise<number> {
  const store = await open();
  try {
    const range = prefixRange(prefix);
    let from = concat(store.prefix, range.start);
    const end = toB64(concat(store.prefix, range.end));
    let n = 0;
    for (;;) {
      const res = await store.client.call("/v3/kv/range", {
        key: toB64(from),
        range_end: end,
        limit: String(ETCD_PAGE),
      }) as { kvs?: RawKv[]; more?: boolean };
      const kvs = res.kvs ?? [];
      for (const kv of kvs) decodeValue(fromB64(kv.value));
      n += kvs.length;
      if (!res.more || kvs.length === 0) return n;
      from = concat(fromB64(kvs[kvs.length - 1].key), [0]);
    }
  } finally {
    store.close();
  }
}

/** A run: which backend, where the ports are, how many. */
export interface Run {
  etcd: boolean;
  layout: Layout;
  ports: number;
}

/**
 * Fills a store per run (Deno KV files in one directory, etcd prefixes on one etcd member with its
 * database quota raised for millions of keys), then starts managers on them by turns.
 */
export async function startupFigures(runs: Run[], rounds: number): Promise<StartupFigures[]> {
  return await withTempDir(async (dir) => {
    const etcd = runs.some((r) => r.etcd)
      ? await startEtcd({ flags: [`--quota-backend-bytes=${8 * 2 ** 30}`] })
      : undefined;
    try {
      const filled: Filled[] = [];
      for (const [i, run] of runs.entries()) {
        const where = run.etcd ? `etcd (--max-txn-ops=${MAX_TXN_OPS})` : "Deno KV file";
        console.error(`bench: ${where}, ${run.ports} ports on ${WHERE[run.layout]}`);
        const backend = run.etcd
          ? etcdBackend(etcd!.endpoints, `startup-${i}/`)
          : kvBackend(`${dir}/startup-${i}.kv`);
        filled.push(await fill(backend, run));
      }
      console.error(`bench: ${rounds} starts on each store, by turns`);
      return await measure(dir, filled, rounds);
    } finally {
      await etcd?.stop();
    }
  });
}

/** Start to ready on a Deno KV file of `ports` ports, one start (`deno task bench`). */
export async function startupWithPorts(ports: number): Promise<StartupFigures> {
  return (await startupFigures([{ etcd: false, layout: "own", ports }], 1))[0];
}

const WHERE: Record<Layout, string> = {
  own: "the tenant's network",
  public: "another tenant's public network",
};

function table(rows: StartupFigures[]): string {
  const f = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d });
  const lines = [
    "| store | ports on | ports | keys | fill | start → ready, median (each) | → first allocation | RSS after, max | raw read of every port record |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const each = r.readyEachMs.map((x) => f(x)).join(", ");
    lines.push(
      `| ${r.store} | ${WHERE[r.layout]} | ${f(r.ports)} | ${f(r.keys)} | ${
        f(r.fillSeconds, 1)
      } s | **${f(r.readyMs)} ms** (${each}) | ${f(r.firstAllocationMs)} ms | ${
        f(r.rssMiB)
      } MiB | ${f(r.rawReadMs)} ms |`,
    );
  }
  return lines.join("\n");
}

/** The runs each flag asks for: `--ports N` and `--public N` on Deno KV, `--etcd N` and `--etcd-public N`. */
const FLAGS: Record<string, { etcd: boolean; layout: Layout }> = {
  "--ports": { etcd: false, layout: "own" },
  "--public": { etcd: false, layout: "public" },
  "--etcd": { etcd: true, layout: "own" },
  "--etcd-public": { etcd: true, layout: "public" },
};

if (import.meta.main) {
  const asked: Run[] = Deno.args.flatMap((a, i) => {
    const run = FLAGS[Deno.args[i - 1]];
    return run ? [{ ...run, ports: Number(a) }] : [];
  });
  const at = Deno.args.indexOf("--starts");
  const rounds = at >= 0 ? Number(Deno.args[at + 1]) : 5;
  const runs: Run[] = asked.length ? asked : [
    { etcd: false, layout: "own", ports: 1_000_000 },
    { etcd: false, layout: "public", ports: 1_000_000 },
    { etcd: false, layout: "own", ports: 100_000 },
    { etcd: false, layout: "own", ports: 0 },
  ];
  console.log(table(await startupFigures(runs, rounds)));
}
