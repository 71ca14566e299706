/**
 * The bytes of the frames the agent answers for the distributed router (ICMP errors, router
 * advertisements): Ethernet, IPv4 and IPv6 headers, the Internet checksum, and the parsing of the
 * frame that a punt hands over. Plain byte arithmetic, no dependency: what tcpdump reads back
 * (punt/*_test.ts) is the yardstick.
 * @module
 */
import { parseIp } from "@knitter/common/address";

export const ETH_IPV4 = 0x0800;
export const ETH_IPV6 = 0x86dd;
export const PROTO_ICMP = 1;
export const PROTO_ICMPV6 = 58;
const ETH_HEADER = 14;

/** An IPv4 or IPv6 packet inside an untagged Ethernet frame, as a punt delivers it. */
export interface IpFrame {
  family: 4 | 6;
  ethSrc: Uint8Array;
  ethDst: Uint8Array;
  /** The IP packet (header and payload), as many bytes as the frame holds. */
  packet: Uint8Array;
  src: Uint8Array;
  dst: Uint8Array;
  /** IPv4 protocol or the IPv6 next header (extension headers are not followed). */
  protocol: number;
  /** The IP header's length: where the payload starts in `packet`. */
  headerLength: number;
}

/** The frame's IP packet; null for anything else (not IP, or cut short). */
export function parseIpFrame(frame: Uint8Array): IpFrame | null {
  if (frame.length < ETH_HEADER + 20) return null;
  const type = (frame[12] << 8) | frame[13];
  const packet = frame.subarray(ETH_HEADER);
  const base = { ethDst: frame.subarray(0, 6), ethSrc: frame.subarray(6, 12), packet };
  if (type === ETH_IPV4 && packet[0] >> 4 === 4) {
    const headerLength = (packet[0] & 0x0f) * 4;
    if (headerLength < 20 || packet.length < headerLength) return null;
    return {
      ...base,
      family: 4,
      src: packet.subarray(12, 16),
      dst: packet.subarray(16, 20),
      protocol: packet[9],
      headerLength,
    };
  }
  if (type === ETH_IPV6 && packet.length >= 40 && packet[0] >> 4 === 6) {
    return {
      ...base,
      family: 6,
      src: packet.subarray(8, 24),
      dst: packet.subarray(24, 40),
      protocol: packet[6],
      headerLength: 40,
    };
  }
  return null;
}

/** The Internet checksum (RFC 1071) of the parts, as if they were one run of bytes. */
export function internetChecksum(...parts: Uint8Array[]): number {
  let sum = 0;
  let odd = false;
  for (const part of parts) {
    for (const byte of part) {
      sum += odd ? byte : byte << 8;
      odd = !odd;
    }
  }
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/** `02:00:0a:00:00:04` as 6 bytes. */
export function macBytes(mac: string): Uint8Array {
  return Uint8Array.from(mac.split(":").map((h) => parseInt(h, 16)));
}

/** An address's bytes (4 or 16); throws on anything but an address. */
export function ipBytes(text: string): Uint8Array {
  const ip = parseIp(text);
  if (!ip) throw new Error(`not an IP address: ${text}`);
  const out = new Uint8Array(ip.family === 4 ? 4 : 16);
  let v = ip.value;
  for (let i = out.length - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** The link-local address a MAC makes (modified EUI-64, RFC 4291 appendix A). */
export function linkLocalOf(mac: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  out.set([0xfe, 0x80]);
  out.set([mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]], 8);
  return out;
}

/** An Ethernet frame around an IP packet. */
export function ethernet(dst: Uint8Array, src: Uint8Array, type: number, packet: Uint8Array) {
  const frame = new Uint8Array(ETH_HEADER + packet.length);
  frame.set(dst, 0);
  frame.set(src, 6);
  frame[12] = type >> 8;
  frame[13] = type & 0xff;
  frame.set(packet, ETH_HEADER);
  return frame;
}

/** Hop limit / TTL of what the router originates (the kernel's default). */
const ORIGIN_TTL = 64;
/** IPv4 TOS of ICMP errors: precedence "internetwork control", as Linux sends them. */
const ERROR_TOS = 0xc0;

/** An IPv4 packet of the router: header (with its checksum) and payload. */
export function ipv4Packet(
  src: Uint8Array,
  dst: Uint8Array,
  protocol: number,
  payload: Uint8Array,
) {
  const p = new Uint8Array(20 + payload.length);
  const v = new DataView(p.buffer);
  p[0] = 0x45;
  p[1] = ERROR_TOS;
  v.setUint16(2, p.length);
  p[8] = ORIGIN_TTL;
  p[9] = protocol;
  p.set(src, 12);
  p.set(dst, 16);
  v.setUint16(10, internetChecksum(p.subarray(0, 20)));
  p.set(payload, 20);
  return p;
}

/**
 * An IPv6 packet of ICMPv6 `message` (its checksum field zero), with the checksum over the
 * pseudo-header (RFC 8200 section 8.1) filled in.
 */
export function icmpv6Packet(
  src: Uint8Array,
  dst: Uint8Array,
  hopLimit: number,
  message: Uint8Array,
): Uint8Array {
  const p = new Uint8Array(40 + message.length);
  const v = new DataView(p.buffer);
  p[0] = 0x60;
  v.setUint16(4, message.length);
  p[6] = PROTO_ICMPV6;
  p[7] = hopLimit;
  p.set(src, 8);
  p.set(dst, 24);
  p.set(message, 40);
  const pseudo = new Uint8Array(8);
  new DataView(pseudo.buffer).setUint32(0, message.length);
  pseudo[7] = PROTO_ICMPV6;
  v.setUint16(42, internetChecksum(src, dst, pseudo, message));
  return p;
}

export { ORIGIN_TTL };
