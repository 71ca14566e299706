/**
 * The CNI result of an attachment, in the contract's 1.1.0 form (`@knitter/plugin/contract`; the
 * plugin converts it to the config's version).
 */
import type { Port } from "@knitter/common";
import { type CniResult, LATEST_CNI_VERSION } from "@knitter/plugin/contract";

/** A result as the agent builds it: every list present. */
export type BuiltResult =
  & CniResult
  & Required<Pick<CniResult, "interfaces" | "ips" | "routes" | "dns">>;

export interface BuiltInterface {
  ifName: string;
  hostIfName: string;
  port: Port;
  defaultRoute: boolean;
}

/** Routes inside the pod for one interface: the default route if it carries it, then its network's. */
export function podRoutes(i: BuiltInterface): { dst: string; via?: string }[] {
  const out: { dst: string; via?: string }[] = [];
  if (i.defaultRoute && i.port.gateway) {
    out.push({ dst: i.port.family === 4 ? "0.0.0.0/0" : "::/0", via: i.port.gateway });
  }
  for (const r of i.port.routes) out.push(r.via ? { dst: r.dst, via: r.via } : { dst: r.dst });
  return out;
}

/**
 * Each interface appears twice, as the spec lists them: the host end (no sandbox) and the pod end.
 * In a chain, `prev` (the earlier plugins' result) comes first and our indexes follow it.
 */
export function cniResult(
  netns: string,
  built: BuiltInterface[],
  prev?: Partial<CniResult>,
): BuiltResult {
  const result: BuiltResult = {
    cniVersion: LATEST_CNI_VERSION,
    interfaces: [...(prev?.interfaces ?? [])],
    ips: [...(prev?.ips ?? [])],
    routes: [...(prev?.routes ?? [])],
    dns: prev?.dns ?? {},
  };
  for (const i of built) {
    result.interfaces.push({ name: i.hostIfName });
    const index = result.interfaces.length;
    result.interfaces.push({ name: i.ifName, mac: i.port.mac, mtu: i.port.mtu, sandbox: netns });
    result.ips.push({
      address: i.port.address,
      ...(i.port.gateway ? { gateway: i.port.gateway } : {}),
      interface: index,
    });
    for (const r of podRoutes(i)) {
      result.routes.push(r.via ? { dst: r.dst, gw: r.via } : { dst: r.dst });
    }
    if (!result.dns.nameservers?.length && i.port.dns.nameservers?.length) {
      result.dns = { ...i.port.dns };
    }
  }
  return result;
}
