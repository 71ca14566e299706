/**
 * Allocation over HTTP with the state on etcd, one and three manager replicas, against one manager
 * on a Deno KV file in the same run: allocations per second and latency percentiles, 16 clients
 * spread over the replicas, all on one network (the contended case).
 *
 *   deno task bench:replicas [--quick]
 */
import { startEtcd } from "../store/etcd_test_support.ts";
import {
  ADMIN_TOKEN,
  percentile,
  type Spawned,
  spawnManager,
  waitReady,
  withTempDir,
} from "./support.ts";

export interface ReplicaFigures {
  setup: string;
  replicas: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

const CLIENTS = 16;
const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };

async function call(url: string, method: string, path: string, body: unknown): Promise<number> {
  const r = await fetch(`${url}/api/v1/${path}`, { method, headers, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300 && Deno.env.get("BENCH_DEBUG")) console.error(r.status, text);
  return r.status;
}

async function measure(setup: string, managers: Spawned[], requests: number) {
  const urls = managers.map((m) => m.url);
  await call(urls[0], "POST", "tenants", { name: "bench" });
  await call(urls[0], "POST", "tenants/bench/networks", { name: "big", cidr: "10.0.0.0/15" });
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const worker = async (w: number) => {
    const url = urls[w % urls.length];
    while (next < requests) {
      const i = next++;
      const t = performance.now();
      const status = await call(url, "PUT", `tenants/bench/networks/big/ports/p-${i}`, {
        node: "n1",
        interface: "eth0",
      });
      latencies.push(performance.now() - t);
      if (status !== 201) errors++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, (_, w) => worker(w)));
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    setup,
    replicas: managers.length,
    perSecond: requests / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors,
  };
}

async function onManagers(
  dir: string,
  setup: string,
  stores: (string | Record<string, unknown>)[],
  requests: number,
): Promise<ReplicaFigures> {
  const managers: Spawned[] = [];
  try {
    for (const store of stores) {
      const m = await spawnManager(dir, store);
      managers.push(m);
      await waitReady(m.url, performance.now());
    }
    return await measure(setup, managers, requests);
  } finally {
    for (const m of managers) await m.stop();
  }
}

export async function replicaFigures(requests: number): Promise<ReplicaFigures[]> {
  return await withTempDir(async (dir) => {
    await using etcd = await startEtcd();
    const onEtcd = (prefix: string) => ({ etcd: { endpoints: etcd.endpoints, prefix } });
    return [
      await onManagers(dir, "Deno KV file", [`${dir}/bench.kv`], requests),
      await onManagers(dir, "etcd", [onEtcd("one/")], requests),
      await onManagers(
        dir,
        "etcd",
        [onEtcd("three/"), onEtcd("three/"), onEtcd("three/")],
        requests,
      ),
    ];
  });
}

if (import.meta.main) {
  const requests = Deno.args.includes("--quick") ? 2000 : 10000;
  console.error(`bench: ${requests} allocations per setup, ${CLIENTS} clients`);
  const rows = await replicaFigures(requests);
  const f = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d });
  console.log(`| store | manager processes | allocations/s | p50 | p99 | errors |
|---|---|---|---|---|---|
${
    rows.map((r) =>
      `| ${r.setup} | ${r.replicas} | **${f(r.perSecond)}** | ${f(r.p50Ms, 1)} ms | ${
        f(r.p99Ms, 1)
      } ms | ${r.errors} |`
    ).join("\n")
  }`);
}
