/**
 * A network's router advertisements as the agent sends them (agent/PIPELINE.md, "Router
 * advertisements"), from what its ports say (`networkRouterAdvertisements`), and the address each
 * pod makes by SLAAC: the /64 prefix and the modified EUI-64 of its MAC (RFC 4862, RFC 4291
 * appendix A). The flows let that address through like the port's own: it is derived, never
 * handed out, so two pods cannot have the same one without having the same MAC.
 * @module
 */
import type { Port } from "@knitter/common";
import { formatIp, networkOf, parseIpPrefix } from "@knitter/common/address";
import { ipBytes, linkLocalOf, macBytes } from "./frames.ts";
import type { AdvertSettings } from "./router_advert.ts";

/** What a port says of its network's advertisements (a Port, or the agent's view of one). */
type AdvertSource = Partial<
  Pick<Port, "address" | "address6" | "mac" | "mtu" | "networkRouterAdvertisements">
>;

/** The port's IPv6 subnet: its base address and prefix length; undefined without one. */
function subnet6(port: AdvertSource): { base: bigint; prefix: number } | undefined {
  const text = [port.address, port.address6].find((a) => a?.includes(":"));
  const parsed = text === undefined ? undefined : parseIpPrefix(text, "required");
  if (!parsed || "error" in parsed || parsed.prefix === undefined) return undefined;
  return { base: networkOf(parsed.ip, parsed.prefix).base, prefix: parsed.prefix };
}

/** The advertisement of the port's network, from its gateway MAC; undefined: it sends none. */
export function advertOf(port: AdvertSource, gatewayMac: string): AdvertSettings | undefined {
  const ra = port.networkRouterAdvertisements;
  const subnet = subnet6(port);
  if (!ra || !subnet || port.mtu === undefined) return undefined;
  return {
    gatewayMac: macBytes(gatewayMac),
    prefix: ipBytes(formatIp({ family: 6, value: subnet.base })),
    prefixLength: subnet.prefix,
    autonomous: ra.slaac,
    managed: ra.managed,
    other: ra.otherConfig,
    mtu: port.mtu,
  };
}

/** The address the port's pod makes by SLAAC, as a list (empty when its network has none). */
export function slaacIps(port: AdvertSource): string[] {
  const subnet = subnet6(port);
  if (!port.networkRouterAdvertisements?.slaac || subnet?.prefix !== 64 || !port.mac) return [];
  // The link-local address's interface identifier, under the network's prefix.
  const iid = linkLocalOf(macBytes(port.mac)).subarray(8);
  const low = iid.reduce((v, b) => (v << 8n) | BigInt(b), 0n);
  return [formatIp({ family: 6, value: subnet.base | low })];
}
