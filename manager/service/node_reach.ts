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
import type { Principal } from "../auth.ts";

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

/**
 * Refuses egress or hostAccess (`want`: the settings the network would have) on a network whose
 * subnet overlaps another network with hostAccess, and hostAccess on one overlapping another with
 * egress: the node routes every hostAccess subnet in its main table, where its replies and errors
 * to an egress network's addresses could reach the other network's pods instead (two egress
 * networks may overlap: each has its own table). Any cluster may run the networks of any tenant
 * it admits, so every network counts. The other network is not named (it is another tenant's).
 */
export async function checkNodeReachOverlap(
  ctx: Ctx,
  net: Pick<NetworkRecord, "id" | "tenant" | "name" | "cidr">,
  want: NodeReach,
): Promise<void> {
  if (want.egress !== true && want.hostAccess !== true) return;
  const mine = parseCidr(net.cidr) as Cidr;
  for (const other of await listValues<NetworkRecord>(ctx.store, keys.networks())) {
    if (other.id === net.id) continue;
    const clash =
      (want.hostAccess === true && (other.hostAccess === true || other.egress === true)) ||
      (want.egress === true && other.hostAccess === true);
    if (!clash || !cidrsOverlap(mine, parseCidr(other.cidr) as Cidr)) continue;
    const field = want.hostAccess === true ? "hostAccess" : "egress";
    // A tenant's own networks never overlap (checkOverlap): the other one is another tenant's.
    throw new ApiError(
      "conflict",
      `${field}: ${net.cidr} overlaps a network of another tenant that has ` +
        `${other.hostAccess === true ? "hostAccess" : "egress"}; the node routes every ` +
        `hostAccess subnet in one table, beside the egress networks' own, so they must not ` +
        `overlap: choose another cidr, or leave ${field} off`,
      field,
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
