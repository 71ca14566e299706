/**
 * A network's two settings that involve the node (agent/README.md, "Egress and the node"): `egress`
 * (its pods reach what lies outside through the node, with source NAT to the node's address) and
 * `hostAccess` (the node reaches its pods on the network: kubelet probes, hostPort). Both put the
 * node on the network with the gateway's address (IPv4, IPv6, or a dual-stack network's both), so
 * both need a gateway; a hostAccess network's subnets are routed in the node's main table, so two
 * of them must never overlap, in either family.
 *
 * @module
 */
import { cidrsOverlap, formatCidr } from "@knitter/common/address";
import { cidrsOf } from "./advertise.ts";
import { ApiError, invalid } from "../errors.ts";
import { keys, type NetworkRecord } from "../model.ts";
import { type Ctx, listValues } from "./context.ts";
import { type ClusterReach, mayUse, type Principal } from "../auth.ts";
import { Mutex } from "@knitter/common";

/** The settings as a request may send them (absent: unchanged, or off at creation). */
export interface NodeReach {
  egress?: boolean;
  hostAccess?: boolean;
  /** BGP advertisement (advertise.ts): routed in the main table, as hostAccess. */
  advertise?: boolean;
}

/**
 * Each setting needs a gateway: the node takes its address on the network (IPv4 or IPv6, and a
 * dual-stack network's IPv6 gateway beside its IPv4 one).
 */
export function checkNodeReach(
  net: Pick<NetworkRecord, "name" | "cidr" | "gateway">,
  want: NodeReach,
): void {
  for (const field of ["egress", "hostAccess", "advertise"] as const) {
    if (want[field] !== true || net.gateway !== undefined) continue;
    throw invalid(
      field,
      `network "${net.name}" (${net.cidr}) has no gateway; the node joins the network with the ` +
        `gateway's address: give the network a gateway, or leave ${field} off`,
    );
  }
}

/**
 * Turning egress or hostAccess on is the admin's call, or a cluster monitor's within its reach (as
 * the admin's delegate, like the other fields only an admin sets): both put the node on the network
 * with the gateway's address, in the node's kernel beside its own addresses and routes, where a
 * tenant's choice of CIDR and gateway could take over the node's. A tenant may turn them off.
 */
export function checkNodeReachAllowed(
  principal: Principal,
  want: NodeReach,
  have: NodeReach = {},
): void {
  if (principal.scope === "admin" || principal.scope === "monitor") return;
  for (const field of ["egress", "hostAccess"] as const) {
    if (want[field] !== true || have[field] === true) continue;
    throw new ApiError(
      "forbidden",
      `${field}: only an admin may turn it on: it puts the node on the network with the ` +
        `gateway's address, beside the node's own addresses and routes; ask the admin to set it`,
      field,
    );
  }
}

/** What of a network the overlap rule reads. */
type ReachNet =
  & Pick<NetworkRecord, "id" | "tenant" | "name" | "cidr" | "type" | "physnet">
  & Partial<Pick<NetworkRecord, "cidr6">>;

/** The first of `a`'s subnets (IPv4, and a dual-stack one's IPv6) that overlaps one of `b`'s. */
function overlapOf(
  a: Pick<NetworkRecord, "cidr" | "cidr6">,
  b: Pick<NetworkRecord, "cidr" | "cidr6">,
) {
  return cidrsOf(a).find((x) => cidrsOf(b).some((y) => cidrsOverlap(x, y)));
}

/**
 * Whether a network with `a`'s settings and one with `b`'s may not overlap: the node routes every
 * hostAccess subnet in its main table, where its replies and errors to an egress network's
 * addresses could reach the other network's pods instead (two egress networks may overlap: each
 * has its own table).
 */
function clashes(a: NodeReach, b: NodeReach): boolean {
  return (inMainTable(a) && (inMainTable(b) || b.egress === true)) ||
    (a.egress === true && inMainTable(b));
}

/** hostAccess and advertised networks: their subnet is in the node's main table. */
function inMainTable(n: NodeReach): boolean {
  return n.hostAccess === true || n.advertise === true;
}

/** The setting of `n` an overlap names. */
function reachField(n: NodeReach): string {
  return n.hostAccess === true ? "hostAccess" : n.advertise === true ? "advertise" : "egress";
}

/**
 * Refuses egress or hostAccess (`want`: the settings the network would have) on a network whose
 * subnet overlaps another whose settings clash with them, where the two can share a node: when one
 * of `clusters` (all of them) may use both (auth.ts mayUse). Networks no cluster runs together
 * never meet on a node, so a cluster's monitor turning them on for its tenants blocks no tenant of
 * other clusters; a cluster change that would make such networks meet is refused instead
 * (checkClusterNodeReach). The other network is not named (it is another tenant's).
 */
export async function checkNodeReachOverlap(
  ctx: Ctx,
  net: ReachNet,
  asked: { want: NodeReach; clusters: readonly ClusterReach[] },
): Promise<void> {
  const { want, clusters } = asked;
  if (want.egress !== true && !inMainTable(want)) return;
  for (const other of await listValues<NetworkRecord>(ctx.store, keys.networks())) {
    if (other.id === net.id || !clashes(want, other)) continue;
    const mine = overlapOf(net, other);
    if (mine === undefined) continue;
    if (!clusters.some((c) => mayUse(c, net) && mayUse(c, other))) continue;
    const field = reachField(want);
    // A tenant's own networks never overlap (checkOverlap): the other one is another tenant's.
    throw new ApiError(
      "conflict",
      `${field}: ${formatCidr(mine)} overlaps a network of another tenant that has ` +
        `${reachField(other)} and runs in a cluster with this ` +
        `one; the node routes every hostAccess subnet in one table, beside the egress networks' ` +
        `own, so they must not overlap: choose another cidr, or leave ${field} off`,
      field,
    );
  }
}

/**
 * Refuses a cluster's reach (at its creation or change) under which its nodes would run two
 * networks whose egress or hostAccess clash and whose subnets overlap (409 naming both: the
 * route is the admin's).
 */
export async function checkClusterNodeReach(ctx: Ctx, reach: ClusterReach): Promise<void> {
  const reaching = (await listValues<NetworkRecord>(ctx.store, keys.networks())).filter((n) =>
    (n.egress === true || inMainTable(n)) && mayUse(reach, n)
  );
  for (const [i, a] of reaching.entries()) {
    for (const b of reaching.slice(i + 1)) {
      if (!clashes(a, b) && !clashes(b, a)) continue;
      if (overlapOf(a, b) === undefined) continue;
      throw new ApiError(
        "conflict",
        `Cluster "${reach.name}" would run networks ${describeReach(a)} and ${
          describeReach(b)
        } on its nodes, and their subnets overlap: a node routes every hostAccess subnet in one ` +
          `table, beside the egress networks' own. Turn egress or hostAccess off on one of them, ` +
          `or leave one's tenant (or network, or physnet) out of the cluster`,
      );
    }
  }
}

function describeReach(n: NetworkRecord): string {
  const on = [
    n.egress === true ? "egress" : "",
    n.hostAccess === true ? "hostAccess" : "",
    n.advertise === true ? "advertise" : "",
  ].filter(Boolean).join(" and ");
  return `${n.tenant}/${n.name} (${n.cidr}, ${on})`;
}

/**
 * The checks that read every network (overlapping subnets, egress and hostAccess) run one at a
 * time in this process: network creations, node-reach changes and cluster changes alike.
 */
export function networkChecks(ctx: Ctx): Mutex {
  let m = locks.get(ctx);
  if (!m) locks.set(ctx, m = new Mutex());
  return m;
}

const locks = new WeakMap<Ctx, Mutex>();

/** The settings of a record as they are stored: only when on. */
export function storedNodeReach(record: NetworkRecord, want: NodeReach): void {
  for (const field of ["egress", "hostAccess", "advertise"] as const) {
    if (want[field] === true) record[field] = true;
    else if (want[field] === false) delete record[field];
  }
}
