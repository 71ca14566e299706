/**
 * A network's two settings that involve the node (agent/README.md, "Egress and the node"): `egress`
 * (its pods reach what lies outside through the node, with source NAT to the node's address) and
 * `hostAccess` (the node reaches its pods on the network: kubelet probes, hostPort). Both put the
 * node on the network with the gateway's IPv4 address, so both need one; and a hostAccess network's
 * subnet is routed in the node's main table, so two of them must never overlap.
 *
 * @module
 */
import { type Cidr, cidrsOverlap, parseCidr } from "@knitter/common/address";
import { ApiError, invalid } from "../errors.ts";
import { keys, type NetworkRecord } from "../model.ts";
import { type Ctx, listValues } from "./context.ts";

/** The settings as a request may send them (absent: unchanged, or off at creation). */
export interface NodeReach {
  egress?: boolean;
  hostAccess?: boolean;
}

/** Both settings need an IPv4 gateway: the node takes its address on the network. */
export function checkNodeReach(
  net: Pick<NetworkRecord, "name" | "cidr" | "gateway">,
  want: NodeReach,
): void {
  for (const field of ["egress", "hostAccess"] as const) {
    if (want[field] !== true) continue;
    if (net.gateway !== undefined && !net.gateway.includes(":")) continue;
    throw invalid(
      field,
      `network "${net.name}" (${net.cidr}) has no IPv4 gateway; the node joins the network with ` +
        `the gateway's IPv4 address (IPv6 is not supported yet): give the network an IPv4 cidr ` +
        `and gateway, or leave ${field} off`,
    );
  }
}

/**
 * Refuses hostAccess on a network whose subnet overlaps another hostAccess network: the node
 * routes both in one table, and could not tell their pods apart. Any cluster may run the networks
 * of any tenant it admits, so every hostAccess network counts. The other network is not named
 * (it is another tenant's).
 */
export async function checkHostAccessOverlap(
  ctx: Ctx,
  net: Pick<NetworkRecord, "id" | "tenant" | "name" | "cidr">,
): Promise<void> {
  const mine = parseCidr(net.cidr) as Cidr;
  for (const other of await listValues<NetworkRecord>(ctx.store, keys.networks())) {
    if (other.id === net.id || other.hostAccess !== true) continue;
    if (!cidrsOverlap(mine, parseCidr(other.cidr) as Cidr)) continue;
    // A tenant's own networks never overlap (checkOverlap): the other one is another tenant's.
    throw new ApiError(
      "conflict",
      `hostAccess: ${net.cidr} overlaps a network of another tenant that has hostAccess; the ` +
        `node routes every ` +
        `hostAccess subnet in one table, so they must not overlap: choose another cidr, or leave ` +
        `hostAccess off`,
      "hostAccess",
    );
  }
}

/** The settings of a record as they are stored: only when on. */
export function storedNodeReach(record: NetworkRecord, want: NodeReach): void {
  for (const field of ["egress", "hostAccess"] as const) {
    if (want[field] === true) record[field] = true;
    else if (want[field] === false) delete record[field];
  }
}
