/** Shared pieces of the manager benchmarks: temp dirs, a spawned manager, percentiles. */
import { createContext } from "../server.ts";
import { openKvStore } from "../store/kv_store.ts";
import { createNetwork } from "../service/networks.ts";
import { createTenant } from "../service/tenants.ts";
import type { Ctx } from "../service/context.ts";
import type { Store } from "../store/store.ts";

export const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const ROOT = new URL("../../", import.meta.url).pathname;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-bench-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * A manager context on a KV file with tenant "bench" and a /8 vxlan network "big"; `more` sets
 * the history's retention (none by default).
 */
export async function benchContext(
  path: string,
  more: { historyRetentionDays?: number } = {},
): Promise<Ctx> {
  return await benchContextOn(await openKvStore(path), more);
}

/** As benchContext, on a store already open (etcd). */
export async function benchContextOn(
  store: Store,
  more: { historyRetentionDays?: number } = {},
): Promise<Ctx> {
  const ctx = createContext(store, { vniRanges: ["5000-16777215"], underlayMtu: 1500, ...more });
  await createTenant(ctx, { name: "bench" });
  await createNetwork(ctx, {
    principal: { scope: "admin" },
    tenant: "bench",
    body: {
      name: "big",
      type: "vxlan",
      cidr: "10.0.0.0/8",
      public: false,
    },
  });
  return ctx;
}

export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

export interface Spawned {
  url: string;
  child: Deno.ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts `manager/main.ts` as its own process on a free loopback port, on a Deno KV path or on
 * any store section (etcd); `root`: the checkout whose manager runs (this one by default).
 */
export async function spawnManager(
  dir: string,
  store: string | Record<string, unknown>,
  more: Record<string, unknown> = {},
  root = ROOT,
): Promise<Spawned> {
  const port = freePort();
  const config = `${dir}/manager-${port}.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      store: typeof store === "string" ? { path: store } : store,
      tokens: [{ token: ADMIN_TOKEN, scope: "admin" }],
      logLevel: "warn",
      ...more,
      // More of `listen` (a feed socket port) beside the port chosen here.
      listen: { hostname: "127.0.0.1", port, ...(more.listen as object | undefined) },
    }),
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "manager/main.ts",
      "--config",
      config,
    ],
    cwd: root,
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
    },
  };
}

/** Polls /readyz until it answers 200; returns the milliseconds it took from `since`. */
export async function waitReady(url: string, since: number, timeoutMs = 30_000): Promise<number> {
  for (;;) {
    try {
      const r = await fetch(`${url}/readyz`);
      await r.body?.cancel();
      if (r.ok) return performance.now() - since;
    } catch { /* not listening yet */ }
    if (performance.now() - since > timeoutMs) {
      throw new Error(`manager at ${url} not ready after ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Tenant "other" and a public network "shared" (100.64.0.0/10) of tenant "bench" it may use. */
export async function publicNetwork(ctx: Ctx): Promise<void> {
  await createTenant(ctx, { name: "other" });
  await createNetwork(ctx, {
    principal: { scope: "admin" },
    tenant: "bench",
    body: { name: "shared", type: "vxlan", cidr: "100.64.0.0/10", public: true },
  });
}
