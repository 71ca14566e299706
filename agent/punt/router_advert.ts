/**
 * Router advertisements of a network's distributed gateway (RFC 4861 section 4.2), for pods that
 * configure their IPv6 address by SLAAC (RFC 4862): the network's /64 prefix as on-link, with the
 * autonomous flag when SLAAC is on, the M and O flags as the network says, the MTU option, and the
 * gateway's MAC as source link-layer address, from the gateway's link-local address.
 * @module
 */
import { ETH_IPV6, ethernet, icmpv6Packet, linkLocalOf } from "./frames.ts";

export interface AdvertSettings {
  /** The gateway's MAC; its link-local address (EUI-64) is the source. */
  gatewayMac: Uint8Array;
  /** The network's IPv6 prefix (16 bytes) and length (SLAAC needs 64). */
  prefix: Uint8Array;
  prefixLength: number;
  /** The A flag: hosts make their address from the prefix. */
  autonomous: boolean;
  /** The M flag: addresses from DHCPv6. */
  managed: boolean;
  /** The O flag: other configuration (DNS) from DHCPv6. */
  other: boolean;
  mtu: number;
}

/** How long the pods keep the gateway as a default router, and the prefix (RFC 4861 defaults). */
export const ROUTER_LIFETIME_S = 1800;
const VALID_LIFETIME_S = 2592000;
const PREFERRED_LIFETIME_S = 604800;
const ALL_NODES = Uint8Array.from([0xff, 0x02, ...new Array(13).fill(0), 1]);
const ALL_NODES_MAC = Uint8Array.from([0x33, 0x33, 0, 0, 0, 1]);

/**
 * The advertisement, to all nodes (unsolicited, or answering a solicitation from `::`), or to the
 * soliciting pod (`to`: its MAC and address).
 */
export function routerAdvert(
  s: AdvertSettings,
  to?: { mac: Uint8Array; ip: Uint8Array },
): Uint8Array {
  const m = new Uint8Array(16 + 8 + 8 + 32);
  const v = new DataView(m.buffer);
  m[0] = 134;
  m[4] = 64; // the hop limit the pods should use
  m[5] = (s.managed ? 0x80 : 0) | (s.other ? 0x40 : 0);
  v.setUint16(6, ROUTER_LIFETIME_S);
  // Source link-layer address (type 1, 8 bytes).
  m.set([1, 1, ...s.gatewayMac], 16);
  // MTU (type 5, 8 bytes).
  m.set([5, 1], 24);
  v.setUint32(28, s.mtu);
  // Prefix information (type 3, 32 bytes): on-link (L), autonomous (A).
  m.set([3, 4, s.prefixLength, 0x80 | (s.autonomous ? 0x40 : 0)], 32);
  v.setUint32(36, VALID_LIFETIME_S);
  v.setUint32(40, PREFERRED_LIFETIME_S);
  m.set(s.prefix, 48);
  const src = linkLocalOf(s.gatewayMac);
  // Neighbour discovery is only believed with a hop limit of 255 (RFC 4861 section 6.1.2).
  const packet = icmpv6Packet(src, to?.ip ?? ALL_NODES, 255, m);
  return ethernet(to?.mac ?? ALL_NODES_MAC, s.gatewayMac, ETH_IPV6, packet);
}
