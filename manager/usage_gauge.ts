/** Pool usage per network for the metrics, read from the pool heads at scrape time. */
import type { PoolUsage } from "./metrics.ts";
import { keys, type NetworkRecord } from "./model.ts";
import type { Ctx } from "./service/context.ts";

export async function poolUsage(ctx: Ctx): Promise<PoolUsage[]> {
  const out: PoolUsage[] = [];
  for await (const e of ctx.store.list<NetworkRecord>(keys.networks())) {
    const n = e.value!;
    const head = await ctx.pools.addresses(n).readHead();
    out.push({
      tenant: n.tenant,
      network: n.name,
      capacity: n.poolSize - n.reserved,
      used: head?.used ?? 0,
    });
  }
  return out;
}
