/**
 * What a port's commit checks, and when its PUT starts over. A commit goes in only while the
 * network is the one the request resolved (checkNetwork) and while the port's cluster and security
 * groups are as the request read them (portGuards). A network deleted and made again under the
 * request, or a cached pool that says "full", start the PUT over (Restart).
 */
import { type ClusterRecord, keys } from "../../model.ts";
import type { Tx } from "../../store/tx.ts";
import type { Entry } from "../../store/store.ts";
import { portCluster } from "../clusters.ts";
import { groupRefs } from "../security_group_refs.ts";
import type { Ctx } from "../context.ts";
import type { NetworkRef } from "../network_lookup.ts";
import type { PortBody } from "./records.ts";

/** The commit goes in only while the network is the one the request resolved. */
export function checkNetwork(tx: Tx, ref: NetworkRef): void {
  tx.check({ key: keys.network(ref.net.tenant, ref.net.name), version: ref.version });
}

/**
 * The records a port's commit checks: its cluster's first (a port never goes in after its
 * cluster's delete, nor on a placement its cluster no longer allows), then each security group it
 * names (nor after a group's delete). A batch takes only ports that name no group, and checks the
 * first alone. The cluster's comes from the cache unless `fresh` (a retry's).
 */
export async function portGuards(
  ctx: Ctx,
  port: { owner: string; id: string; body: Pick<PortBody, "securityGroups"> },
  fresh = false,
): Promise<[Entry<ClusterRecord>, ...Entry<unknown>[]]> {
  const cluster = await portCluster(ctx, port.id, fresh);
  const groups = await groupRefs(ctx, {
    tenant: port.owner,
    names: port.body.securityGroups,
    field: "securityGroups",
  });
  return [cluster, ...groups];
}

/**
 * Start a PUT over: on another network record, or on fresh reads (the cached pool said "full").
 * Thrown by the allocation, caught by the careful path (put.ts) and the batch (batch.ts).
 */
export class Restart extends Error {
  constructor(readonly network?: NetworkRef) {
    super("restart");
  }
}
