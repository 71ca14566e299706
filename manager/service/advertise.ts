/**
 * A network's `advertise` (agent/README.md, "BGP advertisement"): its CIDRs, IPv4 and IPv6, are
 * announced to the fabric by the agents' BGP daemons, and the fabric reaches its pods without NAT.
 * The fabric is one routing table: what goes into it is the admin's call alone, only from the
 * ranges the admin configured as advertisable (`bgp.advertisableRanges`; none: nothing is), and
 * never two networks whose CIDRs overlap (two tenants with the same CIDR cannot both be reached).
 *
 * @module
 */
import { type Cidr, cidrsOverlap, formatCidr, parseCidr } from "@knitter/common/address";
import { ApiError, invalid } from "../errors.ts";
import { keys, type NetworkRecord } from "../model.ts";
import type { Principal } from "../auth.ts";
import { type Ctx, listValues } from "./context.ts";

/** What of a network the checks read. */
type AdvertisedNet = Pick<NetworkRecord, "id" | "name" | "cidr" | "cidr6">;

/** Only an admin turns it on (not a cluster monitor: the fabric is wider than one cluster). */
export function checkAdvertiseAllowed(
  principal: Principal,
  want: { advertise?: boolean },
  have: { advertise?: boolean } = {},
): void {
  if (want.advertise !== true || have.advertise === true || principal.scope === "admin") return;
  throw new ApiError(
    "forbidden",
    "advertise: only an admin may turn it on: it puts the network's addresses into the " +
      "fabric's routing table, beside every other tenant's; ask the admin to set it",
    "advertise",
  );
}

/** The network's CIDRs as advertised: IPv4, and IPv6 when it has one (node_reach.ts too). */
export function cidrsOf(net: Pick<NetworkRecord, "cidr" | "cidr6">): Cidr[] {
  return [net.cidr, net.cidr6].filter((c): c is string => c !== undefined)
    .map((c) => parseCidr(c) as Cidr);
}

/** Each CIDR must lie inside one of the admin's advertisable ranges (400 otherwise). */
export function checkAdvertisable(ctx: Ctx, net: AdvertisedNet): void {
  const ranges = ctx.settings.advertisableRanges;
  if (ranges.length === 0) {
    throw invalid(
      "advertise",
      `network "${net.name}" cannot be advertised: the manager has no advertisable ranges, so ` +
        `no network is advertised; the admin lists the ranges the fabric may learn in the ` +
        `manager's bgp.advertisableRanges`,
    );
  }
  for (const cidr of cidrsOf(net)) {
    if (ranges.some((r) => within(cidr, r))) continue;
    throw invalid(
      "advertise",
      `network "${net.name}": ${formatCidr(cidr)} is outside the advertisable ranges ` +
        `(${ranges.map(formatCidr).join(", ")}), so it would put addresses the fabric does not ` +
        `own into its routing table; give the network a CIDR inside them, or add the range to ` +
        `the manager's bgp.advertisableRanges`,
    );
  }
}

function within(inner: Cidr, outer: Cidr): boolean {
  return inner.family === outer.family && inner.prefix >= outer.prefix &&
    cidrsOverlap(inner, outer);
}

/**
 * Refuses a CIDR that overlaps an advertised network's, of any tenant, in any cluster: the fabric
 * would learn both and reach one. The other network is not named (it may be another tenant's).
 */
export async function checkAdvertiseOverlap(ctx: Ctx, net: AdvertisedNet): Promise<void> {
  const mine = cidrsOf(net);
  for (const other of await listValues<NetworkRecord>(ctx.store, keys.networks())) {
    if (other.id === net.id || other.advertise !== true) continue;
    const clash = mine.find((c) => cidrsOf(other).some((o) => cidrsOverlap(c, o)));
    if (clash === undefined) continue;
    throw new ApiError(
      "conflict",
      `advertise: ${formatCidr(clash)} overlaps a network that is advertised already; the ` +
        `fabric is one routing table and would reach only one of the two: choose another cidr, ` +
        `or have the admin stop advertising the other network`,
      "advertise",
    );
  }
}

/** The checks of turning advertise on (`turnsOn`): the ranges, then every advertised network. */
export async function checkAdvertiseOn(ctx: Ctx, net: AdvertisedNet): Promise<void> {
  checkAdvertisable(ctx, net);
  await checkAdvertiseOverlap(ctx, net);
}

/**
 * A network the router advertised keeps it while the router does: turning it off on the network
 * is refused (409, naming the router); turning it on makes it the network's own (kept when it
 * leaves the router).
 */
export function checkNetworkAdvertiseChange(
  net: NetworkRecord,
  want: { advertise?: boolean },
): void {
  if (want.advertise !== false || net.advertisedBy === undefined) return;
  throw new ApiError(
    "conflict",
    `advertise: network "${net.name}" is advertised by its router "${net.advertisedBy}", for ` +
      `every network the router connects; take the network off the router, or have the admin ` +
      `turn the router's advertise off`,
    "advertise",
  );
}

/** The network's advertise as the network's own from now on, when it was asked for on it. */
export function ownAdvertise(record: NetworkRecord, want: { advertise?: boolean }): void {
  if (want.advertise === true) delete record.advertisedBy;
}
