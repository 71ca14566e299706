/**
 * What a CNI request asks for: which networks, on which interfaces, with which fixed addresses,
 * for which tenant and pod. Under Kubernetes this comes from the pod's annotations (read by the
 * agent through the API, see kube_pods.ts); without, from the network config, its runtimeConfig
 * and CNI_ARGS. Nothing asked means one interface on the default network.
 */
import {
  AnnotationError,
  parsePodAnnotations,
  type PodRef,
  resolveAnnotated,
  settle,
  STABLE_ADDRESS,
  STABLE_PREFIX,
} from "@knitter/common";
import type { CniRequest } from "@knitter/plugin";
import { CNI_CODE, CniError } from "./cni_errors.ts";

export type { CniRequest };

export interface WantedInterface {
  network: string;
  ifName: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute: boolean;
}

export interface PodRequest {
  tenant: string;
  pod?: PodRef;
  /** Stable part of the port IDs: the pod's UID when known, else the container ID. */
  owner: string;
  interfaces: WantedInterface[];
}

/** What the agent read of the pod through the Kubernetes API (Kubernetes mode only). */
export interface KubePod {
  uid: string;
  annotations: Record<string, string>;
  /** Kinds of the pod's controllers (ownerReferences), e.g. ["StatefulSet"]. */
  ownerKinds: string[];
}

/** A CNI request as the agent handles it: in Kubernetes mode with the pod it read. */
export type AgentRequest = CniRequest & { kubePod?: KubePod };

export function podRequest(
  req: AgentRequest,
  defaults: { tenant: string; network?: string },
): PodRequest {
  const args = req.args ?? {};
  const config = req.config ?? {};
  const tenant = str(config.tenant) ?? args.K8S_POD_NAMESPACE ?? defaults.tenant;
  const uid = req.kubePod?.uid ?? args.K8S_POD_UID;
  const pod = args.K8S_POD_NAMESPACE && args.K8S_POD_NAME
    ? { namespace: args.K8S_POD_NAMESPACE, name: args.K8S_POD_NAME, ...(uid ? { uid } : {}) }
    : undefined;
  const fromPod = req.kubePod ? fromAnnotations(req, req.kubePod, defaults.network) : undefined;
  const interfaces = fromPod ?? fromCni(req, defaults.network);
  const owner = pod && req.kubePod && isStable(req.kubePod, interfaces)
    ? `${STABLE_PREFIX}${pod.namespace}:${pod.name}`
    : uid ?? req.containerId;
  return { tenant, pod, owner, interfaces };
}

/**
 * A StatefulSet pod keeps its addresses when recreated under the same name if it asks for it or
 * takes them from an IP group: its port IDs then derive from its name, not its UID.
 */
function isStable(pod: KubePod, interfaces: WantedInterface[]): boolean {
  if (!pod.ownerKinds.includes("StatefulSet")) return false;
  return pod.annotations[STABLE_ADDRESS] === "true" || interfaces.some((i) => i.ipGroup);
}

function fromAnnotations(
  req: CniRequest,
  pod: KubePod,
  defaultNetwork: string | undefined,
): WantedInterface[] | undefined {
  try {
    const asked = parsePodAnnotations(pod.annotations);
    if (!asked) return undefined;
    return resolveAnnotated(asked, { primaryIfName: req.ifName, defaultNetwork });
  } catch (err) {
    if (err instanceof AnnotationError) {
      throw new CniError(CNI_CODE.invalidConfig, `Pod ${podName(req)}: ${err.message}`);
    }
    throw err;
  }
}

function podName(req: CniRequest): string {
  return `${req.args?.K8S_POD_NAMESPACE}/${req.args?.K8S_POD_NAME}`;
}

function fromCni(req: CniRequest, defaultNetwork: string | undefined): WantedInterface[] {
  const args = req.args ?? {};
  const config = req.config ?? {};
  let wanted = fromArgs(args.KNITTER_NETWORKS) ?? fromConfig(config.networks);
  if (!wanted || wanted.length === 0) {
    const network = str(config.network) ?? defaultNetwork;
    if (!network) {
      throw new CniError(
        CNI_CODE.invalidConfig,
        'No network requested and no default: set "networks" in the network config, KNITTER_NETWORKS in CNI_ARGS, or the agent\'s defaultNetwork',
      );
    }
    wanted = [{ network }];
  }
  // runtimeConfig capabilities apply to the primary interface.
  const rc = config.runtimeConfig ?? {};
  const first = wanted[0];
  wanted[0] = {
    ...first,
    ip: first.ip ?? firstIp(rc.ips),
    mac: first.mac ?? (typeof rc.mac === "string" ? rc.mac.toLowerCase() : undefined),
  };
  return settle(
    wanted,
    req.ifName,
    (message) => new CniError(CNI_CODE.invalidConfig, capitalize(message)),
  );
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

interface Wanted {
  network: string;
  ifName?: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute?: boolean;
}

/** KNITTER_NETWORKS=control@eth1,data (network[@interface], comma separated). */
function fromArgs(text: string | undefined): Wanted[] | undefined {
  if (!text) return undefined;
  return text.split(",").map((part) => part.trim()).filter(Boolean).map((part) => {
    const [network, ifName] = part.split("@");
    return ifName ? { network, ifName } : { network };
  });
}

function fromConfig(list: unknown): Wanted[] | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) {
    throw new CniError(CNI_CODE.invalidConfig, '"networks" in the network config must be a list');
  }
  return list.map((item, i) => {
    if (typeof item === "string") return { network: item };
    if (item && typeof item === "object" && typeof item.name === "string") {
      return {
        network: item.name,
        ifName: str(item.interface),
        ip: str(item.ip),
        ipGroup: str(item.ipGroup),
        mac: str(item.mac)?.toLowerCase(),
        defaultRoute: item.defaultRoute === true,
      };
    }
    throw new CniError(
      CNI_CODE.invalidConfig,
      `networks[${i}] must be a network name or an object with "name" (and optional interface, ip, ipGroup, mac, defaultRoute)`,
    );
  });
}

function firstIp(ips: unknown): string | undefined {
  if (!Array.isArray(ips) || ips.length === 0) return undefined;
  const first = String(ips[0]);
  return first.includes("/") ? first.slice(0, first.indexOf("/")) : first;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** The manager's port ID for one interface of a pod. */
export function portIdFor(owner: string, ifName: string): string {
  return `${owner}-${ifName}`.replace(/[^A-Za-z0-9._:-]/g, "_").slice(0, 200);
}
