/**
 * MultiNetworkPolicies into security groups, one namespace (tenant) at a time: every policy of the
 * namespace, for every network its `policy-for` names, becomes one group of the tenant
 * (mnp_groups.ts) with the rules mnp_translate.ts works out; the ports the selected pods have on
 * THAT network name it (their other ports are untouched), as mnp_port_groups.ts works out beside
 * the port's own groups. Policies add up: a port names the group of every policy that selects it.
 *
 * Order, so that no window opens what a policy closes nor a group goes while named: groups are
 * made and changed first, ports follow, groups no policy wants any more go last. Everything is
 * worked out from the monitor's memory and the manager's list of the tenant's groups, so a run
 * late, twice, or after a restart converges on the same groups (no duplicates).
 *
 * Fail closed: the group of a policy that still exists is never taken off its ports nor deleted
 * because it cannot be written. Too many rules: it is written with none (its restricted directions
 * closed); a manager refusal: it keeps its last rules. Either is a Warning event on the policy.
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
import type { PolicyGroups } from "./mnp_groups.ts";
import { portGroups, sameList } from "./mnp_port_groups.ts";
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
  /** "namespace/name" of the policy it stands for (none: a shared group, open or marker). */
  policy?: string;
}

/** One port's groups as the policies want them. */
interface Selected {
  port: Port;
  /** The policies' groups, each with the directions its policy restricts. */
  groups: Map<string, Directions>;
  /** "namespace/name" of the policies selecting it, to tell them when it cannot follow. */
  by: Set<string>;
}

/** A network as the manager resolved a `policy-for` entry. */
interface ResolvedNet extends NetRef {
  id: string;
}

/** One reconcile's state: the tenant's groups, and what the policies want of groups and ports. */
interface Plan {
  namespace: string;
  existing: Map<string, SecurityGroup>;
  wanted: Map<string, Wanted>;
  selected: Map<string, Selected>;
  problems: Map<string, string[]>;
}

export class PolicyReconciler {
  /** The problems last reported per policy UID (one event per change). */
  private readonly reported = new Map<string, string>();

  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly tenants: Tenants,
    private readonly sources: PolicySources,
    private readonly names: PolicyGroups,
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
    for (const g of all.items) {
      if (this.names.isOurs(g) || this.names.isLegacy(g)) out.add(g.tenant);
    }
    return [...out];
  }

  async reconcile(namespace: string): Promise<void> {
    const policies = this.sources.policies(namespace);
    if (policies.length > 0) await this.tenants.ensure(namespace);
    const existing = await this.groupsOf(namespace);
    if (existing === undefined) return; // no tenant: nothing of ours either
    const plan: Plan = {
      namespace,
      existing,
      wanted: new Map(),
      selected: new Map(),
      problems: new Map(policies.map((p) => [keyOf(p), []])),
    };
    const world = this.world();
    for (const policy of policies) await this.plan(policy, world, plan);
    // The policies' groups first: a port never names a group before it is what its policy says.
    for (const name of (await this.putGroups(plan, plan.wanted)).keys()) {
      unselect(name, plan.selected);
    }
    await this.putPorts(plan);
    let inUse = false;
    for (const g of existing.values()) {
      if (this.names.isOurs(g) && !plan.wanted.has(g.name)) {
        inUse = !(await this.deleteGroup(g)) || inUse;
      }
      // Another cluster's ports may still name it: its monitor takes them off, then either deletes.
      if (this.names.isLegacy(g)) await this.deleteGroup(g);
    }
    for (const policy of policies) await this.report(policy, plan.problems.get(keyOf(policy))!);
    if (inUse) throw new Requeue(this.retryMs, "groups still named by ports");
  }

  /** Adds the policy's groups and the ports they go on; its problems, where it falls short. */
  private async plan(policy: MultiNetworkPolicy, world: World, plan: Plan): Promise<void> {
    const problems = plan.problems.get(keyOf(policy))!;
    const forWhat = parsePolicyFor(policy.metadata.annotations?.[POLICY_FOR]);
    if (forWhat.problem) problems.push(forWhat.problem);
    const pods = selectedPods(policy, world);
    const { types } = directionsOf(policy);
    let unknown = forWhat.problem !== undefined;
    for (const named of forWhat.nets) {
      const r = await this.resolve(named, policy.metadata.namespace);
      if (r.problem !== undefined) {
        problems.push(r.problem);
        unknown = true;
        continue;
      }
      const net = r.net;
      const name = this.names.nameOf(policy, net);
      const t = translate(policy, net, world);
      problems.push(...t.problems.map((p) => `network ${net.tenant}/${net.name}: ${p}`));
      let rules = t.rules;
      if (rules.length > MAX_RULES_PER_GROUP) {
        problems.push(
          `network ${net.tenant}/${net.name}: ${rules.length} rules, more than the ${MAX_RULES_PER_GROUP} a security group holds; the selected pods are closed in the directions the policy restricts until it fits. Select peers by wider CIDRs or fewer ports`,
        );
        rules = []; // fail closed: allow nothing rather than leave the pods open
      }
      plan.wanted.set(name, {
        description: this.names.descriptionOf(policy, net),
        rules,
        policy: keyOf(policy),
      });
      for (const pod of pods) {
        for (const port of this.sources.forPod(pod.uid)) {
          if (port.networkId === net.id) select(plan, port, name, types, keyOf(policy));
        }
      }
    }
    if (unknown) this.keepLast(policy, types, plan);
  }

  /**
   * A policy whose networks cannot all be worked out (its annotation wrong, a network not found)
   * keeps the groups it has on the ports that name them, as they are: fail closed. Its other
   * networks' groups are worked out as usual.
   */
  private keepLast(policy: MultiNetworkPolicy, types: Directions, plan: Plan): void {
    const prefix = `${this.names.mark} ${keyOf(policy)} for network `;
    for (const g of plan.existing.values()) {
      if (!g.description?.startsWith(prefix) || plan.wanted.has(g.name)) continue;
      plan.wanted.set(g.name, {
        description: g.description,
        rules: g.rules,
        policy: keyOf(policy),
      });
      for (const port of this.sources.ports()) {
        if (port.tenant === plan.namespace && port.securityGroups?.includes(g.name)) {
          select(plan, port, g.name, types, keyOf(policy));
        }
      }
    }
  }

  /**
   * A `policy-for` entry as the manager resolves it ("net": the namespace's own network of that
   * name, else the public one). Only the namespace's own tenant's networks and public ones: a
   * policy on another tenant's private network would copy its pods' addresses into this tenant's
   * group, which this tenant reads.
   */
  private async resolve(
    named: NamedNet,
    namespace: string,
  ): Promise<{ net: ResolvedNet; problem?: undefined } | { problem: string }> {
    const label = named.tenant === undefined ? named.name : `${named.tenant}/${named.name}`;
    let n: { id: string; tenant: string; name: string; public?: boolean };
    try {
      n = await this.manager.request(
        "GET",
        tenantPath("networks", named.tenant ?? namespace, named.name),
      );
    } catch (err) {
      if (!(err instanceof ManagerError) || err.status >= 500) throw err;
      return {
        problem:
          `policy-for: network "${label}" is neither the namespace's own nor a public one (${err.message}); nothing of the policy applies on it. Name a network of namespace "${namespace}" or a public one`,
      };
    }
    if (n.tenant !== namespace && !n.public) {
      return {
        problem:
          `policy-for: network "${label}" is tenant "${n.tenant}"'s private network; a policy applies only on its own namespace's networks and public ones, so no group is made for it. Remove it from the annotation`,
      };
    }
    return { net: { id: n.id, tenant: n.tenant, name: n.name } };
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
   * Whether a port's group is the monitor's, this version's or the first's (else the port's own,
   * kept as it is).
   */
  private oursTest(plan: Plan): { isOurs(name: string): boolean; isLegacy(name: string): boolean } {
    const shared = new Set([
      this.names.open.ingress.name,
      this.names.open.egress.name,
      this.names.defaults.name,
    ]);
    const isLegacy = (name: string) => {
      const g = plan.existing.get(name);
      return g !== undefined && this.names.isLegacy(g);
    };
    return {
      isLegacy,
      isOurs: (name) => {
        const g = plan.existing.get(name);
        if (g) return this.names.isOurs(g) || this.names.isLegacy(g);
        return plan.wanted.has(name) || shared.has(name);
      },
    };
  }

  /**
   * Every port of the tenant gets the groups the policies want (mnp_port_groups.ts); the shared
   * groups they need are made first. A port that cannot follow is a problem of its policies.
   */
  private async putPorts(plan: Plan): Promise<void> {
    const groups = this.oursTest(plan);
    const ports = [...this.sources.ports()].filter((p) => p.tenant === plan.namespace);
    const lists = ports.map((p) => {
      const s = plan.selected.get(portKey(p));
      return { p, s, ...portGroups(p, s?.groups, groups, this.names) };
    });
    const shared = new Map<string, Wanted>();
    for (const { needs } of lists) for (const n of needs) shared.set(n, this.sharedGroup(n));
    const absent = await this.putGroups(plan, shared);
    for (const [n, w] of shared) plan.wanted.set(n, w);
    for (const { p, s, next, needs } of lists) {
      const missing = needs.filter((n) => absent.has(n));
      const problem = await this.putPortGroups(p, next.filter((g) => !absent.has(g)));
      const said = [
        ...missing.map((n) => `${portName(p)} goes without "${n}": ${absent.get(n)}`),
        ...(problem ? [problem] : []),
      ];
      if (s) { for (const k of s.by) plan.problems.get(k)?.push(...said); }
      else if (problem) this.log.warn("a port keeps groups no policy wants", { problem });
    }
  }

  /** The open group of a direction (one rule: anyone, any protocol), or the defaults marker. */
  private sharedGroup(name: string): Wanted {
    for (const direction of ["ingress", "egress"] as const) {
      const o = this.names.open[direction];
      if (o.name === name) {
        return { description: o.description, rules: [{ direction, protocol: "any" }] };
      }
    }
    return { description: this.names.defaults.description, rules: [] };
  }

  /**
   * Makes or changes the groups. Answers those no port may name, with why: absent and not to be
   * made, or the tenant's own of that name. A group of ours the manager refuses to change keeps
   * its last rules and its ports (fail closed), and its policy says so.
   */
  private async putGroups(plan: Plan, wanted: Map<string, Wanted>): Promise<Map<string, string>> {
    const absent = new Map<string, string>();
    for (const [name, w] of wanted) {
      const have = plan.existing.get(name);
      const mine = have === undefined || this.names.isOurs(have);
      const refused = !mine
        ? `security group "${name}" exists and was not made by this cluster's monitor; it is left alone. Rename or delete that group`
        : await this.putGroup(plan.namespace, name, w, have);
      if (refused === undefined) continue;
      if (have && mine) {
        const why = `${refused}; it keeps its last rules and its ports`;
        if (w.policy) plan.problems.get(w.policy)?.push(why);
        else this.log.warn("a shared policy group keeps its last rules", { problem: why });
        continue;
      }
      if (w.policy) plan.problems.get(w.policy)?.push(refused);
      absent.set(name, refused);
    }
    return absent;
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
   * Names `next` on the port, through the PATCH that changes an existing port only (it never
   * makes one, so a port released meanwhile stays released) on the network the monitor saw.
   */
  private async putPortGroups(p: Port, next: string[]): Promise<string | undefined> {
    if (sameList(next, p.securityGroups ?? [])) return undefined;
    const where = portName(p);
    if (next.length > MAX_GROUPS_PER_PORT) {
      return `${where} would name ${next.length} security groups, more than the ${MAX_GROUPS_PER_PORT} a port may; it is left as it was`;
    }
    try {
      await this.manager.request(
        "PATCH",
        `${tenantPath("networks", p.tenant, p.network)}/ports/${encodeURIComponent(p.id)}`,
        { networkId: p.networkId, securityGroups: next },
      );
    } catch (err) {
      if (!(err instanceof ManagerError) || err.status >= 500) throw err;
      // Released meanwhile: nothing to restrict. A 404 naming a field is a group gone missing.
      if (err.status === 404 && err.field === undefined) return undefined;
      return `the manager refused the groups of ${where}: ${err.message}`;
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

  /**
   * One Warning event per change of a policy's problems (and a log line); none when it is fine.
   * Remembered only once sent: an event that failed is sent again on the next run.
   */
  private async report(policy: MultiNetworkPolicy, problems: string[]): Promise<void> {
    const uid = policy.metadata.uid ?? keyOf(policy);
    const text = [...new Set(problems)].join("; ");
    if ((this.reported.get(uid) ?? "") === text) return;
    if (text !== "") {
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
    this.reported.set(uid, text);
  }
}

/** The port names the policy's group. */
function select(plan: Plan, port: Port, name: string, types: Directions, policy: string): void {
  const k = portKey(port);
  let s = plan.selected.get(k);
  if (!s) plan.selected.set(k, s = { port, groups: new Map(), by: new Set() });
  s.groups.set(name, types);
  s.by.add(policy);
}

/** A policy group that does not exist and could not be made: no port names it. */
function unselect(name: string, selected: Map<string, Selected>): void {
  for (const [k, s] of selected) {
    if (s.groups.delete(name) && s.groups.size === 0) selected.delete(k);
  }
}

function keyOf(p: MultiNetworkPolicy): string {
  return `${p.metadata.namespace}/${p.metadata.name}`;
}

function portName(p: Port): string {
  return `port ${p.id} (${p.pod?.namespace}/${p.pod?.name} ${p.interface})`;
}

function portKey(p: Port): string {
  return `${p.networkId}/${p.id}`;
}
