/**
 * Time from process start to a ready manager (and to its first allocation) on a full store, on a
 * Deno KV file and on etcd.
 *
 *   deno run -A manager/bench/startup_bench.ts [--ports 1000000 --ports 100000] [--etcd N]...
 *
 * The store is filled by port_fill.ts (one port through the allocation path, the rest its copies in
 * commits of 330: port, node index and address-history stint each, history on as the manager's
 * default), closed, and a manager process spawned on it: the time from the spawn to `/readyz`
 * answering 200, and to a port's PUT answering 201; then the manager's VmRSS. Yardsticks of the
 * same run: a manager spawned on an empty store (what a start costs without ports), and the time
 * to read every port record straight from the store (Deno KV's own `list` in the bench process;
 * etcd's range API in pages of 10,000), what a start that read its ports would take at least.
 */
import { DEFAULT_HISTORY_RETENTION_DAYS } from "../config.ts";
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
  type Spawned,
  spawnManager,
  waitReady,
  withTempDir,
} from "./support.ts";

export interface StartupFigures {
  store: "Deno KV file" | "etcd";
  ports: number;
  fillSeconds: number;
  readyMs: number;
  firstAllocationMs: number;
  /** The manager's VmRSS once the first allocation is in. */
  rssMiB: number;
  /** Every port record read straight from the store, and how many keys the store holds. */
  rawReadMs: number;
  keys: number;
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

/** Fills a store with `ports`, closes it, starts a manager on it and measures. */
async function measure(dir: string, backend: Backend, ports: number): Promise<StartupFigures> {
  const store = await backend.open();
  const ctx = await benchContextOn(store, { historyRetentionDays: DEFAULT_HISTORY_RETENTION_DAYS });
  const fillStart = performance.now();
  let shown = 0;
  await fillPorts(ctx, {
    tenant: "bench",
    network: "big",
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
  const started = await startAndAllocate(dir, backend.section);
  const readStart = performance.now();
  const read = await backend.readPorts();
  const rawReadMs = performance.now() - readStart;
  if (read !== ports + 1) throw new Error(`read ${read} port records, not ${ports + 1}`);
  return {
    store: backend.store,
    ports,
    fillSeconds,
    ...started,
    rawReadMs,
    keys: await backend.countKeys(),
  };
}

/** Spawns a manager on the store: ready, a first allocation, its RSS. */
async function startAndAllocate(
  dir: string,
  section: Backend["section"],
): Promise<Pick<StartupFigures, "readyMs" | "firstAllocationMs" | "rssMiB">> {
  const since = performance.now();
  const m = await spawnManager(dir, section);
  try {
    const readyMs = await waitReady(m.url, since);
    const r = await fetch(`${m.url}/api/v1/tenants/bench/networks/big/ports/after-restart`, {
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
    readPorts: () => etcdRead(open, PORTS_PREFIX, false),
    countKeys: () => etcdRead(open, [], true),
  };
}

/** Keys read from etcd's range API in pages of this many. */
const ETCD_PAGE = 10_000;

/**
 * A prefix read from etcd's range API in big pages, each value decoded as the store decodes it.
 * Not the store's own list: etcd 3.4 walks the rest of a range's index for every page it answers,
 * so the store's pages of 500 take minutes over hundreds of thousands of keys (docs/benchmarks.md).
 */
async function etcdRead(
  open: () => Promise<EtcdStore>,
  prefix: string[],
  keysOnly: boolean,
): Promise<number> {
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
        keys_only: keysOnly,
      }) as { kvs?: RawKv[]; more?: boolean };
      const kvs = res.kvs ?? [];
      if (!keysOnly) { for (const kv of kvs) decodeValue(fromB64(kv.value)); }
      n += kvs.length;
      if (!res.more || kvs.length === 0) return n;
      from = concat(fromB64(kvs[kvs.length - 1].key), [0]);
    }
  } finally {
    store.close();
  }
}

/** Start to ready on a Deno KV file of `ports` ports (and 0: the empty store's start). */
export async function startupWithPorts(ports: number): Promise<StartupFigures> {
  return await withTempDir((dir) => measure(dir, kvBackend(`${dir}/startup.kv`), ports));
}

/** The same on one etcd member (its database quota raised for millions of keys). */
export async function startupOnEtcd(ports: number): Promise<StartupFigures> {
  return await withTempDir(async (dir) => {
    await using etcd = await startEtcd({ flags: [`--quota-backend-bytes=${8 * 2 ** 30}`] });
    return await measure(dir, etcdBackend(etcd.endpoints, `startup-${ports}/`), ports);
  });
}

function table(rows: StartupFigures[]): string {
  const f = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d });
  const lines = [
    "| store | ports | keys | fill | start → ready | → first allocation | RSS after | raw read of every port record |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.store} | ${f(r.ports)} | ${f(r.keys)} | ${f(r.fillSeconds, 1)} s | **${
        f(r.readyMs)
      } ms** | ${f(r.firstAllocationMs)} ms | ${f(r.rssMiB)} MiB | ${f(r.rawReadMs)} ms |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const sizes = (flag: string) =>
    Deno.args.flatMap((a, i) => Deno.args[i - 1] === flag ? [Number(a)] : []);
  const kv = sizes("--ports");
  const etcd = sizes("--etcd");
  const rows: StartupFigures[] = [];
  for (const n of kv.length || etcd.length ? kv : [1_000_000, 100_000, 0]) {
    console.error(`bench: start to ready, Deno KV file, ${n} ports`);
    rows.push(await startupWithPorts(n));
  }
  for (const n of etcd) {
    console.error(`bench: start to ready, etcd (--max-txn-ops=${MAX_TXN_OPS}), ${n} ports`);
    rows.push(await startupOnEtcd(n));
  }
  console.log(table(rows));
}
