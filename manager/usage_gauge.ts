/** Pool usage per network as a Prometheus gauge, read from the pool heads at scrape time. */
import type { GaugeSample, GaugeSource } from "./metrics.ts";
import { keys, type NetworkRecord } from "./model.ts";
import type { Ctx } from "./service/context.ts";

export function poolUsageGauge(ctx: Ctx): GaugeSource {
  return {
    name: "knitter_pool_addresses",
    help: "Addresses of a network's pools, by state (total, used).",
    async collect(): Promise<GaugeSample[]> {
      const out: GaugeSample[] = [];
      for await (const e of ctx.store.list<NetworkRecord>(keys.networks())) {
        const n = e.value!;
        const head = await ctx.pools.addresses(n).readHead();
        const labels = { tenant: n.tenant, network: n.name };
        out.push({ labels: { ...labels, state: "total" }, value: n.poolSize - n.reserved });
        out.push({ labels: { ...labels, state: "used" }, value: head?.used ?? 0 });
      }
      return out;
    },
  };
}
