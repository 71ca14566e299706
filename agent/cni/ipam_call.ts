/**
 * Knitter as a CNI IPAM plugin: `"ipam": {"type": "knitter", "network": "data"}` inside another
 * plugin's config (macvlan, ipvlan, host-device, sriov). That plugin makes the interface and execs
 * the `knitter` binary for its addresses with the same CNI_* variables and its whole config on
 * stdin; the forwarder brings the call here like any other. The agent then asks the manager for the
 * port of that container and interface, as for a port of its own, and answers the addresses,
 * routes and DNS only: no veth, no switch port, no flows (the other plugin's data plane carries it).
 */
import { type Port, portAddresses } from "@knitter/common";
import { type CniResult, LATEST_CNI_VERSION } from "@knitter/plugin/contract";
import type { CniRequest, KnitterNetConf } from "@knitter/plugin/protocol";
import { invalidConfig } from "./cni_errors.ts";
import { podRoutes } from "./cni_result.ts";
import { type AgentRequest, type PodRequest, podRequest } from "./pod_request.ts";

/** The `type` of our plugin: the binary's name in the CNI bin dir. */
export const KNITTER_TYPE = "knitter";

/** The keys of the `ipam` section knitter reads. */
export interface IpamSection {
  /** The manager's network the address comes from (in the tenant, else a public one). */
  network: string;
  /** The tenant; absent: the config's `tenant`, else the pod's namespace, else the agent's. */
  tenant?: string;
  /** A fixed address (as "networks[].ip" of a knitter config); CNI_ARGS IP= and the ips capability too. */
  ip?: string;
  ipGroup?: string;
  /** A claim of the tenant on the network: its address (manager/README.md, "Claims"). */
  claim?: string;
  /** Routes through the network's gateway as the default route (IPv4, and IPv6 on dual stack). */
  defaultRoute?: boolean;
}

const EXAMPLE = '"ipam": {"type": "knitter", "network": "data"}';

/**
 * Whether a call is an IPAM call: the forwarder was run for another plugin's config (macvlan's, not
 * knitter's), so as the IPAM its `ipam.type` names, whatever name knitter is installed under (a
 * runtime's own bin dir may call it `knitter-...`). A config of type knitter is knitter's own
 * interface: an `ipam` in it is not read.
 */
export function isIpamCall(config: KnitterNetConf): boolean {
  const ipam = config.ipam as { type?: unknown } | undefined;
  return config.type !== KNITTER_TYPE && typeof ipam === "object" && ipam !== null &&
    typeof ipam.type === "string" && ipam.type !== config.type;
}

/** The checked `ipam` section of an IPAM call's config; code 7 saying what is wrong. */
export function ipamSection(config: KnitterNetConf): IpamSection {
  const ipam = config.ipam as Record<string, unknown>;
  const text = (key: string): string | undefined => {
    const v = ipam[key];
    if (v === undefined) return undefined;
    if (typeof v === "string" && v !== "") return v;
    throw invalidConfig(`ipam.${key} must be a non-empty string`, `got ${JSON.stringify(v)}`);
  };
  const network = text("network");
  if (network === undefined) {
    throw invalidConfig(
      "ipam.network is missing: the knitter IPAM gives addresses of a network of the manager",
      `e.g. ${EXAMPLE}`,
    );
  }
  const defaultRoute = ipam.defaultRoute;
  if (defaultRoute !== undefined && typeof defaultRoute !== "boolean") {
    throw invalidConfig("ipam.defaultRoute must be true or false", `got ${defaultRoute}`);
  }
  const out: IpamSection = { network };
  for (const key of ["tenant", "ip", "ipGroup", "claim"] as const) {
    const v = text(key);
    if (v !== undefined) out[key] = v;
  }
  if (defaultRoute === true) out.defaultRoute = true;
  return out;
}

/**
 * What an IPAM call asks for: the port of one interface (CNI_IFNAME) on `ipam.network`, read as a
 * knitter config's `networks` entry is (pod_request.ts: tenant, fixed address from the section, IP=
 * or the ips capability, owner and port ID). The default route only when the section asks for it:
 * the calling plugin's interface is rarely the pod's first.
 */
export function ipamPodRequest(
  req: AgentRequest,
  defaults: { tenant: string; network?: string },
): PodRequest {
  const want = podRequest(asPortRequest(req), defaults);
  want.interfaces[0].defaultRoute = ipamSection(req.config).defaultRoute === true;
  return want;
}

function asPortRequest<R extends CniRequest>(req: R): R {
  const ipam = ipamSection(req.config);
  const tenant = ipam.tenant ?? req.config.tenant;
  const { networks: _ignored, network: _one, ...rest } = req.config;
  return {
    ...req,
    // KNITTER_NETWORKS in CNI_ARGS is knitter's own interfaces' list, not this one's.
    args: Object.fromEntries(Object.entries(req.args).filter(([k]) => k !== "KNITTER_NETWORKS")),
    config: {
      ...rest,
      ...(tenant ? { tenant } : {}),
      networks: [{
        name: ipam.network,
        interface: req.ifName,
        ...(ipam.ip ? { ip: ipam.ip } : {}),
        ...(ipam.ipGroup ? { ipGroup: ipam.ipGroup } : {}),
        ...(ipam.claim ? { claim: ipam.claim } : {}),
      }],
    },
  };
}

/** The IPAM result of a port: its addresses (no interface: the calling plugin's), routes, DNS. */
export function ipamResult(port: Port, defaultRoute: boolean): CniResult {
  const gateways = [port.gateway, port.gateway6];
  const ips = portAddresses(port).map((address, k) => ({
    address,
    ...(gateways[k] ? { gateway: gateways[k] } : {}),
  }));
  const routes = podRoutes({ ifName: "", hostIfName: "", port, defaultRoute }).map((r) =>
    r.via ? { dst: r.dst, gw: r.via } : { dst: r.dst }
  );
  return { cniVersion: LATEST_CNI_VERSION, ips, routes, dns: { ...port.dns } };
}
