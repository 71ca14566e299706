/**
 * The CNI result of an attachment, in the contract's 1.1.0 form (`@knitter/plugin/contract`; the
 * plugin converts it to the config's version).
 */
import { type Port, portAddresses } from "@knitter/common";
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

/**
 * Routes inside the pod for one interface: the default routes if it carries them (IPv4 and, on a
 * dual-stack network, IPv6: static, as no router advertisement is sent), then its network's.
 */
export function podRoutes(i: BuiltInterface): { dst: string; via?: string }[] {
  const out: { dst: string; via?: string }[] = [];
  const own = new Set(i.port.routes.map((r) => r.dst));
  const defaults: [string, string | undefined][] = [
    [i.port.family === 4 ? "0.0.0.0/0" : "::/0", i.port.gateway],
    ["::/0", i.port.gateway6],
  ];
  for (const [dst, via] of defaults) {
    if (i.defaultRoute && via && !own.has(dst)) out.push({ dst, via });
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
    const gateways = [i.port.gateway, i.port.gateway6];
    portAddresses(i.port).forEach((address, k) =>
      result.ips.push({
        address,
        ...(gateways[k] ? { gateway: gateways[k] } : {}),
        interface: index,
      })
    );
    for (const r of podRoutes(i)) {
      result.routes.push(r.via ? { dst: r.dst, gw: r.via } : { dst: r.dst });
    }
    if (!result.dns.nameservers?.length && i.port.dns.nameservers?.length) {
      result.dns = { ...i.port.dns };
    }
  }
  return result;
}
