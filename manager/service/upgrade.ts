/**
 * Brings a store written by an older manager up to what this one expects. Run at start, before the
 * API is served; every step is idempotent and commits with checks, so replicas starting together
 * do no harm.
 */
import { keys, type PortRecord } from "../model.ts";
import { Tx } from "../store/tx.ts";
import type { Key } from "../store/store.ts";
import type { Ctx } from "./context.ts";
import { portKeyId } from "./ports/mod.ts";

/**
 * Ports of a tenant on another tenant's (public) network were stored under their bare ID; they now
 * live under "tenant/id". Moves each such port and its index keys. Returns how many moved.
 */
export async function scopeForeignPortKeys(ctx: Ctx): Promise<number> {
  const legacy: Key[] = [];
  for await (const e of ctx.store.list(["port_of_tenant_on_foreign_network"])) {
    const id = e.key.at(-1) as string;
    if (!id.includes("/")) legacy.push(keys.port(e.key.at(-2) as string, id));
  }
  let moved = 0;
  for (const key of legacy) {
    for (let attempt = 0; attempt < 8; attempt++) {
      const e = await ctx.store.get<PortRecord>(key);
      const p = e.value;
      if (!p || p.tenant === p.networkTenant) break;
      const tx = new Tx();
      const id = portKeyId(p);
      const target = keys.port(p.networkId, id);
      tx.check(e).checkAbsent(target).delete(key).set(target, p);
      tx.delete(keys.portOfForeignNetwork(p.tenant, p.networkId, p.id))
        .set(keys.portOfForeignNetwork(p.tenant, p.networkId, id), true);
      if (p.node) {
        tx.delete(keys.portOfNode(p.node, p.networkId, p.id))
          .set(keys.portOfNode(p.node, p.networkId, id), true);
      }
      if (p.pod) {
        tx.delete(keys.portOfPod(p.pod, p.networkId, p.id))
          .set(keys.portOfPod(p.pod, p.networkId, id), true);
      }
      if (await tx.commit(ctx.store)) {
        moved++;
        break;
      }
    }
  }
  return moved;
}
