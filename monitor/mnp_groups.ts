/**
 * The security groups the monitor makes for MultiNetworkPolicies: their names and the mark that
 * says they are the monitor's. A tenant may make a group of any DNS label itself; a group of one of
 * these names that lacks the mark is the tenant's own, never changed, adopted or deleted (the
 * policy reports it instead).
 */
import { fnv1a } from "./pods.ts";
import type { NetRef } from "./mnp_translate.ts";
import type { MultiNetworkPolicy } from "./mnp_types.ts";

/** Every description the monitor writes starts with this. */
export const MARK = "knitter-monitor: MultiNetworkPolicy";

/** Ingress left open for pods that policies restrict in egress only, and the reverse. */
export const OPEN = {
  ingress: {
    name: "mnp-open-ingress",
    description: `${MARK}: ingress open (egress-only policies)`,
  },
  egress: { name: "mnp-open-egress", description: `${MARK}: egress open (ingress-only policies)` },
} as const;

export function isOurs(group: { description?: string }): boolean {
  return group.description?.startsWith(MARK) ?? false;
}

/** The group of one policy on one network: readable, and unique to the policy (its UID). */
export function groupNameOf(policy: MultiNetworkPolicy, net: NetRef): string {
  const m = policy.metadata;
  const hash = fnv1a(`${m.namespace}/${m.name}/${m.uid ?? ""}|${net.tenant}/${net.name}`);
  return `mnp-${slug(m.name, 28)}-${slug(net.name, 20)}-${hash}`;
}

export function descriptionOf(policy: MultiNetworkPolicy, net: NetRef): string {
  const m = policy.metadata;
  return `${MARK} ${m.namespace}/${m.name} for network ${net.tenant}/${net.name}`;
}

/** A DNS label's worth of `text`: lowercase letters, digits and inner dashes, at most `max`. */
function slug(text: string, max: number): string {
  const s = text.toLowerCase().replace(/[^a-z0-9-]+/g, "-").slice(0, max).replace(/^-+|-+$/g, "");
  return s === "" ? "x" : s;
}
