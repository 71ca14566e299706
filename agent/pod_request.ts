/**
 * What a CNI request asks for: which networks, on which interfaces, with which fixed addresses,
 * for which tenant and pod. Without Kubernetes this comes from the network config, its
 * runtimeConfig and CNI_ARGS; nothing asked means one interface on the default network.
 */
import type { PodRef } from "@knitter/common";
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

const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

export function podRequest(
  req: CniRequest,
  defaults: { tenant: string; network?: string },
): PodRequest {
  const args = req.args ?? {};
  const config = req.config ?? {};
  const tenant = str(config.tenant) ?? args.K8S_POD_NAMESPACE ?? defaults.tenant;
  const pod = args.K8S_POD_NAMESPACE && args.K8S_POD_NAME
    ? {
      namespace: args.K8S_POD_NAMESPACE,
      name: args.K8S_POD_NAME,
      ...(args.K8S_POD_UID ? { uid: args.K8S_POD_UID } : {}),
    }
    : undefined;

  let wanted = fromArgs(args.KNITTER_NETWORKS) ?? fromConfig(config.networks);
  if (!wanted || wanted.length === 0) {
    const network = str(config.network) ?? defaults.network;
    if (!network) {
      throw new CniError(
        CNI_CODE.invalidConfig,
        'No network requested and no default: set "networks" in the network config, KNITTER_NETWORKS in CNI_ARGS, or the agent\'s defaultNetwork',
      );
    }
    wanted = [{ network }];
  }

  const rc = config.runtimeConfig ?? {};
  const names = new Set<string>();
  let extra = 0;
  const interfaces = wanted.map((w, i): WantedInterface => {
    const ifName = w.ifName ?? (i === 0 ? req.ifName : `net${++extra}`);
    if (!IFNAME.test(ifName)) {
      throw new CniError(
        CNI_CODE.invalidConfig,
        `Interface name "${ifName}" is not a valid Linux interface name (1-15 of A-Z a-z 0-9 _ . -)`,
      );
    }
    if (names.has(ifName)) {
      throw new CniError(CNI_CODE.invalidConfig, `Interface "${ifName}" is requested twice`);
    }
    names.add(ifName);
    const out: WantedInterface = {
      network: w.network,
      ifName,
      defaultRoute: w.defaultRoute ?? false,
    };
    // runtimeConfig capabilities apply to the primary interface.
    const ip = w.ip ?? (i === 0 ? firstIp(rc.ips) : undefined);
    if (ip) out.ip = ip;
    const mac = w.mac ?? (i === 0 && typeof rc.mac === "string" ? rc.mac.toLowerCase() : undefined);
    if (mac) out.mac = mac;
    if (w.ipGroup) out.ipGroup = w.ipGroup;
    return out;
  });
  if (!interfaces.some((i) => i.defaultRoute)) interfaces[0].defaultRoute = true;
  if (interfaces.filter((i) => i.defaultRoute).length > 1) {
    throw new CniError(
      CNI_CODE.invalidConfig,
      "More than one interface asks for the default route",
    );
  }
  return { tenant, pod, owner: pod?.uid ?? req.containerId, interfaces };
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
