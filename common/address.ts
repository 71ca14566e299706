/**
 * Addresses and MACs, parsed and checked in one place for every component but the plugin (which
 * only forwards them): IPv4 and IPv6 addresses as bigints, so that ranges and offsets are plain
 * arithmetic, CIDRs, an interface's address with its prefix, and MACs. Built on `ipaddr.js`, and
 * strict: a dotted quad for IPv4 (no octal or short forms), RFC 4291 text for IPv6 (no zone), so
 * what one component accepts, every other one does too.
 * @module
 */
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

/** Whether `text` is an IPv4 or IPv6 address, as parseIp takes it. */
export function isIp(text: string): boolean {
  return parseIp(text) !== null;
}

/** The canonical text of an address (RFC 5952 for IPv6), or null when it is not one. */
export function normalizeIp(text: string): string | null {
  const ip = parseIp(text);
  return ip ? formatIp(ip) : null;
}

/**
 * The canonical text of an address, and any other text as it is: compares a claimed address with
 * a held one whether or not the claim is well formed.
 */
export function canonicalIp(text: string): string {
  return normalizeIp(text) ?? text;
}

/** An address with the prefix length that follows it, if one does. */
export interface PrefixedIp {
  ip: Ip;
  prefix?: number;
}

/** Why a text is not an address (with a prefix): which part is wrong, and the whole sentence. */
export interface AddressError {
  /** `"TEXT" WHY`, for messages that quote the value. */
  error: string;
  /** The reason alone, for callers that quote the value their own way. */
  why: string;
  part: "address" | "prefix";
}

function addressError(text: string, part: AddressError["part"], why: string): AddressError {
  return { error: `"${text}" ${why}`, why, part };
}

/**
 * Parses "addr" or "addr/prefix" as an interface's address (host bits may be set); `prefix`
 * says whether the length may be absent ("optional") or must be there ("required").
 */
export function parseIpPrefix(
  text: string,
  prefix: "optional" | "required" = "optional",
): PrefixedIp | AddressError {
  const slash = text.indexOf("/");
  if (slash < 0) {
    if (prefix === "required") {
      return addressError(
        text,
        "prefix",
        "is not a CIDR (expected address/prefix, e.g. 10.1.0.0/24)",
      );
    }
    const ip = parseIp(text);
    return ip ? { ip } : addressError(text, "address", "is not a valid IPv4 or IPv6 address");
  }
  const ip = parseIp(text.slice(0, slash));
  if (!ip) return addressError(text, "address", "does not start with a valid IPv4 or IPv6 address");
  const prefixText = text.slice(slash + 1);
  const bits = bitsOf(ip.family);
  const length = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || length > bits) {
    const why = `has an invalid prefix length (0..${bits} for IPv${ip.family})`;
    return addressError(text, "prefix", why);
  }
  return { ip, prefix: length };
}

/** Whether parseIpPrefix takes `text`; by default the prefix length must be there ("10.9.0.0/16"). */
export function isIpPrefix(
  text: string,
  prefix: "optional" | "required" = "required",
): boolean {
  return !("error" in parseIpPrefix(text, prefix));
}

/** Parses "addr/prefix" as a network: host bits set are refused. */
export function parseCidr(text: string): Cidr | AddressError {
  const r = parseIpPrefix(text, "required");
  if ("error" in r) return r;
  const { ip, prefix } = r as Required<PrefixedIp>;
  const cidr = networkOf(ip, prefix);
  if (cidr.base !== ip.value) {
    return addressError(text, "prefix", `has host bits set; the network is ${formatCidr(cidr)}`);
  }
  return cidr;
}

/** The network `ip` lies in with this prefix length ("10.1.0.5", 24: 10.1.0.0/24). */
export function networkOf(ip: Ip, prefix: number): Cidr {
  const size = 1n << BigInt(bitsOf(ip.family) - prefix);
  return { family: ip.family, base: ip.value & ~(size - 1n), prefix, size };
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

/**
 * Ranges no host may hold: a pod there is refused by every node's flow compiler (which would then
 * fail the node's whole flow set), and the kernel will not route it as a neighbour's anyway.
 */
const NO_HOST_RANGES: readonly (readonly [string, string])[] = [
  ["0.0.0.0/8", "this network"],
  ["127.0.0.0/8", "loopback"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"],
  ["::/127", "unspecified and loopback"],
  ["::ffff:0:0/96", "IPv4-mapped"],
  ["ff00::/8", "multicast"],
];

/** The range no host may hold that `cidr` overlaps, as "127.0.0.0/8 (loopback)"; null if none. */
export function noHostOverlap(cidr: Cidr): string | null {
  for (const [text, what] of NO_HOST_RANGES) {
    if (cidrsOverlap(cidr, parseCidr(text) as Cidr)) return `${text} (${what})`;
  }
  return null;
}

/**
 * Link-local ranges: every node and every interface has addresses of its own there (the cloud's
 * metadata service at 169.254.169.254, each interface's fe80:: address for neighbour discovery),
 * so no pod network may use them.
 */
const LINK_LOCAL_RANGES: readonly string[] = ["169.254.0.0/16", "fe80::/10"];

/** The link-local range `cidr` overlaps, as "169.254.0.0/16 (link-local)"; null if none. */
export function linkLocalOverlap(cidr: Cidr): string | null {
  const hit = LINK_LOCAL_RANGES.find((text) => cidrsOverlap(cidr, parseCidr(text) as Cidr));
  return hit === undefined ? null : `${hit} (link-local)`;
}

// ---- MACs

/** A MAC in the one form the APIs take and store: six lowercase hex pairs joined by ":". */
export const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/** Any case, ":" or "-" between the pairs (one of them throughout), as runtimes pass MACs. */
const MAC_TEXT = /^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$/i;

/** Whether `text` is a MAC in the form the APIs take (MAC_RE). */
export function isMac(text: string): boolean {
  return MAC_RE.test(text);
}

/** A MAC as "02:aa:bb:cc:dd:ee" from any case and ":" or "-" separators; null when not a MAC. */
export function parseMac(text: string): string | null {
  return MAC_TEXT.test(text) ? text.toLowerCase().replaceAll("-", ":") : null;
}

/**
 * What a well-formed MAC is, by its first octet: a group address (broadcast, or another
 * multicast: bit 0 set), all zero, else a unicast one, locally administered (bit 1) or a vendor's.
 */
export function macKind(mac: string): "broadcast" | "multicast" | "zero" | "local" | "vendor" {
  const first = parseInt(mac.slice(0, 2), 16);
  if (/^ff(:ff){5}$/i.test(mac)) return "broadcast";
  if (first & 1) return "multicast";
  if (/^00([:-]00){5}$/.test(mac)) return "zero";
  return first & 2 ? "local" : "vendor";
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
