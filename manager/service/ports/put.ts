/**
 * A port's PUT: one address of a network, bound to a pod's interface. PUT is idempotent: the same
 * port ID always gets the same answer, so an agent may retry or restart at any point.
 *
 * A plain new port waits a moment for others of its network and goes in their commit (batch.ts);
 * everything else, and whatever the batch could not settle, takes the careful path below: one
 * port in a commit of its own, read first, retried on a lost race and restarted on a network made
 * again under it or a cached pool that said "full".
 */
import type { Entry } from "../../store/store.ts";
import type { ClusterRecord } from "../../model.ts";
import { type Ctx, retry } from "../context.ts";
import { QuotaCharges } from "../quotas.ts";
import { forgetNetwork, type NetworkRef, resolveNetworkRef } from "../network_lookup.ts";
import { refuseFlowsOnly } from "../network_fields.ts";
import { authorizePut, checkPlacement } from "./access.ts";
import { buildPut } from "./allocation.ts";
import { batchedPut } from "./batch.ts";
import { checkClaimBody } from "./claimed.ts";
import { checkNetwork, portGuards, Restart } from "./guards.ts";
import type { PortBody, PortTarget, PutResult } from "./records.ts";

/** The port `req` names, made or found: 201 when `created`, 200 with the same answer when not. */
export async function putPort(ctx: Ctx, req: PortTarget & { body: PortBody }): Promise<PutResult> {
  const { principal, id } = req;
  const { owner, body } = authorizePut(req);
  const guards = await portGuards(ctx, { owner, id, body });
  const ref = await resolveNetworkRef(ctx, req);
  refuseFlowsOnly(ref.net.dataPlane, { securityGroups: body.securityGroups });
  await checkPlacement(ctx, principal, { owner, id, net: ref.net, cluster: guards[0] });
  checkClaimBody(body);
  const plain = body.ip === undefined && body.ipGroup === undefined && body.mac === undefined &&
    body.claim === undefined;
  // A port naming security groups checks each in its commit: too many checks for a batch's.
  if (plain && !body.securityGroups?.length) {
    const batched = await batchedPut(ctx, { ref, owner, id, body, guard: guards[0] });
    if (batched) return counted(ctx, batched);
  }
  // The careful path: fixed addresses, IP groups, claims, security groups, and whatever the batch
  // could not settle.
  return counted(ctx, await carefulPut(ctx, { ...req, ref, owner, body, guards }));
}

function counted(ctx: Ctx, r: PutResult): PutResult {
  // A claim's port takes the claim's address: the claim's creation counted it.
  if (r.created && r.port.claim === undefined) ctx.metrics.allocations.inc({ kind: "ip" });
  if (r.changed) ctx.feed.publish({ type: "port", op: "put", port: r.port });
  return r;
}

/** One port's PUT in a commit of its own, read first, retried and restarted until it settles. */
async function carefulPut(
  ctx: Ctx,
  opts: PortTarget & {
    ref: NetworkRef;
    owner: string;
    body: PortBody;
    /** What the commit checks, as the request read it ({@link portGuards}). */
    guards: [Entry<ClusterRecord>, ...Entry<unknown>[]];
  },
): Promise<PutResult> {
  const { owner, id, body } = opts;
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
            const now = await resolveNetworkRef(ctx, { ...opts, fresh: true });
            if (now.net.id !== ref.net.id) throw new Restart(now);
            ref = now;
            // Or its cluster or a group it names changed, or is being deleted (which refuses it):
            // read afresh, and the placement decided again on what its cluster says now.
            guards = await portGuards(ctx, { owner, id, body }, true);
            await checkPlacement(ctx, opts.principal, {
              owner,
              id,
              net: ref.net,
              cluster: guards[0],
            });
          }
          const edit = await pool.edit(tx);
          checkNetwork(tx, ref);
          for (const g of guards) tx.check(g);
          const charges = new QuotaCharges(ctx, tx, ref.net.id);
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
