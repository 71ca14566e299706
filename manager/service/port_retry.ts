/**
 * The retry protocol of a port's PUT. A commit goes in only while the network is the one the
 * request resolved (checkNetwork). A lost race is retried on fresh reads; a network deleted and
 * made again under the request, or a cached pool that says "full", start the PUT over (Restart).
 * The careful path runs one PUT this way: fixed addresses, IP groups, and whatever a batch could
 * not settle.
 */
import type { Principal } from "../auth.ts";
import { keys } from "../model.ts";
import type { Tx } from "../store/tx.ts";
import type { Entry } from "../store/store.ts";
import { clusterGuard } from "./clusters.ts";
import { groupRefs } from "./security_group_refs.ts";
import { type Ctx, retry } from "./context.ts";
import { QuotaCharges } from "./quotas.ts";
import { forgetNetwork, type NetworkRef, resolveNetworkRef } from "./networks.ts";
import { buildPut } from "./port_allocation.ts";
import type { PortBody, PutResult } from "./port_records.ts";
import { Restart } from "./port_restart.ts";

/** The commit goes in only while the network is the one the request resolved. */
export function checkNetwork(tx: Tx, ref: NetworkRef): void {
  tx.check({ key: keys.network(ref.net.tenant, ref.net.name), version: ref.version });
}

/**
 * The records a port's commit checks: its cluster's first (a port never goes in after its
 * cluster's delete), then each security group it names (nor after a group's delete). A batch
 * takes only ports that name no group, and checks the first alone.
 */
export async function portGuards(
  ctx: Ctx,
  owner: string,
  id: string,
  body: PortBody,
): Promise<Entry<unknown>[]> {
  const cluster = await clusterGuard(ctx, id);
  const groups = await groupRefs(ctx, owner, body.securityGroups, "securityGroups");
  return cluster ? [cluster, ...groups] : groups;
}

/** One port's PUT in a commit of its own, read first, retried and restarted until it settles. */
export async function carefulPut(ctx: Ctx, opts: {
  principal: Principal;
  tenant: string;
  networkName: string;
  ref: NetworkRef;
  owner: string;
  id: string;
  body: PortBody;
  /** What the commit checks, as the request read it ({@link portGuards}). */
  guards: Entry<unknown>[];
}): Promise<PutResult> {
  const { principal, tenant, networkName, owner, id, body } = opts;
  let ref = opts.ref;
  let guards = opts.guards;
  let fresh = false;
  for (;;) {
    const pool = ctx.pools.addresses(ref.net);
    try {
      return await pool.exclusive(() =>
        retry(ctx, async (tx, attempt) => {
          if (attempt > 0) {
            // Lost a race: the network itself may be gone or re-created under us.
            const now = await resolveNetworkRef(ctx, principal, tenant, networkName, true);
            if (now.net.id !== ref.net.id) throw new Restart(now);
            ref = now;
            // Or its cluster or a group it names changed, or is being deleted (which refuses it).
            guards = await portGuards(ctx, owner, id, body);
          }
          const edit = await pool.edit(tx);
          checkNetwork(tx, ref);
          for (const g of guards) tx.check(g);
          const charges = new QuotaCharges(ctx, tx);
          const r = await buildPut(ctx, {
            tx,
            edit,
            charges,
            net: ref.net,
            owner,
            id,
            body,
            fresh,
            readFirst: true,
          });
          edit.flush();
          charges.flush();
          return r;
        })
      );
    } catch (err) {
      if (!(err instanceof Restart)) throw err;
      if (err.network) {
        forgetNetwork(ctx, ref.net);
        ref = err.network;
      } else {
        // The cache said "full": make sure with fresh reads before refusing.
        pool.invalidate();
        fresh = true;
      }
    }
  }
}
