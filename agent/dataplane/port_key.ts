/**
 * How the agent tells ports apart: tenant, network and ID. A port ID is unique only within its
 * tenant, and on a public network two tenants may each have a port of the same ID; keyed without
 * the tenant, one would hide the other (its traffic sent to the other's pod, or a port missing).
 */
import type { Port } from "@knitter/common";

/** What names one port. */
export type PortRef = Pick<Port, "tenant" | "networkId" | "id">;

export function portKey(p: PortRef): string {
  return `${p.tenant}/${p.networkId}/${p.id}`;
}
