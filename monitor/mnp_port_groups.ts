/**
 * The groups one port names while policies select it, and what it goes back to after. A port's
 * starting groups are its own list, or, with none of its own, its network's defaults (which then
 * apply to it). Policies' groups go after the starting groups: policies add up with them. An open
 * group (a direction no policy restricts) is added only when the port starts with no groups at all:
 * a port with groups is already restricted in that direction by them, and an open group would
 * widen them. Copies of the network's defaults are followed by the monitor's defaults marker, so
 * the copies track the network's defaults while selected and the port goes back to no list of its
 * own once no policy selects it (also after a restart: the marker is on the port itself).
 */
import type { Port } from "@knitter/common";
import type { PolicyGroups } from "./mnp_groups.ts";
import type { Directions } from "./mnp_translate.ts";

export interface PortGroups {
  /** The list the port should name (before leaving out groups that could not be made). */
  next: string[];
  /** The monitor's shared groups (open, defaults marker) it names, to be made first. */
  needs: string[];
}

export function portGroups(
  port: Port,
  policies: ReadonlyMap<string, Directions> | undefined,
  groups: { isOurs(name: string): boolean; isLegacy(name: string): boolean },
  names: PolicyGroups,
): PortGroups {
  const have = port.securityGroups ?? [];
  const own = have.filter((g) => !groups.isOurs(g));
  // A port of another tenant's (public) network does not take that network's defaults.
  const defaults = port.tenant === port.networkTenant ? port.networkSecurityGroups ?? [] : [];
  // The first version copied the defaults without a marker: copies are what equals them.
  const copied = have.includes(names.defaults.name) ||
    (have.some(groups.isLegacy) && sameList(own, defaults));
  const hadNone = own.length === 0 || copied;
  if (!policies || policies.size === 0) return { next: hadNone ? [] : own, needs: [] };
  const base = hadNone ? defaults : own;
  const marker = hadNone && base.length > 0 ? [names.defaults.name] : [];
  const open = base.length > 0 ? [] : (["ingress", "egress"] as const)
    .filter((dir) => ![...policies.values()].some((d) => d[dir]))
    .map((dir) => names.open[dir].name);
  return { next: [...base, ...marker, ...policies.keys(), ...open], needs: [...marker, ...open] };
}

export function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
