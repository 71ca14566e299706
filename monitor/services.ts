/**
 * Kubernetes Services on a Knitter network (issue 28; manager/README.md, "Services"): a Service
 * annotated `k8s.v1.cni.cncf.io/service-network: <network>` (the multus-service convention) gets a
 * service of its namespace's tenant at the manager, of the same name, on that network: a VIP from
 * the network's pool, the Service's TCP and UDP ports, and as backends the ports on that network of
 * the pods its EndpointSlices list as ready. The manager's service follows the Service and its
 * slices (PUT), and goes when the annotation or the Service goes. The name is the link: a manager
 * service of that name on another network is replaced (the Service is what asks for it).
 *
 * The Service's `ipFamilyPolicy` is carried (a dual-stack network's service then has both VIPs);
 * its `ipFamilies` are not: the API server fills them from the cluster's service CIDRs, which say
 * nothing of the Knitter network's families. A policy change replaces the service (new VIPs).
 */
import {
  type IpFamilyPolicy,
  type ManagerClient,
  ManagerError,
  type Port,
  type ServicePort,
} from "@knitter/common";
import type { Logger } from "@knitter/common";
import { managerRecord, tenantPath } from "./resources.ts";
import { Requeue } from "./work_queue.ts";

export const SERVICE_NETWORK_ANNOTATION = "k8s.v1.cni.cncf.io/service-network";
/** The label an EndpointSlice names its Service with. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

interface Meta {
  name?: string;
  namespace?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

/** What the kind reads of a core/v1 Service. */
export interface KubeService {
  metadata?: Meta;
  spec?: {
    ports?: { protocol?: string; port: number; targetPort?: number | string }[];
    sessionAffinity?: string;
    ipFamilyPolicy?: string;
  };
}

/** What the kind reads of a discovery.k8s.io/v1 EndpointSlice. */
export interface EndpointSlice {
  metadata?: Meta;
  endpoints?: {
    conditions?: { ready?: boolean };
    targetRef?: { kind?: string; name?: string; namespace?: string };
  }[];
}

/** What the manager's service looks like, as far as the kind compares it. */
interface ManagerService {
  network: string;
  ports: ServicePort[];
  backends: string[];
  sessionAffinity: "None" | "ClientIP";
  ipFamilyPolicy?: IpFamilyPolicy;
}

const POLICIES: readonly IpFamilyPolicy[] = ["SingleStack", "PreferDualStack", "RequireDualStack"];

/** The Service's ipFamilyPolicy the manager takes (absent or unknown: SingleStack). */
export function familyPolicy(s: KubeService): IpFamilyPolicy {
  const p = s.spec?.ipFamilyPolicy as IpFamilyPolicy | undefined;
  return p !== undefined && POLICIES.includes(p) ? p : "SingleStack";
}

export interface ServiceSources {
  service(namespace: string, name: string): KubeService | undefined;
  slices(): Iterable<EndpointSlice>;
  ports: {
    notReady(): string | undefined;
    forPodName(namespace: string, name: string): Port[];
  };
}

/** The Service's ports the manager takes: TCP and UDP, a numeric target port (or the port). */
export function servicePorts(s: KubeService): ServicePort[] {
  return (s.spec?.ports ?? []).flatMap((p) => {
    const protocol = (p.protocol ?? "TCP").toUpperCase();
    if (protocol !== "TCP" && protocol !== "UDP") return [];
    const targetPort = typeof p.targetPort === "number" ? p.targetPort : p.port;
    return [{ protocol: protocol as "TCP" | "UDP", port: p.port, targetPort }];
  });
}

/** The port IDs on `network` of the pods the Service's slices list as ready, sorted. */
export function readyBackends(
  namespace: string,
  name: string,
  network: string,
  src: Pick<ServiceSources, "slices" | "ports">,
): string[] {
  const ids = new Set<string>();
  for (const slice of src.slices()) {
    const m = slice.metadata;
    if (m?.namespace !== namespace || m.labels?.[SERVICE_NAME_LABEL] !== name) continue;
    for (const e of slice.endpoints ?? []) {
      const pod = e.targetRef;
      if (e.conditions?.ready === false || pod?.kind !== "Pod" || !pod.name) continue;
      for (const p of src.ports.forPodName(pod.namespace ?? namespace, pod.name)) {
        if (p.network === network && p.tenant === namespace) ids.add(p.id);
      }
    }
  }
  return [...ids].sort();
}

const same = (a: ManagerService, b: ManagerService) =>
  a.network === b.network && a.sessionAffinity === b.sessionAffinity &&
  JSON.stringify(a.ports) === JSON.stringify(b.ports) &&
  JSON.stringify([...a.backends].sort()) === JSON.stringify(b.backends);

/**
 * Makes the manager's service of `namespace/name` what the Service asks (or nothing). A refusal of
 * the manager (a network of another tenant, a full pool) is logged and tried again later.
 */
export async function reconcileService(
  key: string,
  ctx: { manager: ManagerClient; src: ServiceSources; retryMs: number; log: Logger },
): Promise<void> {
  const [namespace, name] = key.split("/") as [string, string];
  const { manager, src, log } = ctx;
  const svc = src.service(namespace, name);
  const network = svc?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  const path = tenantPath("services", namespace, name);
  const have = await managerRecord<ManagerService>(manager, path);
  if (!svc || !network) {
    if (have) {
      await manager.request("DELETE", path);
      log.info("service deleted", { service: key });
    }
    return;
  }
  const behind = src.ports.notReady();
  if (behind) throw new Requeue(ctx.retryMs);
  const want: ManagerService = {
    network,
    ports: servicePorts(svc),
    backends: readyBackends(namespace, name, network, src),
    sessionAffinity: svc.spec?.sessionAffinity === "ClientIP" ? "ClientIP" : "None",
  };
  const ipFamilyPolicy = familyPolicy(svc);
  const kept = have?.network === network &&
    (have.ipFamilyPolicy ?? "SingleStack") === ipFamilyPolicy;
  if (kept && same(have, want)) return;
  const { network: _, ...body } = want;
  try {
    if (kept) {
      await manager.request("PUT", path, body);
      log.info("service updated", { service: key, backends: want.backends.length });
      return;
    }
    if (have) await manager.request("DELETE", path);
    await manager.request("POST", tenantPath("services", namespace), {
      name,
      network,
      ipFamilyPolicy,
      ...body,
    });
    log.info("service created", { service: key, network, backends: want.backends.length });
  } catch (err) {
    if (!(err instanceof ManagerError) || err.status >= 500) throw err;
    log.warn("the manager refused the service", { service: key, error: err.message });
    throw new Requeue(ctx.retryMs * 10);
  }
}
