/**
 * MultiNetworkPolicies into security groups, one namespace (tenant) at a time: every policy of the
 * namespace, for every network its `policy-for` names, becomes one group of the tenant
 * (mnp_groups.ts) with the rules mnp_translate.ts works out; the ports the selected pods have on
 * THAT network name it (their other ports are untouched). A port restricted in one direction only
 * also names the tenant's open group of the other direction, as Kubernetes leaves it open; a port
 * no policy selects names none of the monitor's groups, so it is as unrestricted as before.
 * Policies add up: a port names the group of every policy that selects it.
 *
 * Order, so that no window opens what a policy closes nor a group goes while named: groups are
 * made and changed first, ports follow, groups no policy wants any more go last. Everything is
 * worked out from the monitor's memory and the manager's list of the tenant's groups, so a run
 * late, twice, or after a restart converges on the same groups (no duplicates).
 */
import {
  type Logger,
  type ManagerClient,
  ManagerError,
  type Port,
  type SecurityGroup,
  type SecurityRule,
} from "@knitter/common";
import type { Kube, PodLike } from "./kube.ts";
import { descriptionOf, groupNameOf, isOurs, OPEN } from "./mnp_groups.ts";
import {
  type Directions,
  directionsOf,
  type NamedNet,
  type NetRef,
  parsePolicyFor,
  selectedPods,
  translate,
  type World,
} from "./mnp_translate.ts";
import { MNP, type MultiNetworkPolicy, POLICY_FOR } from "./mnp_types.ts";
import type { Tenants } from "./namespaces.ts";
import { tenantPath } from "./resources.ts";
import { Requeue } from "./work_queue.ts";

/** As the manager allows (manager/security_group_schema.ts). */
const MAX_RULES_PER_GROUP = 64;
const MAX_GROUPS_PER_PORT = 8;

export const POLICY_PROBLEM = "MultiNetworkPolicyNotApplied";

/** What the reconciler reads from the monitor's memory. */
export interface PolicySources {
  policies(namespace?: string): readonly MultiNetworkPolicy[];
  pods(): readonly PodLike[];
  namespaces(): readonly PodLike[];
  ports(): Iterable<Port>;
  forPod(uid: string): Port[];
}

interface Wanted {
  description: string;
  rules: SecurityRule[];
  /** "namespace/name" of the policy it stands for (none: an open group). */
  policy?: string;
}

/** One port's groups as the policies want them. */
interface Selected {
  port: Port;
  /** The policies' groups, each with the directions its policy restricts. */
  groups: Map<string, Directions>;
  /** The open groups of the directions no policy restricts. */
  open: string[];
  /** "namespace/name" of the policies selecting it, to tell them when it cannot follow. */
  by: Set<string>;
}

export class PolicyReconciler {
  /** The problems last reported per policy UID (one event per change). */
  private readonly reported = new Map<string, string>();

  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly tenants: Tenants,
    private readonly sources: PolicySources,
    private readonly retryMs: number,
    private readonly log: Logger,
  ) {}

  /** A deleted policy's problems are forgotten (a new one of the same name reports again). */
  forget(policy: MultiNetworkPolicy): void {
    this.reported.delete(policy.metadata.uid ?? keyOf(policy));
  }

  /** Namespaces to reconcile: those with policies, and those whose tenant has groups of ours. */
  async namespacesToReconcile(): Promise<string[]> {
    const out = new Set(this.sources.policies().map((p) => p.metadata.namespace));
    const all = await this.manager.request<{ items: SecurityGroup[] }>(
      "GET",
      "/api/v1/security-groups",
    );
    for (const g of all.items) if (isOurs(g)) out.add(g.tenant);
    return [...out];
  }

  async reconcile(namespace: string): Promise<void> {
    const policies = this.sources.policies(namespace);
    if (policies.length > 0) await this.tenants.ensure(namespace);
    const existing = await this.groupsOf(namespace);
    if (existing === undefined) return; // no tenant: nothing of ours either
    const world = this.world();
    const problems = new Map<string, string[]>(policies.map((p) => [keyOf(p), []]));
    const wanted = new Map<string, Wanted>();
    const selected = new Map<string, Selected>();
    for (const policy of policies) {
      this.plan(policy, world, wanted, selected, problems.get(keyOf(policy))!);
    }
    // The policies' groups first: a port whose groups all fail is left as it was, not closed.
    await this.putGroups(namespace, wanted, existing, selected, problems);
    const opened = openGroups(selected);
    await this.putGroups(namespace, opened, existing, selected, problems);
    for (const [name, w] of opened) wanted.set(name, w);
    const ours = new Set([
      ...wanted.keys(),
      ...[...existing.values()].filter(isOurs).map((g) => g.name),
    ]);
    for (const p of this.sources.ports()) {
      if (p.tenant !== namespace) continue;
      const s = selected.get(portKey(p));
      const problem = await this.putPortGroups(p, s, ours);
      if (!problem) continue;
      if (s) { for (const k of s.by) problems.get(k)?.push(problem); }
      else this.log.warn("a port keeps groups no policy wants", { problem });
    }
    let pending = false;
    for (const g of existing.values()) {
      if (isOurs(g) && !wanted.has(g.name)) pending = !(await this.deleteGroup(g)) || pending;
    }
    for (const policy of policies) await this.report(policy, problems.get(keyOf(policy))!);
    if (pending) throw new Requeue(this.retryMs, "groups still named by ports");
  }

  /** Adds the policy's groups and the ports they go on; its problems, where it falls short. */
  private plan(
    policy: MultiNetworkPolicy,
    world: World,
    wanted: Map<string, Wanted>,
    selected: Map<string, Selected>,
    problems: string[],
  ): void {
    const forWhat = parsePolicyFor(policy.metadata.annotations?.[POLICY_FOR]);
    if (forWhat.problem) problems.push(forWhat.problem);
    const pods = selectedPods(policy, world);
    const { types } = directionsOf(policy);
    for (const named of forWhat.nets) {
      const net = this.resolve(named, policy.metadata.namespace);
      const name = groupNameOf(policy, net);
      const t = translate(policy, net, world);
      problems.push(...t.problems.map((p) => `network ${net.tenant}/${net.name}: ${p}`));
      if (t.rules.length > MAX_RULES_PER_GROUP) {
        problems.push(
          `network ${net.tenant}/${net.name}: ${t.rules.length} rules, more than the ${MAX_RULES_PER_GROUP} a security group holds; the selected pods are left as they were. Select peers by wider CIDRs or fewer ports`,
        );
        continue;
      }
      wanted.set(name, {
        description: descriptionOf(policy, net),
        rules: t.rules,
        policy: keyOf(policy),
      });
      for (const pod of pods) {
        for (const port of this.sources.forPod(pod.uid)) {
          if (port.network !== net.name || port.networkTenant !== net.tenant) continue;
          const k = portKey(port);
          let s = selected.get(k);
          if (!s) selected.set(k, s = { port, groups: new Map(), open: [], by: new Set() });
          s.groups.set(name, types);
          s.by.add(keyOf(policy));
        }
      }
    }
  }

  /** "net": the namespace's own network of that name, else a public one its pods use. */
  private resolve(named: NamedNet, namespace: string): NetRef {
    if (named.tenant !== undefined) return { tenant: named.tenant, name: named.name };
    let other: string | undefined;
    for (const p of this.sources.ports()) {
      if (p.network !== named.name) continue;
      if (p.networkTenant === namespace) return { tenant: namespace, name: named.name };
      if (p.tenant === namespace) other = p.networkTenant;
    }
    return { tenant: other ?? namespace, name: named.name };
  }

  private world(): World {
    const namespaces = new Map(
      this.sources.namespaces().map((n) => [n.metadata!.name!, n.metadata?.labels ?? {}]),
    );
    const pods = this.sources.pods().flatMap((p) => {
      const m = p.metadata;
      if (!m?.uid || !m.name || !m.namespace) return [];
      return [{ namespace: m.namespace, name: m.name, uid: m.uid, labels: m.labels ?? {} }];
    });
    return {
      namespaces,
      pods,
      addresses: (uid, net) =>
        this.sources.forPod(uid).filter((p) =>
          p.network === net.name && p.networkTenant === net.tenant
        ).flatMap((p) => (p.ip6 ? [p.ip, p.ip6.replace(/\/.*$/, "")] : [p.ip])),
    };
  }

  /** The tenant's groups by name; undefined when there is no tenant. */
  private async groupsOf(namespace: string): Promise<Map<string, SecurityGroup> | undefined> {
    try {
      const r = await this.manager.request<{ items: SecurityGroup[] }>(
        "GET",
        tenantPath("security-groups", namespace),
      );
      return new Map(r.items.map((g) => [g.name, g]));
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return undefined;
      throw err;
    }
  }

  /**
   * Makes or changes the groups; one that cannot be (the tenant's own of that name, a refusal) is
   * taken out of `wanted` and off the ports, and its policies say why.
   */
  private async putGroups(
    namespace: string,
    wanted: Map<string, Wanted>,
    existing: Map<string, SecurityGroup>,
    selected: Map<string, Selected>,
    problems: Map<string, string[]>,
  ): Promise<void> {
    for (const [name, w] of wanted) {
      const have = existing.get(name);
      const refused = have && !isOurs(have)
        ? `security group "${name}" exists and was not made by the monitor; it is left alone. Rename or delete that group`
        : await this.putGroup(namespace, name, w, have);
      if (refused === undefined) continue;
      wanted.delete(name);
      withhold(name, w, refused, selected, problems);
    }
  }

  /** Makes or changes the group; the manager's refusal (a quota, a limit) as a problem. */
  private async putGroup(
    namespace: string,
    name: string,
    w: Wanted,
    have: SecurityGroup | undefined,
  ): Promise<string | undefined> {
    try {
      await this.writeGroup(namespace, name, w, have);
      return undefined;
    } catch (err) {
      if (!(err instanceof ManagerError) || err.status >= 500) throw err;
      return `the manager refused security group "${name}": ${err.message}`;
    }
  }

  private async writeGroup(
    namespace: string,
    name: string,
    w: Wanted,
    have: SecurityGroup | undefined,
  ): Promise<void> {
    if (!have) {
      await this.manager.request("POST", tenantPath("security-groups", namespace), {
        name,
        description: w.description,
        rules: w.rules,
      });
      this.log.info("policy group created", { tenant: namespace, group: name });
    } else if (JSON.stringify(have.rules) !== JSON.stringify(w.rules)) {
      await this.manager.request("PUT", tenantPath("security-groups", namespace, name), {
        description: w.description,
        rules: w.rules,
      });
      this.log.info("policy group changed", { tenant: namespace, group: name });
    }
  }

  /**
   * Gives the port the groups the policies want beside its own (the tenant's, kept as they are);
   * a port no policy selects keeps its own only. A problem when it would name too many.
   */
  private async putPortGroups(
    p: Port,
    s: Selected | undefined,
    ours: Set<string>,
  ): Promise<string | undefined> {
    const have = p.securityGroups ?? [];
    const own = have.filter((g) => !ours.has(g));
    const want = s ? [...s.groups.keys(), ...s.open] : [];
    // A port naming none uses its network's defaults: they stay in force beside the policies'.
    const defaults = p.tenant === p.networkTenant ? p.networkSecurityGroups ?? [] : [];
    const base = own.length > 0 ? own : want.length > 0 ? defaults : [];
    const next = want.length === 0 && sameList(own, defaults) ? [] : [...base, ...want];
    if (sameList(next, have)) return undefined;
    if (next.length > MAX_GROUPS_PER_PORT) {
      return `port ${p.id} (${p.pod?.namespace}/${p.pod?.name} ${p.interface}) would name ${next.length} security groups, more than the ${MAX_GROUPS_PER_PORT} a port may; it is left as it was`;
    }
    try {
      await this.manager.request(
        "PUT",
        `${tenantPath("networks", p.tenant, p.network)}/ports/${encodeURIComponent(p.id)}`,
        { securityGroups: next },
      );
    } catch (err) {
      // Released meanwhile: nothing to restrict.
      if (err instanceof ManagerError && err.status === 404) return undefined;
      if (!(err instanceof ManagerError) || err.status >= 500) throw err;
      return `the manager refused the groups of port ${p.id}: ${err.message}`;
    }
    this.log.info("port groups follow the policies", { port: p.id, groups: next });
    return undefined;
  }

  /** Deletes a group no policy wants; false while a port still names it (tried again later). */
  private async deleteGroup(g: SecurityGroup): Promise<boolean> {
    try {
      await this.manager.request("DELETE", tenantPath("security-groups", g.tenant, g.name));
      this.log.info("policy group deleted", { tenant: g.tenant, group: g.name });
      return true;
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return true;
      if (err instanceof ManagerError && err.code === "in_use") return false;
      throw err;
    }
  }

  /** One Warning event per change of a policy's problems (and a log line); none when it is fine. */
  private async report(policy: MultiNetworkPolicy, problems: string[]): Promise<void> {
    const uid = policy.metadata.uid ?? keyOf(policy);
    const text = [...new Set(problems)].join("; ");
    if ((this.reported.get(uid) ?? "") === text) return;
    this.reported.set(uid, text);
    if (text === "") return;
    this.log.warn("MultiNetworkPolicy not fully applied", { policy: keyOf(policy), problems });
    await this.kube.objectEvent(
      {
        apiVersion: `${MNP.group}/${MNP.version}`,
        kind: MNP.kind,
        namespace: policy.metadata.namespace,
        name: policy.metadata.name,
        uid: policy.metadata.uid,
      },
      "Warning",
      POLICY_PROBLEM,
      text,
    );
  }
}

/**
 * A group that cannot be made as wanted: no port names it, and its policies say why. A port left
 * with no policy's group is left as it was; one without its open group stays closed that way.
 */
function withhold(
  name: string,
  w: Wanted,
  why: string,
  selected: Map<string, Selected>,
  problems: Map<string, string[]>,
): void {
  if (w.policy) problems.get(w.policy)?.push(why);
  for (const [k, s] of selected) {
    if (!s.groups.delete(name) && !s.open.includes(name)) continue;
    s.open = s.open.filter((g) => g !== name);
    if (s.groups.size === 0) selected.delete(k);
    if (!w.policy) { for (const p of s.by) problems.get(p)?.push(why); }
  }
}

/**
 * The open group of each direction no policy of a port restricts (Kubernetes leaves it open),
 * named on those ports; the groups wanted for them.
 */
function openGroups(selected: Map<string, Selected>): Map<string, Wanted> {
  const wanted = new Map<string, Wanted>();
  for (const s of selected.values()) {
    for (const dir of ["ingress", "egress"] as const) {
      if ([...s.groups.values()].some((d) => d[dir])) continue;
      s.open.push(OPEN[dir].name);
      wanted.set(OPEN[dir].name, { description: OPEN[dir].description, rules: [open(dir)] });
    }
  }
  return wanted;
}

function open(direction: "ingress" | "egress"): SecurityRule {
  return { direction, protocol: "any" };
}

function keyOf(p: MultiNetworkPolicy): string {
  return `${p.metadata.namespace}/${p.metadata.name}`;
}

function portKey(p: Port): string {
  return `${p.networkId}/${p.id}`;
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
