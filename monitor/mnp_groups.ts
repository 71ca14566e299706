/**
 * The security groups the monitor makes for MultiNetworkPolicies: their names and the mark that
 * says they are this monitor's. Both carry the cluster: one tenant may live in several clusters on
 * one manager, and each cluster's monitor manages only its own groups (another's are as foreign as
 * the tenant's). A tenant may make a group of any DNS label itself; a group of one of these names
 * that lacks this cluster's mark is never changed, adopted or deleted (the policy reports it).
 */
import { fnv1a } from "@knitter/common";
import type { NetRef } from "./mnp_translate.ts";
import type { MultiNetworkPolicy } from "./mnp_types.ts";

/**
 * The mark of the monitor's first version, without a cluster. Its groups are taken off the ports
 * a monitor manages (its cluster's) and deleted once no port names them: an upgrade converges.
 */
export const LEGACY_MARK = "knitter-monitor: MultiNetworkPolicy";

/** The groups of one cluster's monitor: their names and mark. */
export class PolicyGroups {
  /** Every description this monitor writes starts with this. */
  readonly mark: string;
  /** Ingress left open for pods that policies restrict in egress only, and the reverse. */
  readonly open: Record<"ingress" | "egress", { name: string; description: string }>;
  /**
   * Named on a port that had no groups of its own while it carries copies of its network's
   * defaults (so the port goes back to none when no policy selects it any more). No rules.
   */
  readonly defaults: { name: string; description: string };

  constructor(readonly cluster: string) {
    this.mark = `knitter-monitor@${cluster}: MultiNetworkPolicy`;
    const tag = slug(cluster, 40);
    this.open = {
      ingress: {
        name: `mnp-open-ingress-${tag}`,
        description: `${this.mark}: ingress open (egress-only policies)`,
      },
      egress: {
        name: `mnp-open-egress-${tag}`,
        description: `${this.mark}: egress open (ingress-only policies)`,
      },
    };
    this.defaults = {
      name: `mnp-defaults-${tag}`,
      description:
        `${this.mark}: the groups before it are the port's network's defaults, copied while policies select it`,
    };
  }

  isOurs(group: { description?: string }): boolean {
    return group.description?.startsWith(this.mark) ?? false;
  }

  /** A group of the first version (no cluster in its mark). */
  isLegacy(group: { description?: string }): boolean {
    return group.description?.startsWith(LEGACY_MARK) ?? false;
  }

  /** The group of one policy on one network: readable, unique to the policy (UID) and cluster. */
  nameOf(policy: MultiNetworkPolicy, net: NetRef): string {
    const m = policy.metadata;
    const hash = fnv1a(
      `${this.cluster}|${m.namespace}/${m.name}/${m.uid ?? ""}|${net.tenant}/${net.name}`,
    );
    return `mnp-${slug(m.name, 28)}-${slug(net.name, 20)}-${hash}`;
  }

  descriptionOf(policy: MultiNetworkPolicy, net: NetRef): string {
    const m = policy.metadata;
    return `${this.mark} ${m.namespace}/${m.name} for network ${net.tenant}/${net.name}`;
  }
}

/** A DNS label's worth of `text`: lowercase letters, digits and inner dashes, at most `max`. */
function slug(text: string, max: number): string {
  const s = text.toLowerCase().replace(/[^a-z0-9-]+/g, "-").slice(0, max).replace(/^-+|-+$/g, "");
  return s === "" ? "x" : s;
}
