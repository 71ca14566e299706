/**
 * The ICMP and ICMPv6 errors the distributed router sends back to a pod (agent/PIPELINE.md,
 * "Router errors"): time exceeded, destination unreachable (no route), fragmentation needed /
 * packet too big, and port unreachable from the gateway's own address. Each is built from the frame that was punted, as the gateway of the pod's network
 * would send it: from the gateway's MAC and address to the pod's. What must never be answered
 * (RFC 1812 section 4.3.2.7, RFC 4443 section 2.4 e) is not: errors about errors, about fragments
 * but the first, about packets to or from a broadcast, multicast or unspecified address.
 * @module
 */
import {
  ETH_IPV4,
  ETH_IPV6,
  ethernet,
  icmpv6Packet,
  internetChecksum,
  type IpFrame,
  ipv4Packet,
  ORIGIN_TTL,
  PROTO_ICMP,
  PROTO_ICMPV6,
} from "./frames.ts";

export type RouterError = "timeExceeded" | "unreachable" | "portUnreachable" | "tooBig";

/** The gateway that answers: its MAC and its address of the packet's family. */
export interface Answerer {
  mac: Uint8Array;
  ip: Uint8Array;
}

/** Type and code of each error, per family (RFC 792, RFC 1191, RFC 4443). */
const CODES: Record<RouterError, { v4: [number, number]; v6: [number, number] }> = {
  timeExceeded: { v4: [11, 0], v6: [3, 0] },
  unreachable: { v4: [3, 0], v6: [1, 0] },
  /** What the gateway's own address answers to anything it does not serve. */
  portUnreachable: { v4: [3, 3], v6: [1, 4] },
  tooBig: { v4: [3, 4], v6: [2, 0] },
};

/** ICMPv4 types that are errors (never answered with another error). */
const ICMP4_ERRORS = new Set([3, 4, 5, 11, 12]);
/** IPv6 packets with an error stay within the minimum MTU (RFC 4443 section 2.4 c). */
const IPV6_MIN_MTU = 1280;

/**
 * The error frame for `frame`, or null when none may be sent. `mtu` is the egress MTU of a
 * `tooBig` (the next hop's, RFC 1191).
 */
export function routerError(
  kind: RouterError,
  frame: IpFrame,
  gateway: Answerer,
  mtu = 0,
): Uint8Array | null {
  if (!answerable(frame)) return null;
  return frame.family === 4 ? error4(kind, frame, gateway, mtu) : error6(kind, frame, gateway, mtu);
}

function error4(kind: RouterError, f: IpFrame, gw: Answerer, mtu: number): Uint8Array {
  // The IP header and the first 8 bytes of its payload (RFC 792): enough for the ports.
  const quote = f.packet.subarray(0, Math.min(f.packet.length, f.headerLength + 8));
  const message = new Uint8Array(8 + quote.length);
  [message[0], message[1]] = CODES[kind].v4;
  if (kind === "tooBig") new DataView(message.buffer).setUint16(6, mtu);
  message.set(quote, 8);
  new DataView(message.buffer).setUint16(2, internetChecksum(message));
  return ethernet(f.ethSrc, gw.mac, ETH_IPV4, ipv4Packet(gw.ip, f.src, PROTO_ICMP, message));
}

function error6(kind: RouterError, f: IpFrame, gw: Answerer, mtu: number): Uint8Array {
  // As much of the packet as fits in the minimum MTU with the IPv6 and ICMPv6 headers before it.
  const quote = f.packet.subarray(0, Math.min(f.packet.length, IPV6_MIN_MTU - 48));
  const message = new Uint8Array(8 + quote.length);
  [message[0], message[1]] = CODES[kind].v6;
  if (kind === "tooBig") new DataView(message.buffer).setUint32(4, mtu);
  message.set(quote, 8);
  return ethernet(f.ethSrc, gw.mac, ETH_IPV6, icmpv6Packet(gw.ip, f.src, ORIGIN_TTL, message));
}

/** Whether an error may answer this packet at all. */
function answerable(f: IpFrame): boolean {
  if (f.ethSrc[0] & 1) return false;
  return f.family === 4 ? answerable4(f) : answerable6(f);
}

function answerable4(f: IpFrame): boolean {
  const p = f.packet;
  // A fragment but the first: its error would be a duplicate, and it has no ports to quote.
  if ((((p[6] & 0x1f) << 8) | p[7]) !== 0) return false;
  if (f.protocol === PROTO_ICMP && ICMP4_ERRORS.has(p[f.headerLength])) return false;
  return unicast4(f.src) && unicast4(f.dst);
}

function unicast4(a: Uint8Array): boolean {
  if (a[0] === 0 || a[0] >= 224) return false; // this network, multicast, class E, broadcast
  return !(a[0] === 127);
}

function answerable6(f: IpFrame): boolean {
  // ICMPv6 types below 128 are errors.
  if (f.protocol === PROTO_ICMPV6 && f.packet.length > 40 && f.packet[40] < 128) return false;
  return unicast6(f.src) && f.dst[0] !== 0xff;
}

function unicast6(a: Uint8Array): boolean {
  if (a[0] === 0xff) return false;
  return a.some((b) => b !== 0);
}
