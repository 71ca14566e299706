/**
 * Mirror resources into the manager's port mirrors (manager/README.md, "Port mirrors"). The spec
 * names pods of its own namespace (a pod's port on a network or interface) or Knitter ports by ID;
 * the kind resolves pods to their ports from the manager's port feed (port_index.ts), and the
 * manager checks that every port is the namespace's tenant's. The manager has no update of a
 * mirror: one whose ports, direction or collector change (a pod recreated with a new port) is
 * deleted and made again. A remote collector is an admin's: refused in the status unless the
 * namespace is one of the config's remoteMirrorNamespaces (and then the manager allows it to an
 * admin token only).
 */
import {
  isRemoteCollector,
  type MirrorFilterRule,
  type MirrorInfo,
  type MirrorPort,
  type Port,
} from "@knitter/common";
import type { CrKind } from "./cr_reconciler.ts";
import {
  type MirrorEndpoint,
  type MirrorPortStatus,
  type MirrorResource,
  type MirrorStatus,
  PLURAL,
  type RemoteSpec,
} from "./crd_types.ts";
import { managerRecord, Refusal, tenantPath } from "./resources.ts";

/** What the kind reads of the manager's ports, as the monitor's port feed has them. */
export interface MirrorPorts {
  /** Why the ports in memory may not be acted on yet; undefined: they may. */
  notReady(): string | undefined;
  /** The ports bound to the pod of this name. */
  forPodName(namespace: string, name: string): Port[];
  /** A port by its network's ID and its own. */
  get(networkId: string, id: string): Port | undefined;
}

type Remote = { remote: RemoteSpec };

/** The manager's request of a resource, its ports resolved (what is compared with the record). */
interface Wanted {
  sources: MirrorPortStatus[];
  direction: "in" | "out" | "both";
  filter?: MirrorFilterRule[];
  collector: MirrorPortStatus | Remote;
}

/** The Mirror kind (cr_reconciler.ts): `remoteNamespaces` may ask for a remote collector. */
export function mirrorKind(
  remoteNamespaces: string[],
  ports: MirrorPorts,
): CrKind<MirrorResource, MirrorInfo> {
  return {
    plural: PLURAL.mirror,
    what: "mirror",
    async find(cr, { manager }) {
      const mirror = await managerRecord<MirrorInfo>(manager, path(cr));
      if (!mirror || ours(cr, mirror) || same(mirror, wanted(cr, ports))) return mirror;
      throw new Refusal(
        "NotOwned",
        `mirror "${mirror.name}" of tenant "${mirror.tenant}" (made ${mirror.createdAt}) was not made by this Mirror and asks something else: it is left alone; rename this Mirror, or have its owner delete that one`,
      );
    },
    async release(cr, { manager, log }) {
      const mirror = await managerRecord<MirrorInfo>(manager, path(cr));
      if (!mirror) return false;
      if (!ours(cr, mirror)) {
        log.warn("mirror not made by the resource left alone", { mirror: path(cr) });
        return false;
      }
      await manager.request("DELETE", path(cr));
      return true;
    },
    refuse: (cr) => refuseRemote(cr, remoteNamespaces),
    async create(cr, { manager, log }) {
      const mirror = await manager.request<MirrorInfo>(
        "POST",
        base(cr),
        body(cr, wanted(cr, ports)),
      );
      log.info("mirror created", { mirror: `${cr.metadata.namespace}/${cr.metadata.name}` });
      return mirror;
    },
    async update(cr, have, { manager, log }) {
      const want = wanted(cr, ports);
      if (same(have, want)) return { record: have };
      // No PUT at the manager: the old mirror goes, then the new one is made (a refusal of the new
      // one leaves none, and the status says why).
      await manager.request("DELETE", path(cr));
      const mirror = await manager.request<MirrorInfo>("POST", base(cr), body(cr, want));
      log.info("mirror replaced", { mirror: `${cr.metadata.namespace}/${cr.metadata.name}` });
      return { record: mirror };
    },
    fields: (cr, mirror) => ({ ...fields(cr, mirror, ports) }),
    ready,
  };
}

/** Whether the resource names this pod (queued again when the pod's ports change). */
export function namesPod(cr: MirrorResource, namespace: string, pod: string): boolean {
  if (cr.metadata.namespace !== namespace) return false;
  return [...cr.spec.sources, cr.spec.collector].some((e) => e.pod === pod);
}

/** Copies sent to an address leave the tenant's networks: an admin's choice of namespaces. */
function refuseRemote(cr: MirrorResource, allowed: string[]): void {
  const { namespace } = cr.metadata;
  if (cr.spec.collector?.remote === undefined || allowed.includes(namespace)) return;
  throw new Refusal(
    "RemoteCollectorNotAllowed",
    `collector.remote: namespace "${namespace}" may not send mirrored copies to a remote address (they leave its networks; an admin allows it with the monitor's remoteMirrorNamespaces): collect in a pod of this namespace instead (collector: { pod, interface })`,
  );
}

const base = (cr: MirrorResource) => tenantPath("mirrors", cr.metadata.namespace);
const path = (cr: MirrorResource) => tenantPath("mirrors", cr.metadata.namespace, cr.metadata.name);

/**
 * Whether the manager's mirror is the one this resource made (its status keeps its creation time):
 * a mirror of the same name made over REST (an admin's interception) is never replaced or deleted.
 */
function ours(cr: MirrorResource, mirror: MirrorInfo): boolean {
  return cr.status?.createdAt === mirror.createdAt;
}

function body(cr: MirrorResource, want: Wanted): Record<string, unknown> {
  const ref = (p: MirrorPortStatus) => ({ network: p.network, port: p.port });
  const { collector } = want;
  return {
    name: cr.metadata.name,
    sources: want.sources.map(ref),
    direction: want.direction,
    ...(want.filter ? { filter: want.filter } : {}),
    collector: "remote" in collector ? collector : ref(collector),
  };
}

/** The spec with its pods resolved to their ports; a pod with no port (yet): a Refusal. */
function wanted(cr: MirrorResource, ports: MirrorPorts): Wanted {
  const behind = ports.notReady();
  // Not a refusal: the queue's backoff tries again once the manager's ports are known.
  if (behind) throw new Error(`the manager's ports are not known yet: ${behind}`);
  const { namespace } = cr.metadata;
  return {
    sources: cr.spec.sources.map((e, i) => resolve(namespace, e, `sources[${i}]`, ports)),
    direction: cr.spec.direction ?? "both",
    ...(cr.spec.filter ? { filter: cr.spec.filter } : {}),
    collector: cr.spec.collector.remote
      ? { remote: remoteOf(cr.spec.collector.remote) }
      : resolve(namespace, cr.spec.collector, "collector", ports),
  };
}

/** The spec's remote collector in the manager's order of fields (compared with its record). */
function remoteOf({ ip, protocol, session, vni }: RemoteSpec): RemoteSpec {
  return {
    ip,
    protocol,
    ...(session === undefined ? {} : { session }),
    ...(vni === undefined ? {} : { vni }),
  };
}

/** One end: a port by ID as named, or the one port of a pod of the namespace the spec picks. */
function resolve(
  namespace: string,
  e: MirrorEndpoint,
  field: string,
  ports: MirrorPorts,
): MirrorPortStatus {
  if (e.port !== undefined) {
    if (e.network === undefined) {
      throw new Refusal("InvalidSpec", `${field}: a port is named with its network`);
    }
    return { network: e.network, port: e.port };
  }
  if (e.pod === undefined) {
    throw new Refusal("InvalidSpec", `${field}: name a pod (pod) or a Knitter port (port)`);
  }
  if (e.pod.includes("/")) {
    throw new Refusal(
      "OtherNamespace",
      `${field}: pod "${e.pod}" is not a pod name of namespace "${namespace}": a Mirror names the pods of its own namespace only, it never copies another tenant's traffic`,
    );
  }
  const found = ports.forPodName(namespace, e.pod).filter((p) => picked(p, e));
  const which = [
    e.network !== undefined ? ` on network "${e.network}"` : "",
    e.interface !== undefined ? ` with interface "${e.interface}"` : "",
  ].join("");
  if (found.length === 0) {
    throw new Refusal(
      "PortNotFound",
      `${field}: pod "${namespace}/${e.pod}" has no Knitter port${which}: the mirror is made once it has (is the pod running and attached to that network?)`,
    );
  }
  if (found.length > 1) {
    const list = found.map((p) => `${p.interface ?? p.id} on ${p.network}`).join(", ");
    throw new Refusal(
      "AmbiguousPod",
      `${field}: pod "${namespace}/${e.pod}" has ${found.length} Knitter ports${which} (${list}): name one with interface or network`,
    );
  }
  const [p] = found;
  return {
    network: p.network,
    port: p.id,
    pod: e.pod,
    ...(p.interface !== undefined ? { interface: p.interface } : {}),
  };
}

function picked(p: Port, e: MirrorEndpoint): boolean {
  return (e.network === undefined || p.network === e.network) &&
    (e.interface === undefined || p.interface === e.interface);
}

/** Whether the manager's mirror is what the spec asks now. */
function same(have: MirrorInfo, want: Wanted): boolean {
  const key = (p: MirrorPortStatus | Remote) =>
    "remote" in p ? JSON.stringify(p) : `${p.network}/${p.port}`;
  const haveKey = (p: MirrorInfo["collector"]) =>
    isRemoteCollector(p) ? JSON.stringify(p) : `${p.network}/${p.id}`;
  return have.direction === want.direction && filterKey(have.filter) === filterKey(want.filter) &&
    haveKey(have.collector) === key(want.collector) &&
    have.sources.map(haveKey).join(" ") === want.sources.map(key).join(" ");
}

/** A filter as the manager keeps it (a range "80-80" is "80"), to compare a spec with a record. */
const filterKey = (rules: MirrorFilterRule[] | undefined) =>
  JSON.stringify(
    rules?.map((r) => {
      const [a, b = a] = r.ports?.split("-").map(Number) ?? [];
      const ports = a === undefined ? undefined : a === b ? String(a) : `${a}-${b}`;
      return [r.protocol, ports, r.remote];
    }),
  );

/** The mirror's ports, with the pods and interfaces they are; none now: the last status's. */
function fields(
  cr: MirrorResource,
  mirror: MirrorInfo | undefined,
  ports: MirrorPorts,
): MirrorStatus {
  if (!mirror) {
    const { sources, collector, createdAt } = cr.status ?? {};
    return {
      ...(sources ? { sources } : {}),
      ...(collector ? { collector } : {}),
      ...(createdAt ? { createdAt } : {}),
    };
  }
  const { namespace } = cr.metadata;
  const show = (p: MirrorPort) => portStatus(namespace, p, ports);
  const { collector } = mirror;
  return {
    sources: mirror.sources.map(show),
    collector: isRemoteCollector(collector) ? collector : show(collector),
    createdAt: mirror.createdAt,
  };
}

/** A port of the mirror as the status shows it: with its pod and interface when the feed has it. */
function portStatus(namespace: string, p: MirrorPort, ports: MirrorPorts): MirrorPortStatus {
  const port = ports.get(p.networkId, p.id);
  const pod = port?.pod?.namespace === namespace ? port.pod.name : undefined;
  return {
    network: p.network,
    port: p.id,
    ...(pod !== undefined ? { pod } : {}),
    ...(pod !== undefined && port?.interface !== undefined ? { interface: port.interface } : {}),
  };
}

function ready(mirror: MirrorInfo): string {
  const to = isRemoteCollector(mirror.collector)
    ? `${mirror.collector.remote.ip} over ${mirror.collector.remote.protocol.toUpperCase()}`
    : `port ${mirror.collector.id} on ${mirror.collector.network}`;
  return `mirror ${mirror.tenant}/${mirror.name} copies ${mirror.direction} traffic of ${mirror.sources.length} port(s) to ${to}`;
}
