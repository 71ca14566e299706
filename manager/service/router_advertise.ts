/**
 * A router's `advertise` (agent/README.md, "BGP advertisement"): the admin's choice to advertise
 * every network a router connects, now and later. The router sets each connected network's own
 * `advertise` in its transaction, marked `advertisedBy` with the router's name, after the checks a
 * network's own flag has (the ranges, the overlap with every advertised network, the node's main
 * table); so the agents, the feed and every later check see an advertised network as they always
 * did. Attaching a network to an advertised router advertises it; detaching it, turning the
 * router's flag off or deleting the router withdraws the networks the router advertised (not those
 * the admin advertised on their own). A refused network fails the whole change: nothing is half
 * advertised.
 *
 * @module
 */
import type { Principal } from "../auth.ts";
import { ApiError } from "../errors.ts";
import { keys, type NetworkRecord, type RouterRecord } from "../model.ts";
import type { Tx } from "../store/tx.ts";
import { checkAdvertiseOn } from "./advertise.ts";
import { listClusters } from "./clusters.ts";
import type { Ctx } from "./context.ts";
import { republishPorts } from "./networks.ts";
import { checkNodeReach, checkNodeReachOverlap } from "./node_reach.ts";

/** A network the router connects, with the version its checks read. */
interface Connected {
  net: NetworkRecord;
  version: string;
}

/** What the router change asks of its networks. */
export interface RouterAdvertise {
  tenant: string;
  router: string;
  /** The router's flag after the change. */
  advertise: boolean;
  /** The networks it connects after the change (none: it is deleted). */
  nets: Connected[];
  /** The router before the change (none: it is new). */
  before: RouterRecord | null;
}

/**
 * Advertises or withdraws the router's networks in `tx` as the change asks; answers the networks
 * changed (their ports are news to the agents once it commits: republish them). Throws, naming the
 * network, on the first that may not be advertised.
 */
export async function advertiseByRouter(
  ctx: Ctx,
  tx: Tx,
  change: RouterAdvertise,
): Promise<NetworkRecord[]> {
  const changed: NetworkRecord[] = [];
  if (change.advertise) {
    for (const [i, { net }] of change.nets.entries()) {
      if (net.advertise === true) continue;
      await checkNetwork(ctx, net, i);
      const updated: NetworkRecord = { ...net, advertise: true, advertisedBy: change.router };
      tx.set(keys.network(net.tenant, net.name), updated);
      changed.push(updated);
    }
  }
  const kept = new Set(change.advertise ? change.nets.map((c) => c.net.id) : []);
  for (const n of change.before?.networks ?? []) {
    if (kept.has(n.id)) continue;
    const e = await ctx.store.get<NetworkRecord>(keys.network(change.tenant, n.name));
    if (e.value?.id !== n.id || e.value.advertisedBy !== change.router) continue;
    const { advertise: _a, advertisedBy: _b, ...withdrawn } = e.value;
    tx.check(e).set(e.key, withdrawn);
    changed.push(withdrawn);
  }
  return changed;
}

/** The checks of a network's own `advertise`, their error naming the network and its place. */
async function checkNetwork(ctx: Ctx, net: NetworkRecord, i: number): Promise<void> {
  try {
    checkNodeReach(net, { advertise: true });
    await checkAdvertiseOn(ctx, net);
    await checkNodeReachOverlap(ctx, net, {
      want: { egress: net.egress, hostAccess: net.hostAccess, advertise: true },
      clusters: await listClusters(ctx),
    });
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    throw new ApiError(
      err.code,
      `advertise: the router cannot advertise network "${net.name}" (networks[${i}]): ` +
        `${err.message.replace(/^advertise: /, "")}; nothing was changed`,
      "advertise",
    );
  }
}

/**
 * Only an admin turns a router's advertise on: every network it connects goes to the fabric. A
 * tenant may keep it as it is (a replace that sends it unchanged) or turn it off.
 */
export function checkRouterAdvertiseAllowed(
  principal: Principal | undefined,
  want: { advertise?: boolean },
  have: { advertise?: boolean } = {},
): void {
  if (want.advertise !== true || have.advertise === true) return;
  if (principal === undefined || principal.scope === "admin") return;
  throw new ApiError(
    "forbidden",
    "advertise: only an admin may turn it on: it puts every network the router connects into " +
      "the fabric's routing table, beside every other tenant's; ask the admin to set it",
    "advertise",
  );
}

/** After the change committed: the networks' ports carry their advertise to the agents again. */
export async function publishAdvertised(ctx: Ctx, changed: NetworkRecord[]): Promise<void> {
  for (const net of changed) {
    ctx.cache.networks.delete(`${net.tenant}/${net.name}`);
    await republishPorts(ctx, net);
  }
}
