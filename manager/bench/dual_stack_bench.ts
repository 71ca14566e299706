/**
 * What dual stack costs an allocation (issue 16): ports allocated one after the other on an IPv4
 * /16, on a dual-stack network (a /16 with an IPv6 /64: each port also gets its paired IPv6 address
 * and, with history on, a third history key), on an IPv6-only /64 without pools (its
 * 65,536-address window), and on a second IPv4 /16, the yardstick: how far two identical networks
 * differ on this machine. One Deno KV file (or `--memory`: Deno KV in memory, without the disk's
 * noise), history on (or off). The four alternate over several rounds, each round in another
 * order; medians, with the slowest and fastest round.
 *
 *   deno run -A manager/bench/dual_stack_bench.ts [--ports N] [--rounds R] [--history-days 0]
 *     [--memory]
 */
import { createNetwork } from "../service/networks.ts";
import { putPort } from "../service/ports/mod.ts";
import { median, rate } from "./ipam_bench.ts";
import { benchContext, withTempDir } from "./support.ts";

const NETWORKS = {
  "IPv4 /16": { cidr: "172.16.0.0/16" },
  // The yardstick: the same network again, to show how far two identical networks differ here.
  "IPv4 /16, another": { cidr: "172.18.0.0/16" },
  "dual stack /16 + /64": { cidr: "172.17.0.0/16", cidr6: "fd00:2::/64" },
  "IPv6 /64, no pools": { cidr: "fd00:3::/64" },
} as const;

/** Allocations per second: the median of the rounds, and the slowest and fastest round. */
export type DualStackFigures = Record<
  keyof typeof NETWORKS,
  { median: number; min: number; max: number }
>;

/** Allocations per second on each kind of network (medians of `rounds`, `n` ports each). */
export async function dualStackFigures(
  n: number,
  rounds: number,
  opts: { historyRetentionDays?: number; inMemory?: boolean } = {},
): Promise<DualStackFigures> {
  const { historyRetentionDays = 30, inMemory = false } = opts;
  return await withTempDir(async (dir) => {
    const path = inMemory ? ":memory:" : `${dir}/dual.kv`;
    const ctx = await benchContext(path, { historyRetentionDays });
    try {
      const names = Object.keys(NETWORKS) as (keyof typeof NETWORKS)[];
      for (const [i, label] of names.entries()) {
        await createNetwork(ctx, {
          principal: { scope: "admin" },
          tenant: "bench",
          body: {
            name: `n${i}`,
            type: "vxlan",
            public: false,
            ...NETWORKS[label],
          },
        });
      }
      const runs = new Map(names.map((label) => [label, [] as number[]]));
      for (let round = 0; round < rounds; round++) {
        // Each round starts with another network: none always runs first or last.
        for (let k = 0; k < names.length; k++) {
          const i = (round + k) % names.length;
          const label = names[i];
          runs.get(label)!.push(
            await rate(n, 1, async (k) => {
              await putPort(ctx, {
                principal: { scope: "admin" },
                tenant: "bench",
                network: `n${i}`,
                id: `r${round}-${k}`,
                body: { node: "n1" },
              });
            }),
          );
        }
      }
      const summary = (xs: number[]) => ({
        median: median(xs),
        min: Math.min(...xs),
        max: Math.max(...xs),
      });
      return Object.fromEntries(names.map((l) => [l, summary(runs.get(l)!)])) as DualStackFigures;
    } finally {
      ctx.store.close();
    }
  });
}

if (import.meta.main) {
  const arg = (flag: string, fallback: number) => {
    const at = Deno.args.indexOf(flag);
    return at >= 0 ? Number(Deno.args[at + 1]) : fallback;
  };
  const [n, rounds, days] = [arg("--ports", 1000), arg("--rounds", 5), arg("--history-days", 30)];
  const inMemory = Deno.args.includes("--memory");
  const figures = await dualStackFigures(n, rounds, { historyRetentionDays: days, inMemory });
  const f = (x: number) => Math.round(x).toLocaleString("en-US");
  console.log(
    `| network | allocations/s, median of ${rounds} rounds of ${n} (slowest–fastest round); history ${
      days > 0 ? "on" : "off"
    }; ${inMemory ? "Deno KV in memory" : "a Deno KV file"} |`,
  );
  console.log("| --- | ---: |");
  for (const [label, r] of Object.entries(figures)) {
    console.log(`| ${label} | ${f(r.median)} (${f(r.min)}–${f(r.max)}) |`);
  }
}
