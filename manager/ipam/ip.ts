/** IPv4 and IPv6 addresses as bigints, so that ranges and offsets are plain arithmetic. */
import ipaddr from "ipaddr.js";

export type Family = 4 | 6;

export interface Ip {
  family: Family;
  value: bigint;
}

export interface Cidr {
  family: Family;
  /** The network address. */
  base: bigint;
  prefix: number;
  /** Number of addresses, 2^(bits - prefix). */
  size: bigint;
}

export function bitsOf(family: Family): number {
  return family === 4 ? 32 : 128;
}

/** Parses an address strictly: dotted quad for IPv4 (no octal or short forms), RFC 4291 for IPv6. */
export function parseIp(text: string): Ip | null {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) {
    return { family: 4, value: bytesToBigint(ipaddr.IPv4.parse(text).toByteArray()) };
  }
  if (!text.includes(":") || !ipaddr.IPv6.isValid(text) || text.includes("%")) return null;
  return { family: 6, value: bytesToBigint(ipaddr.IPv6.parse(text).toByteArray()) };
}

export function formatIp(ip: Ip): string {
  const bytes = bigintToBytes(ip.value, ip.family === 4 ? 4 : 16);
  const addr = ipaddr.fromByteArray(bytes);
  if (!(addr instanceof ipaddr.IPv6)) return addr.toString();
  // RFC 5952 section 5: an IPv4-mapped address ends in dotted decimal.
  if (addr.isIPv4MappedAddress()) return `::ffff:${addr.toIPv4Address().toString()}`;
  return addr.toRFC5952String();
}

/** Parses "addr/prefix"; the reason says what is wrong, for the caller's error message. */
export function parseCidr(text: string): Cidr | { error: string } {
  const slash = text.indexOf("/");
  if (slash < 0) {
    return { error: `"${text}" is not a CIDR (expected address/prefix, e.g. 10.1.0.0/24)` };
  }
  const ip = parseIp(text.slice(0, slash));
  if (!ip) return { error: `"${text}" does not start with a valid IPv4 or IPv6 address` };
  const prefixText = text.slice(slash + 1);
  const bits = bitsOf(ip.family);
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > bits) {
    return { error: `"${text}" has an invalid prefix length (0..${bits} for IPv${ip.family})` };
  }
  const size = 1n << BigInt(bits - prefix);
  const base = ip.value & ~(size - 1n);
  if (base !== ip.value) {
    const fixed = `${formatIp({ family: ip.family, value: base })}/${prefix}`;
    return { error: `"${text}" has host bits set; the network is ${fixed}` };
  }
  return { family: ip.family, base, prefix, size };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp({ family: cidr.family, value: cidr.base })}/${cidr.prefix}`;
}

export function cidrContains(cidr: Cidr, ip: Ip): boolean {
  return ip.family === cidr.family && ip.value >= cidr.base && ip.value < cidr.base + cidr.size;
}

export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  return a.family === b.family && a.base < b.base + b.size && b.base < a.base + a.size;
}

function bytesToBigint(bytes: number[]): bigint {
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  return v;
}

function bigintToBytes(value: bigint, length: number): number[] {
  const out = new Array<number>(length);
  for (let i = length - 1; i >= 0; i--) {
    out[i] = Number(value & 0xffn);
    value >>= 8n;
  }
  return out;
}
