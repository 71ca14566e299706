/**
 * Network resources into the manager's networks, and back into their status. The spec creates the
 * network, marked as the resource's (labels); later edits of what can change (description, MTU,
 * routes, DNS, bandwidth, DSCP, egress, hostAccess) are applied, edits of what cannot (type, CIDR, gateway, pools, excludes, public,
 * physnet, segment) are refused in the Ready condition, naming each field. A network of the same
 * name the resource did not make (through the REST API) is never adopted: the condition says so,
 * and deleting the resource leaves it alone. Deleting the resource marks its network as being
 * deleted (it takes no new ports) and deletes it once no port or IP group uses it; until then the
 * condition says what holds it.
 */
import { type ManagerClient, type NetworkDelegate, type Port, stablePodOf } from "@knitter/common";
import { NETWORK_IMMUTABLE_FIELDS, NETWORK_MUTABLE_FIELDS } from "@knitter/common";
import { formatCidr, networkOf, normalizeIp, parseIpPrefix } from "@knitter/common/address";
import type { CrKind } from "./cr_reconciler.ts";
import type { HeldAddress, NetworkResource, NetworkSpec, NetworkStatus } from "./crd_types.ts";
import { PLURAL } from "./crd_types.ts";
import { managerRecord, type Problem, Refusal, tenantPath } from "./resources.ts";

/** The label that marks a manager network as made by a Network resource: "namespace/name". */
export const OWNER_LABEL = "knitter.io/network-resource";
/** The label of every manager network the monitor made. */
export const MANAGED_BY = { "app.kubernetes.io/managed-by": "knitter-monitor" };

/** The manager's network, as GET answers it. */
export interface ManagerNetwork extends Required<Pick<NetworkSpec, "cidr" | "type">> {
  id: string;
  tenant: string;
  name: string;
  gateway?: string;
  cidr6?: string;
  gateway6?: string;
  allocationPools: { start: string; end: string }[];
  excludes: string[];
  public: boolean;
  egress: boolean;
  hostAccess: boolean;
  physnet?: string;
  segmentId?: number;
  mtu: number;
  routes: unknown[];
  dns: unknown;
  bandwidth?: unknown;
  dscp?: number;
  delegate?: NetworkDelegate;
  description?: string;
  labels?: Record<string, string>;
  deletingSince?: string;
  usage: { total: number; used: number; free: number };
}

const MUTABLE = NETWORK_MUTABLE_FIELDS;
const IMMUTABLE = NETWORK_IMMUTABLE_FIELDS;

export interface NetworkSettings {
  publicNamespaces: string[];
  /** Where `egress` and `hostAccess` may be asked for (the admin's namespaces). */
  nodeReachNamespaces: string[];
  /** Where `type: flat` and `segmentId` may be asked for (the admin's namespaces). */
  segmentNamespaces: string[];
  /** How long a stable address waits for its StatefulSet pod's return. */
  stableRetentionMs: number;
}

/** What the reconciler reads of the monitor's memory for a network's held stable addresses. */
export interface HeldSource {
  /** Stable ports with no pod. */
  heldStable(): Port[];
  /** Whether a pod of that name exists (then it takes the address back at its next start). */
  podExists(namespace: string, name: string): boolean;
}

/** The Network kind (cr_reconciler.ts), with the settings and memory it reads. */
export function networkKind(
  settings: NetworkSettings,
  held: HeldSource,
): CrKind<NetworkResource, ManagerNetwork> {
  return {
    plural: PLURAL.network,
    what: "network",
    refuse: (cr) => refuseAdminChoices(settings, cr.metadata.namespace, cr.spec),
    async find(cr, { manager }) {
      const found = await findNetwork(manager, cr.metadata.namespace, cr.metadata.name);
      if (found && !ownedBy(found, cr)) throw new Refusal("NotOwned", notOwnedMessage(found));
      return found;
    },
    async create(cr, { manager, log }) {
      const { namespace, name } = cr.metadata;
      const net = await manager.request<ManagerNetwork>("POST", base(namespace), {
        name,
        ...cr.spec,
        labels: { ...MANAGED_BY, [OWNER_LABEL]: `${namespace}/${name}` },
      });
      log.info("network created", { network: `${namespace}/${name}`, id: net.id });
      return net;
    },
    async update(cr, net, { manager, log }) {
      const { namespace, name } = cr.metadata;
      const changes = mutableChanges(cr.spec, net);
      if (Object.keys(changes).length > 0) {
        net = await manager.request<ManagerNetwork>("PATCH", path(namespace, name), changes);
        log.info("network updated", { network: `${namespace}/${name}`, changes });
      }
      return { record: net, problem: immutableProblem(cr.spec, net) };
    },
    /**
     * Only a network the resource made: it takes no new ports from now on, and goes once nothing
     * uses it.
     */
    async release(cr, { manager }) {
      const { namespace, name } = cr.metadata;
      const net = await findNetwork(manager, namespace, name);
      if (!net || !ownedBy(net, cr)) return false;
      if (!net.deletingSince) {
        await manager.request("PATCH", path(namespace, name), { deleting: true });
      }
      await manager.request("DELETE", path(namespace, name));
      return true;
    },
    refusedRelease: (problem) =>
      problem.reason === "InUse"
        ? {
          ...problem,
          message:
            `${problem.message}; meanwhile it takes no new ports (new pods on it fail to start)`,
        }
        : problem,
    fields(cr, net) {
      const status = fields(cr, net);
      if (net) {
        // Once written, the list stays (empty): a merge patch would keep a field left out.
        const list = heldAddresses(held, settings.stableRetentionMs, net.id);
        if (list.length > 0 || cr.status?.heldAddresses !== undefined) status.heldAddresses = list;
      }
      return { ...status };
    },
    ready: readyMessage,
  };
}

/** The network's stable addresses whose pod is gone: why they are kept, and until when. */
function heldAddresses(held: HeldSource, retentionMs: number, networkId: string): HeldAddress[] {
  const out: HeldAddress[] = [];
  for (const p of held.heldStable()) {
    if (p.networkId !== networkId) continue;
    const owner = stablePodOf(p.id, p.interface);
    if (!owner || held.podExists(owner.namespace, owner.name)) continue;
    const since = p.unboundAt ?? p.createdAt;
    const until = new Date(Date.parse(since) + retentionMs).toISOString();
    const pod = `${owner.namespace}/${owner.name}`;
    out.push({
      address: p.ip,
      port: p.id,
      pod,
      ...(p.interface ? { interface: p.interface } : {}),
      since,
      until,
      reason: `StatefulSet pod ${pod} was deleted; its address ${p.ip}${
        p.interface ? ` (${p.interface})` : ""
      } is kept for its return until ${until}, then released`,
    });
  }
  return out.sort((a, b) => a.port < b.port ? -1 : a.port > b.port ? 1 : 0);
}

/** The namespace's own network of that name (not a public one the name also finds). */
async function findNetwork(
  manager: ManagerClient,
  namespace: string,
  name: string,
): Promise<ManagerNetwork | undefined> {
  const net = await managerRecord<ManagerNetwork>(manager, path(namespace, name));
  return net?.tenant === namespace ? net : undefined;
}

/**
 * What only an admin decides at the manager, which trusts the monitor with it: a Network resource
 * asks for it only in the namespaces the monitor's configuration lists for it (the admin's).
 */
const ADMIN_CHOICES: {
  setting: "publicNamespaces" | "nodeReachNamespaces" | "segmentNamespaces";
  reason: string;
  asked(spec: NetworkResource["spec"]): string[];
  why: string;
}[] = [
  {
    setting: "publicNamespaces",
    reason: "PublicNotAllowed",
    asked: (spec) => spec.public ? ["public"] : [],
    why: "makes the network every namespace's to attach to",
  },
  {
    setting: "nodeReachNamespaces",
    reason: "NodeReachNotAllowed",
    asked: (spec) => (["egress", "hostAccess"] as const).filter((f) => spec[f] === true),
    why: "put the node on the network",
  },
  {
    setting: "nodeReachNamespaces",
    reason: "DelegateNotAllowed",
    asked: (spec) => spec.delegate ? ["delegate"] : [],
    why:
      "gives the network's pods the node's own interfaces (a macvlan or ipvlan master, a whole device)",
  },
  {
    setting: "segmentNamespaces",
    reason: "SegmentNotAllowed",
    asked: (spec) => [
      ...(spec.type === "flat" ? ["type: flat"] : []),
      ...(spec.segmentId !== undefined ? ["segmentId"] : []),
    ],
    why: "takes a segment every tenant shares (a physnet's untagged one, a chosen VLAN ID or VNI)",
  },
];

/** Refuses what a resource of `namespace` may not ask for; the reason goes into the condition. */
function refuseAdminChoices(
  settings: NetworkSettings,
  namespace: string,
  spec: NetworkResource["spec"],
): void {
  for (const choice of ADMIN_CHOICES) {
    const asked = choice.asked(spec);
    const allowed = settings[choice.setting];
    if (asked.length === 0 || allowed.includes(namespace)) continue;
    throw new Refusal(
      choice.reason,
      `${asked.join(" and ")} ${choice.why}, an admin's decision: only in namespaces ${
        allowed.join(", ") || "(none)"
      } (the monitor's ${choice.setting}); remove ${
        asked.join(" and ")
      }, create the Network there, or ask an admin`,
    );
  }
}

/**
 * Whether the resource made this network: it carries the resource's mark. A network made by a
 * monitor before the mark existed is recognised by the ID the resource's status recorded.
 */
function ownedBy(net: ManagerNetwork, cr: NetworkResource): boolean {
  const mark = net.labels?.[OWNER_LABEL];
  if (mark !== undefined) return mark === `${cr.metadata.namespace}/${cr.metadata.name}`;
  return cr.status?.networkId === net.id;
}

function notOwnedMessage(net: ManagerNetwork): string {
  const mark = net.labels?.[OWNER_LABEL];
  const by = mark ? `by the Network resource ${mark}` : "through the manager's API";
  return `A network "${net.name}" of tenant "${net.tenant}" exists in the manager and was not made by this resource (made ${by}, id ${net.id}); it is left as it is, and deleting this resource will not delete it. Give this resource another name, or delete that network in the manager first`;
}

const base = (namespace: string) => tenantPath("networks", namespace);
const path = (namespace: string, name: string) => tenantPath("networks", namespace, name);

function mutableChanges(spec: NetworkSpec, net: ManagerNetwork): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of MUTABLE) {
    const want = spec[f];
    if (want !== undefined && JSON.stringify(want) !== JSON.stringify(net[f])) out[f] = want;
  }
  return out;
}

/** Every immutable field the spec now asks differently, in one message. */
export function immutableProblem(spec: NetworkSpec, net: ManagerNetwork): Problem | undefined {
  const wanted: Partial<NetworkSpec> = {
    ...spec,
    type: spec.type ?? "vxlan",
    public: !!spec.public,
  };
  const changed = IMMUTABLE.filter((f) =>
    wanted[f] !== undefined && !sameField(f, wanted[f], net[f])
  );
  if (changed.length === 0) return undefined;
  const what = changed.map((f) =>
    `${f} (is ${JSON.stringify(net[f] ?? null)}, the spec asks ${JSON.stringify(wanted[f])})`
  );
  return {
    reason: "ImmutableFieldChanged",
    message: `${what.join("; ")}: ${
      changed.length > 1 ? "these fields" : "this field"
    } cannot change after creation; the other changes were applied. Put the old value back, or create a new Network and move the pods to it`,
  };
}

function sameField(field: string, want: unknown, have: unknown): boolean {
  if (field === "cidr" || field === "cidr6") {
    return normalCidr(want as string) === normalCidr(String(have));
  }
  if (field === "gateway" || field === "gateway6") {
    const [w, h] = [normalizeIp(String(want)), normalizeIp(String(have))];
    if (w !== null && h !== null) return w === h;
  }
  // An object written with its keys in another order is the same (a delegate).
  return JSON.stringify(sortedKeys(want)) === JSON.stringify(sortedKeys(have));
}

function sortedKeys(v: unknown): unknown {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return v;
  return Object.fromEntries(Object.entries(v).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0));
}

/** The network a CIDR names, host bits cleared, in canonical form; the text if it is none. */
function normalCidr(text: string): string {
  const r = parseIpPrefix(text, "required");
  return "error" in r ? text : formatCidr(networkOf(r.ip, r.prefix!));
}

/** The network's ID, segment and usage; none now: the last status's. */
function fields(cr: NetworkResource, net: ManagerNetwork | undefined): NetworkStatus {
  if (net) {
    return {
      networkId: net.id,
      ...(net.segmentId !== undefined ? { segmentId: net.segmentId } : {}),
      usage: net.usage,
    };
  }
  if (!cr.status?.networkId) return {};
  const { networkId, segmentId, usage } = cr.status;
  return { networkId, segmentId, usage };
}

function readyMessage(net: ManagerNetwork): string {
  const segment = net.segmentId === undefined
    ? ""
    : net.type === "vxlan"
    ? `, VNI ${net.segmentId}`
    : `, VLAN ${net.segmentId}`;
  return `network ${net.tenant}/${net.name} (${net.type}${segment}, ${net.cidr}) is in the manager`;
}
