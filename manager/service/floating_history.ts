/**
 * The history of floating addresses: who held each when, and bound to what. A stint is one tenant
 * holding the address, bound to one port or claim or to none, from one time to another; it is
 * written in the commit that opens or ends it (taken, bound, unbound, released), as the ports'
 * stints are (history.ts), and kept while the manager keeps history (`historyRetentionDays` > 0).
 * Each tenant reads only its own stints.
 *
 * @module
 */
import { type FloatingIpRecord, keys } from "../model.ts";
import type { Tx } from "../store/tx.ts";
import { type Ctx, listValues } from "./context.ts";
import { storedAddress } from "./floating_pools.ts";
import { type Ended, keepingHistory } from "./history.ts";

/** One stint, as stored and answered. */
export interface FloatingStint {
  address: string;
  pool: string;
  tenant: string;
  port?: { network: string; id: string };
  claim?: { network: string; name: string };
  from: string;
  to?: string;
  ended?: Ended;
}

/** Opens the stint of `r` as it is now (its tenant, its binding); answers the record to store. */
export function openFloatingStint(
  ctx: Ctx,
  tx: Tx,
  start: { record: FloatingIpRecord; atMs: number },
): FloatingIpRecord {
  const { record: r, atMs } = start;
  if (!keepingHistory(ctx) || r.tenant === undefined) return r;
  const stint: FloatingStint = {
    address: r.address,
    pool: r.pool,
    tenant: r.tenant,
    from: new Date(atMs).toISOString(),
  };
  if (r.port) stint.port = { network: r.port.network, id: r.port.id };
  if (r.claim) stint.claim = { network: r.claim.network, name: r.claim.name };
  tx.set(keys.floatingStint(r.address, r.tenant, atMs), stint);
  return { ...r, stintFrom: atMs };
}

/** Ends the open stint of `end.record` (the record as it was), if any. */
export async function closeFloatingStint(
  ctx: Ctx,
  tx: Tx,
  end: { record: FloatingIpRecord; atMs: number; ended: Ended },
): Promise<void> {
  const r = end.record;
  if (r.stintFrom === undefined || r.tenant === undefined) return;
  const e = await ctx.store.get<FloatingStint>(
    keys.floatingStint(r.address, r.tenant, r.stintFrom),
  );
  if (!e.value) return;
  tx.check(e).set(e.key, { ...e.value, to: new Date(end.atMs).toISOString(), ended: end.ended });
}

/** The tenant's stints of the address, oldest first (also after it released it). */
export function floatingHistory(
  ctx: Ctx,
  q: { tenant: string; address: string },
): Promise<FloatingStint[]> {
  return listValues<FloatingStint>(
    ctx.store,
    keys.floatingStints(storedAddress(q.address), q.tenant),
  );
}
