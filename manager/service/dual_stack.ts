/**
 * Dual stack: a network with an IPv4 `cidr` may have an IPv6 subnet `cidr6` (and `gateway6`).
 * A port's IPv6 address is paired with its IPv4 one by host part (10.5.0.7 in 10.5.0.0/24 is
 * fd00:5::7 in fd00:5::/64), so one bitmap, one pool index, one quarantine entry and one quota
 * count cover both: releasing, reusing and excluding an address does the same to its pair.
 *
 * An IPv6-only network without allocationPools hands out a bounded window of its CIDR, the
 * DEFAULT_IPV6_POOL addresses after the network address: a /64 is never a bitmap of 2^64 bits.
 */
import { invalid } from "../errors.ts";
import type { IndexSpace, Range } from "../ipam/index_space.ts";
import { type IndexRange, rangesHold } from "../ipam/index_ranges.ts";
import {
  type Cidr,
  cidrContains,
  cidrsOverlap,
  formatCidr,
  formatIp,
  type Ip,
  parseCidr,
  parseIp,
} from "@knitter/common/address";
import type { NetworkRecord } from "../model.ts";
import type { NetworkCreateBody } from "../schemas.ts";

/** Addresses an IPv6 network without allocationPools hands out: the first 2^16 after its base. */
export const DEFAULT_IPV6_POOL = 1 << 16;

/** The default pool of an IPv6 CIDR: at most DEFAULT_IPV6_POOL addresses after the network's. */
export function defaultIpv6Pool(cidr: Cidr): Range {
  const size = BigInt(DEFAULT_IPV6_POOL);
  const last = cidr.base + cidr.size - 1n;
  const end = cidr.base + size < last ? cidr.base + size : last;
  return { start: cidr.base + 1n, end };
}

export interface Subnet6 {
  cidr6: Cidr;
  gateway6?: Ip;
}

/**
 * Checks a request's IPv6 subnet against its IPv4 one: `cidr6` holds the IPv4 subnet's host part,
 * and `gateway6` is not the pair of an address the pools hand out (`reserved`: the gateway and
 * the excludes, as pool indexes of `space`).
 */
export function subnet6Spec(
  body: NetworkCreateBody,
  v4: { cidr: Cidr; space: IndexSpace; reserved: IndexRange[] },
): Subnet6 | undefined {
  const { cidr, space, reserved } = v4;
  if (body.cidr6 === undefined) {
    if (body.gateway6 !== undefined) {
      throw invalid("gateway6", "an IPv6 gateway needs cidr6, the network's IPv6 subnet");
    }
    return undefined;
  }
  if (cidr.family === 6) {
    throw invalid(
      "cidr6",
      `the network's cidr ${body.cidr} is already IPv6; cidr6 is for an IPv4 network's second subnet`,
    );
  }
  const cidr6 = parseCidr(body.cidr6);
  if ("error" in cidr6) throw invalid("cidr6", cidr6.error);
  if (cidr6.family !== 6) {
    throw invalid("cidr6", `${body.cidr6} is IPv4: cidr6 takes the IPv6 subnet`);
  }
  if (cidr6.prefix > 126) {
    throw invalid(
      "cidr6",
      `${body.cidr6} is too small: a network needs a prefix of /126 or shorter`,
    );
  }
  if (cidr6.size < cidr.size) {
    throw invalid(
      "cidr6",
      `${formatCidr(cidr6)} holds ${cidr6.size} addresses, fewer than the ${cidr.size} of ${
        formatCidr(cidr)
      }: each port's IPv6 address has its IPv4 address's host part`,
    );
  }
  if (body.gateway6 === undefined) return { cidr6 };
  const gateway6 = parseIp(body.gateway6);
  if (!gateway6) throw invalid("gateway6", `"${body.gateway6}" is not a valid IP address`);
  if (!cidrContains(cidr6, gateway6)) {
    throw invalid("gateway6", `${body.gateway6} is outside ${formatCidr(cidr6)}`);
  }
  const offset = gateway6.value - cidr6.base;
  if (offset === 0n) {
    throw invalid("gateway6", `${body.gateway6} is the network address of ${formatCidr(cidr6)}`);
  }
  if (offset < cidr.size) {
    const ip4 = { family: 4 as const, value: cidr.base + offset };
    const index = space.indexOf(ip4.value);
    if (index >= 0 && !rangesHold(reserved, index)) {
      throw invalid(
        "gateway6",
        `${body.gateway6} is the IPv6 address of ${
          formatIp(ip4)
        }, which the pools hand out to a port; use the pair of the IPv4 gateway or of an excluded address`,
      );
    }
  }
  return { cidr6, gateway6 };
}

/** The IPv6 address paired with a port's IPv4 address, on a dual-stack network. */
export function pairedIp6(
  net: Pick<NetworkRecord, "cidr" | "cidr6">,
  ip: string,
): string | undefined {
  if (net.cidr6 === undefined) return undefined;
  const [cidr, cidr6] = subnets(net.cidr, net.cidr6);
  return formatIp({ family: 6, value: cidr6.base + (parseIp(ip)!.value - cidr.base) });
}

/** A dual-stack network's two subnets, parsed once: the pairing runs on every allocation. */
function subnets(cidr: string, cidr6: string): [Cidr, Cidr] {
  const key = `${cidr} ${cidr6}`;
  let parsed = parsedSubnets.get(key);
  if (!parsed) {
    parsed = [parseCidr(cidr) as Cidr, parseCidr(cidr6) as Cidr];
    if (parsedSubnets.size >= 4096) parsedSubnets.clear();
    parsedSubnets.set(key, parsed);
  }
  return parsed;
}

const parsedSubnets = new Map<string, [Cidr, Cidr]>();

/**
 * The IPv4 address a port asks for by its IPv6 address on a dual-stack network (the request's `ip`
 * may be either); an IPv4 address, or any address of a single-stack network, as it is.
 */
export function requestedIp4(
  net: Pick<NetworkRecord, "cidr" | "cidr6">,
  text: string,
  field = "ip",
): string {
  const ip = parseIp(text);
  if (net.cidr6 === undefined || ip?.family !== 6) return text;
  const [cidr, cidr6] = [parseCidr(net.cidr) as Cidr, parseCidr(net.cidr6) as Cidr];
  if (!cidrContains(cidr6, ip)) throw invalid(field, `${text} is outside ${net.cidr6}`);
  const offset = ip.value - cidr6.base;
  if (offset >= cidr.size) {
    throw invalid(
      field,
      `${text} pairs with no IPv4 address of ${net.cidr}: a port's IPv6 address has its IPv4 address's host part`,
    );
  }
  return formatIp({ family: 4, value: cidr.base + offset });
}

/** Whether two networks' subnets (IPv4 and IPv6, each) overlap: the first pair found, or null. */
export function overlappingSubnets(
  a: Pick<NetworkRecord, "cidr" | "cidr6">,
  b: Pick<NetworkRecord, "cidr" | "cidr6">,
): { mine: string; theirs: string } | null {
  for (const mine of subnetsOf(a)) {
    for (const theirs of subnetsOf(b)) {
      const [x, y] = [parseCidr(mine), parseCidr(theirs)];
      if ("error" in x || "error" in y) continue;
      if (cidrsOverlap(x, y)) return { mine, theirs };
    }
  }
  return null;
}

function subnetsOf(net: Pick<NetworkRecord, "cidr" | "cidr6">): string[] {
  return net.cidr6 === undefined ? [net.cidr] : [net.cidr, net.cidr6];
}
