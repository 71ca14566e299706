/**
 * A network request's fields, each checked against the others and turned into the record to store:
 * the CIDR, the gateway, the pools, the excludes, the routes and DNS. Pure: no store access.
 */
import { invalid } from "../errors.ts";
import { IndexSpace, type Range } from "../ipam/index_space.ts";
import { type IndexRange, mergeRanges, rangesSize } from "../ipam/index_ranges.ts";
import {
  type Cidr,
  cidrContains,
  formatCidr,
  formatIp,
  type Ip,
  linkLocalOverlap,
  noHostOverlap,
  parseCidr,
  parseIp,
} from "@knitter/common/address";
import type { NetworkRecord } from "../model.ts";
import type { RouterAdvertisements } from "@knitter/common";
import type { NetworkCreateBody } from "../schemas.ts";
import { defaultIpv6Pool, subnet6Spec } from "./dual_stack.ts";

/** Bits of one network's address bitmap: 2^24 addresses, an IPv4 /8. */
export const MAX_POOL_SIZE = 1 << 24;
/** VXLAN over IPv4 adds 50 bytes of headers. */
export const VXLAN_OVERHEAD = 50;

export interface NetworkFields {
  record: Omit<NetworkRecord, "id" | "tenant" | "createdAt" | "segmentId">;
  cidr: Cidr;
  space: IndexSpace;
  /** Index ranges [start, end) never to be handed out: the gateway and the excludes, merged. */
  reserved: IndexRange[];
}

export function networkFields(
  body: NetworkCreateBody,
  underlayMtu: number,
): NetworkFields {
  const cidr = requireHosts("cidr", parseCidrField("cidr", body.cidr));
  const family = cidr.family;
  const maxPrefix = family === 4 ? 30 : 126;
  if (cidr.prefix > maxPrefix) {
    throw invalid(
      "cidr",
      `${body.cidr} is too small: a network needs a prefix of /${maxPrefix} or shorter`,
    );
  }
  const last = cidr.base + cidr.size - 1n;
  const special = (ip: Ip): string | null =>
    ip.value === cidr.base
      ? "is the network address"
      : family === 4 && ip.value === last
      ? "is the broadcast address"
      : null;

  let gateway: Ip | undefined;
  if (body.gateway !== undefined) {
    gateway = parseAddrField("gateway", body.gateway, cidr);
    const why = special(gateway);
    if (why) throw invalid("gateway", `${body.gateway} ${why} of ${body.cidr}`);
  }

  const pools = poolRanges(body, cidr, special);
  const space = new IndexSpace(pools);
  if (space.size > MAX_POOL_SIZE) {
    throw invalid(
      body.allocationPools ? "allocationPools" : "cidr",
      `the pools hold ${space.size} addresses, more than the ${MAX_POOL_SIZE} one network may have`,
    );
  }

  const wanted: IndexRange[] = [];
  if (gateway) {
    const i = space.indexOf(gateway.value);
    if (i >= 0) wanted.push([i, i + 1]);
  }
  const excludes = (body.excludes ?? []).map((text, i) => {
    const range = parseExclude(`excludes[${i}]`, text, cidr);
    wanted.push(...space.indexRanges(range.start, range.end));
    return text;
  });
  const reserved = mergeRanges(wanted);
  const reservedCount = rangesSize(reserved);
  if (reservedCount >= space.size) {
    throw invalid(
      body.excludes?.length ? "excludes" : "gateway",
      `the gateway and the excludes take all ${space.size} addresses of the pools: the network would have no address to hand out`,
    );
  }

  const subnet6 = subnet6Spec(body, { cidr, space, reserved });
  if (subnet6) requireHosts("cidr6", subnet6.cidr6);
  const routes = (body.routes ?? []).map((r, i) => {
    const dst = parseCidrField(`routes[${i}].dst`, r.dst);
    const on = dst.family === family ? cidr : dst.family === 6 ? subnet6?.cidr6 : undefined;
    if (!on) {
      throw invalid(
        `routes[${i}].dst`,
        `${r.dst} is IPv${dst.family} but the network is IPv${family}${
          dst.family === 6 ? " (it has no cidr6)" : ""
        }`,
      );
    }
    if (r.via !== undefined) parseAddrField(`routes[${i}].via`, r.via, on);
    return r.via === undefined ? { dst: formatCidr(dst) } : { dst: formatCidr(dst), via: r.via };
  });

  for (const [i, ns] of (body.dns?.nameservers ?? []).entries()) {
    if (!parseIp(ns)) throw invalid(`dns.nameservers[${i}]`, `"${ns}" is not an IP address`);
  }

  checkSegmentFields(body);
  refuseFlowsOnly(body.dataPlane, body);
  const mtu = body.mtu ?? (body.type === "vxlan" ? underlayMtu - VXLAN_OVERHEAD : underlayMtu);
  if (family === 6 || subnet6) checkIpv6Mtu(mtu, body.mtu === undefined);

  const format = (value: bigint) => formatIp({ family, value });
  return {
    cidr,
    space,
    reserved,
    record: {
      name: body.name,
      type: body.type,
      cidr: formatCidr(cidr),
      family,
      gateway: gateway ? format(gateway.value) : undefined,
      ...(subnet6 ? { cidr6: formatCidr(subnet6.cidr6) } : {}),
      ...(subnet6?.gateway6 ? { gateway6: formatIp(subnet6.gateway6) } : {}),
      allocationPools: pools.map((p) => ({ start: format(p.start), end: format(p.end) })),
      excludes,
      public: body.public,
      mtu,
      routes,
      dns: body.dns ?? {},
      ...(body.bandwidth ? { bandwidth: body.bandwidth } : {}),
      ...(body.dscp !== undefined ? { dscp: body.dscp } : {}),
      ...(body.ipv6RouterAdvertisements
        ? { ipv6RouterAdvertisements: advertising(body, cidr, subnet6) }
        : {}),
      ...(body.dataPlane === "external" ? { dataPlane: "external" as const } : {}),
      ...(body.delegate ? { delegate: body.delegate } : {}),
      physnet: body.physnet,
      description: body.description,
      ...(body.labels ? { labels: body.labels } : {}),
      poolSize: space.size,
      reserved: reservedCount,
      reservedRanges: reserved,
    },
  };
}

/** The least MTU a link may have for IPv6 (RFC 8200); Linux drops IPv6 from a smaller link. */
export const IPV6_MIN_MTU = 1280;

/**
 * Refuses an MTU a pod's IPv6 address cannot live with: the kernel would take IPv6 off the pod's
 * interface, and the ADD would fail on a node instead of here.
 */
function checkIpv6Mtu(mtu: number, derived: boolean): void {
  if (mtu >= IPV6_MIN_MTU) return;
  throw invalid(
    "mtu",
    derived
      ? `the network's MTU would be ${mtu} (the underlay's ${
        mtu + VXLAN_OVERHEAD
      } less VXLAN's ${VXLAN_OVERHEAD}), below ${IPV6_MIN_MTU}, the least IPv6 allows: ` +
        `give the manager an underlayMtu of at least ${
          IPV6_MIN_MTU + VXLAN_OVERHEAD
        }, or make the network type vlan`
      : `${mtu} is below ${IPV6_MIN_MTU}, the least IPv6 allows on a link: a network with IPv6 ` +
        `needs an mtu of at least ${IPV6_MIN_MTU}`,
  );
}

/** What only Knitter's flows carry out, which another plugin's interfaces never pass through. */
const FLOWS_ONLY = [
  "securityGroups",
  "dscp",
  "egress",
  "hostAccess",
  "bandwidth",
  "advertise",
  "ipv6RouterAdvertisements",
] as const;

/**
 * Refuses, on a network whose data plane is external, turning on what only Knitter's flows carry
 * out: at creation, and (the same call) on a change of such a network (null, false or an empty
 * list turn a setting off, which is always allowed).
 */
export function refuseFlowsOnly(
  dataPlane: string | undefined,
  fields: Partial<Record<typeof FLOWS_ONLY[number], unknown>>,
): void {
  if (dataPlane !== "external") return;
  for (const field of FLOWS_ONLY) {
    const v = fields[field];
    if (v === undefined || v === null || v === false) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    throw invalid(
      field,
      `an external network's traffic goes through another plugin's interfaces, never Knitter's flows on Open vSwitch, which is where ${field} is carried out: leave it out, or make the network with "dataPlane": "ovs"`,
    );
  }
}

function checkSegmentFields(body: NetworkCreateBody): void {
  if (body.type === "vxlan" && body.physnet !== undefined) {
    throw invalid("physnet", "a vxlan network is an overlay and takes no physnet");
  }
  if (body.type !== "vxlan" && body.physnet === undefined) {
    throw invalid("physnet", `a ${body.type} network needs the physnet it rides on`);
  }
  if (body.type === "flat" && body.segmentId !== undefined) {
    throw invalid("segmentId", "a flat network is untagged and takes no segmentId");
  }
  if (body.type === "vlan" && body.segmentId !== undefined && body.segmentId > 4094) {
    throw invalid("segmentId", `VLAN ID ${body.segmentId} is outside 1..4094`);
  }
}

function poolRanges(
  body: NetworkCreateBody,
  cidr: Cidr,
  special: (ip: Ip) => string | null,
): Range[] {
  if (!body.allocationPools || body.allocationPools.length === 0) {
    // An IPv6 CIDR is too large to hand out as a whole: a bounded window of it.
    if (cidr.family === 6) return [defaultIpv6Pool(cidr)];
    return [{ start: cidr.base + 1n, end: cidr.base + cidr.size - 2n }];
  }
  const pools = body.allocationPools.map((p, i) => {
    const field = `allocationPools[${i}]`;
    const start = parseAddrField(`${field}.start`, p.start, cidr);
    const end = parseAddrField(`${field}.end`, p.end, cidr);
    if (start.value > end.value) throw invalid(field, `start ${p.start} is after end ${p.end}`);
    for (const v of [cidr.base, cidr.base + cidr.size - 1n]) {
      const ip = { family: cidr.family, value: v };
      const why = special(ip);
      if (why && v >= start.value && v <= end.value) {
        throw invalid(field, `${p.start}-${p.end} includes ${formatIp(ip)}, which ${why}`);
      }
    }
    return { start: start.value, end: end.value, i };
  });
  pools.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  for (let k = 1; k < pools.length; k++) {
    if (pools[k].start <= pools[k - 1].end) {
      throw invalid(
        `allocationPools[${pools[k].i}]`,
        `overlaps allocationPools[${pools[k - 1].i}]`,
      );
    }
  }
  return pools.map(({ start, end }) => ({ start, end }));
}

function parseCidrField(field: string, text: string): Cidr {
  const cidr = parseCidr(text);
  if ("error" in cidr) throw invalid(field, cidr.error);
  return cidr;
}

/** `cidr` as a network's subnet: refused when it overlaps a range no host may hold, or link-local. */
export function requireHosts(field: string, cidr: Cidr): Cidr {
  const local = linkLocalOverlap(cidr);
  if (local !== null) {
    throw invalid(
      field,
      `${
        formatCidr(cidr)
      } overlaps ${local}, which no pod network may use: every node and interface has addresses of its own there (the metadata service at 169.254.169.254, each interface's fe80:: address), and a node never forwards a pod's traffic to them; use a private range such as 10.0.0.0/8 or fd00::/8`,
    );
  }
  const range = noHostOverlap(cidr);
  if (range === null) return cidr;
  throw invalid(
    field,
    `${
      formatCidr(cidr)
    } overlaps ${range}, which no host may hold: pods there would be unreachable and every node's flows would refuse them; use a private range such as 10.0.0.0/8 or fd00::/8`,
  );
}

/** An address that must lie inside `cidr`. */
export function parseAddrField(field: string, text: string, cidr: Cidr): Ip {
  const ip = parseIp(text);
  if (!ip) throw invalid(field, `"${text}" is not a valid IP address`);
  if (!cidrContains(cidr, ip)) throw invalid(field, `${text} is outside ${formatCidr(cidr)}`);
  return ip;
}

/** An exclude is an address, a CIDR or a "start-end" range, all inside the network. */
function parseExclude(field: string, text: string, cidr: Cidr): Range {
  if (text.includes("/")) {
    const sub = parseCidrField(field, text);
    const inside = cidrContains(cidr, { family: sub.family, value: sub.base }) &&
      cidrContains(cidr, { family: sub.family, value: sub.base + sub.size - 1n });
    if (!inside) throw invalid(field, `${text} is not inside ${formatCidr(cidr)}`);
    return { start: sub.base, end: sub.base + sub.size - 1n };
  }
  const dash = text.indexOf("-");
  if (dash > 0) {
    const start = parseAddrField(field, text.slice(0, dash), cidr);
    const end = parseAddrField(field, text.slice(dash + 1), cidr);
    if (start.value > end.value) throw invalid(field, `${text}: start is after end`);
    return { start: start.value, end: end.value };
  }
  const ip = parseAddrField(field, text, cidr);
  return { start: ip.value, end: ip.value };
}

/** The parsed CIDR of a stored network. */
export function cidrOf(net: Pick<NetworkRecord, "id" | "cidr">): Cidr {
  const c = parseCidr(net.cidr);
  if ("error" in c) throw new Error(`stored network ${net.id} has a bad CIDR: ${c.error}`);
  return c;
}

/**
 * A network's router advertisements, checked: they come from its IPv6 gateway, and SLAAC makes an
 * address from a /64 prefix only (RFC 4862).
 */
function advertising(
  body: NetworkCreateBody,
  cidr: Cidr,
  subnet6: { cidr6: Cidr; gateway6?: Ip } | undefined,
): RouterAdvertisements {
  const ra = body.ipv6RouterAdvertisements!;
  const v6 = cidr.family === 6 ? cidr : subnet6?.cidr6;
  const gateway = cidr.family === 6 ? body.gateway : subnet6?.gateway6;
  if (!v6 || gateway === undefined) {
    throw invalid(
      "ipv6RouterAdvertisements",
      "router advertisements come from the network's IPv6 gateway: give the network an IPv6 cidr (or cidr6) and its gateway (gateway or gateway6)",
    );
  }
  if (ra.slaac && v6.prefix !== 64) {
    throw invalid(
      "ipv6RouterAdvertisements",
      `slaac makes a pod's address from a /64 prefix, and ${
        formatCidr(v6)
      } is a /${v6.prefix}: use a /64, or set slaac to false`,
    );
  }
  return { slaac: ra.slaac, managed: ra.managed, otherConfig: ra.otherConfig };
}
