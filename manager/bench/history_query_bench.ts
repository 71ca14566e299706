/**
 * What a history query costs on a big network (issue 32): a Deno KV file with `--ports` ports
 * (default 100,000) on one network, history on, filled as the start-up benchmark fills it
 * (port_fill.ts), then queries for addresses held now: by address as the tenant and as the admin,
 * and by derived MAC; then the same after releasing them (ended holdings). Each query is timed
 * alone, for `--queries` addresses spread over the network; median and p99 in ms. The first query
 * of the network is timed apart (it makes this manager's index of who holds what, reading the
 * network's ports: service/history_holders.ts), and the heap that index keeps (after a collection,
 * with `--v8-flags=--expose-gc`). It uses only what older checkouts have too (their first query is
 * like any other), so that it can be copied into one and run there.
 *
 *   deno run -A --v8-flags=--expose-gc manager/bench/history_query_bench.ts [--ports 100000]
 *     [--queries 200]
 */
import { parseArgs } from "node:util";
import { queryHistory } from "../service/history.ts";
import { deletePort } from "../service/ports/mod.ts";
import type { Ctx } from "../service/context.ts";
import { fillPorts } from "./port_fill.ts";
import { benchContext, percentile, withTempDir } from "./support.ts";

const BIG = { principal: { scope: "admin" }, tenant: "bench", network: "big" } as const;

/** Median and p99 (ms) of `ask` for each port ID, each asked alone. */
async function timed(ids: string[], ask: (id: string) => Promise<unknown[]>) {
  const ms: number[] = [];
  for (const id of ids) {
    const t = performance.now();
    const answer = await ask(id);
    ms.push(performance.now() - t);
    if (answer.length === 0) throw new Error(`no holding answered for ${id}`);
  }
  ms.sort((a, b) => a - b);
  return { median: percentile(ms, 50), p99: percentile(ms, 99) };
}

/** The heap in use (MiB), after a collection when the flag allows one. */
function heapMiB(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return Deno.memoryUsage().heapUsed / 2 ** 20;
}

/** The network's first query alone: its time (ms) and the heap it leaves held (MiB). */
async function firstQuery(ctx: Ctx, id: string) {
  const before = heapMiB();
  const t = performance.now();
  const answer = await queryHistory(ctx, undefined, { ip: ipOf(id) });
  const ms = performance.now() - t;
  if (answer.length === 0) throw new Error(`no holding answered for ${id}`);
  return { ms, heldMiB: heapMiB() - before };
}

async function queries(ctx: Ctx, ids: string[]) {
  const first = await firstQuery(ctx, ids[0]);
  const held = new Map<string, { ip: string; mac: string }>();
  for (const id of ids) {
    const [s] = await queryHistory(ctx, undefined, { ip: ipOf(id) });
    held.set(id, { ip: s.ip, mac: s.mac });
  }
  return {
    tenantIp: await timed(ids, (id) => queryHistory(ctx, "bench", { ip: held.get(id)!.ip })),
    adminIp: await timed(ids, (id) => queryHistory(ctx, undefined, { ip: held.get(id)!.ip })),
    mac: await timed(ids, (id) => queryHistory(ctx, "bench", { mac: held.get(id)!.mac })),
    held,
    first,
  };
}

/** The address of fill port `id` ("fill-<j>" holds the j+1-th address of 10.0.0.0/8). */
function ipOf(id: string): string {
  const j = Number(id.slice("fill-".length)) + 1;
  return `10.${j >> 16}.${(j >> 8) & 255}.${j & 255}`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      ports: { type: "string", default: "100000" },
      queries: { type: "string", default: "200" },
    },
  });
  const count = Number(values.ports);
  const n = Number(values.queries);
  await withTempDir(async (dir) => {
    const ctx = await benchContext(`${dir}/q.kv`, { historyRetentionDays: 30 });
    try {
      const t = performance.now();
      await fillPorts(ctx, { ...BIG, count, nodes: 100 });
      console.error(`filled ${count} ports in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      const ids = Array.from({ length: n }, (_, k) => `fill-${Math.floor((k * count) / n)}`);
      const live = await queries(ctx, ids);
      for (const id of ids) await deletePort(ctx, { ...BIG, id });
      const ended = await timed(
        ids,
        (id) => queryHistory(ctx, "bench", { ip: live.held.get(id)!.ip }),
      );
      const f = (x: { median: number; p99: number }) =>
        `${x.median.toFixed(3)} ms (p99 ${x.p99.toFixed(3)} ms)`;
      console.log(
        `| query (${count.toLocaleString("en-US")} ports, ${n} addresses) | median (p99) |`,
      );
      console.log("|---|---|");
      console.log(
        `| the network's first query, by address, the admin | ${
          live.first.ms.toFixed(1)
        } ms (heap held after it: ${live.first.heldMiB.toFixed(1)} MiB) |`,
      );
      console.log(`| held now, by address, its tenant | ${f(live.tenantIp)} |`);
      console.log(`| held now, by address, the admin (every tenant) | ${f(live.adminIp)} |`);
      console.log(`| held now, by derived MAC, its tenant | ${f(live.mac)} |`);
      console.log(`| ended (released), by address, its tenant | ${f(ended)} |`);
    } finally {
      ctx.store.close();
    }
  });
}
