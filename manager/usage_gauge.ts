/**
 * Pool usage per network for the metrics, read at scrape time the way the API reports a
 * network's usage (service/networks.ts withUsage): addresses in quarantine are not used.
 */
import type { PoolUsage } from "./metrics.ts";
import { keys, type NetworkRecord } from "./model.ts";
import type { Ctx } from "./service/context.ts";
import { withUsage } from "./service/networks.ts";

export async function poolUsage(ctx: Ctx): Promise<PoolUsage[]> {
  const out: PoolUsage[] = [];
  for await (const e of ctx.store.list<NetworkRecord>(keys.networks())) {
    const { usage } = await withUsage(ctx, e.value!);
    out.push({
      tenant: e.value!.tenant,
      network: e.value!.name,
      capacity: usage.total,
      used: usage.used,
      quarantined: usage.total - usage.used - usage.free,
    });
  }
  return out;
}
