/**
 * The conntrack zone of each network of a model. ROUTE changes a packet's network (reg0) before
 * FORWARD, so a routed connection and its replies are tracked in different networks: the networks
 * the routes join share one zone (the smallest of their numbers), a network on no route keeps its
 * own. Joined networks never overlap (a router refuses that), and distinct groups of networks get
 * distinct zones, so tenants and overlapping subnets still never share a conntrack entry. This is
 * the TypeScript twin of `zones` in assembly/acl.ts.
 *
 * @module
 */
import type { FlowInput } from "./flow_input.ts";

/** Network number → its zone: labels spread along the routes until none gets smaller. */
export function aclZones(input: FlowInput): Map<number, number> {
  const zone = new Map(input.networks.map((n) => [n.id, n.id]));
  const routes = input.routes ?? [];
  for (let changed = true; changed;) {
    changed = false;
    for (const r of routes) {
      const [a, b] = [zone.get(r.from) ?? r.from, zone.get(r.to) ?? r.to];
      if (a === b) continue;
      const z = Math.min(a, b);
      zone.set(r.from, z);
      zone.set(r.to, z);
      changed = true;
    }
  }
  return zone;
}
