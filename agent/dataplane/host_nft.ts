/**
 * The node's kernel side of the host ports (agent/README.md, "Egress and the node"), as data: the
 * one nftables table the agent owns, rebuilt whole and atomically by `nft -f`, and the marks and
 * routing tables of egress networks. Pure: host_ports.ts applies it.
 *
 * @module
 */

import {
  type Floating,
  floatingDnatRules,
  floatingInRules,
  floatingMarkRules,
  floatingOutRules,
  floatingSnatRules,
  floatingZoneRules,
  hasFloating,
} from "./floating_nft.ts";

/** A network the node is on through its host port. */
export interface HostNet {
  /** The network's node-local number (reg0 in the flows; here its conntrack zone, mark, table). */
  number: number;
  /** The host port's name in the node's netns. */
  port: string;
  /** Its pods reach the outside through the node, source NAT to the node's address. */
  egress: boolean;
  /** The node reaches its pods (kubelet probes, hostPort's DNAT). */
  hostAccess: boolean;
  /**
   * Advertised to the fabric by BGP (agent/bgp/): connections from the node's other interfaces
   * reach its pods, routed, without NAT.
   */
  advertise: boolean;
  /**
   * The gateway's IPv4 address: the node's on the network, and nowhere else (absent on an
   * IPv6-only network).
   */
  gateway?: string;
  /** The network's IPv4 CIDR (absent on an IPv6-only network). */
  cidr?: string;
  /**
   * The network's IPv6 side, when it has an IPv6 gateway (a dual-stack network's, or an
   * IPv6-only network's): the host port has that address too, and the table's IPv6 twin
   * (`table ip6`) the same rules for it.
   */
  v6?: { gateway: string; cidr: string };
  /** Floating addresses bound to its pods here: 1:1 NAT (floating_nft.ts); absent: none. */
  floating?: Floating[];
  /** The IPv6 ones, bound to its pods' IPv6 addresses (in the ip6 table); absent: none. */
  floating6?: Floating[];
}

/** A network as one family's table sees it: that family's gateway and CIDR. */
type FamilyNet = HostNet & { gateway: string; cidr: string };

/** The networks with an IPv4 side. */
function v4Nets(nets: HostNet[]): FamilyNet[] {
  return nets.filter((n): n is FamilyNet => n.gateway !== undefined && n.cidr !== undefined);
}

/** The table of ours; nothing else of the node's nftables is touched. */
export const NFT_TABLE = "knitter";

/**
 * The bits of the packet and conntrack marks that are Knitter's: a host port's connections carry
 * their network's number there (markOf), and nothing else of either mark is touched, so other
 * parts of the node keep theirs (kube-proxy's 0x4000 and 0x8000, say). A node whose other software
 * uses these bits (Calico's default mask is this one) needs another mask here: contiguous, and wide
 * enough for the node's network numbers (a network beyond it gets no host port). Replies carry the
 * mark of what they answer, which picks their network's routing table: two tenants' networks may
 * have the same CIDR on one node.
 */
export const MARK_MASK = 0xffff0000;
const MARK_SHIFT = 31 - Math.clz32(MARK_MASK & -MARK_MASK);
/** The other bits of the marks, kept as they are. */
const MARK_KEEP = ~MARK_MASK >>> 0;
/** The largest network number the mask holds. */
export const MAX_MARKED = MARK_MASK >>> MARK_SHIFT;

/** Routing tables of egress networks: this block plus the network's number. */
export const TABLE_BASE = 0x6b6e0000;

/** Priority of the policy routing rules (`ip rule`), before the main table's 32766. */
export const RULE_PRIORITY = 2000;

/** The name of the host port of network number `n`: short, stable, within 15 characters. */
export function hostPortName(n: number): string {
  return `${HOST_PORT_PREFIX}${n}`;
}

/** Host ports are `kh` and the network's number. */
export const HOST_PORT_PREFIX = "kh";

/**
 * The host ends of the pods' veths (interfaces/ip_links.ts: `kn` and 13 hex digits). On the
 * userspace datapath Open vSwitch reads them through packet sockets, and the node's kernel sees
 * the same frames: with an address of the node on a pod subnet (the host port's gateway) it would
 * answer a pod's ARP for the gateway with the veth's MAC, and with forwarding on it would route
 * what a pod sends to that MAC, past the flows. The kernel drops all of it (the sockets have their
 * copy by then).
 */
export const POD_VETHS = "kn*";

/** Network number `n` in the marks' bits. */
export function markOf(n: number): number {
  return (n << MARK_SHIFT) >>> 0;
}

/** The routing table of egress network number `n`. */
export function tableOf(n: number): number {
  return TABLE_BASE + n;
}

const hex = (v: number) => `0x${v.toString(16).padStart(8, "0")}`;

function set(names: string[]): string {
  return `{ ${names.map((n) => `"${n}"`).join(", ")} }`;
}

/** The gateways' addresses, each once (two egress networks may share one). */
function gateways(nets: FamilyNet[]): string {
  return `{ ${[...new Set(nets.map((n) => n.gateway))].join(", ")} }`;
}

/** Every host port, known to the table or not: one it does not know of is closed. */
const ANY_HOST_PORT = `"${HOST_PORT_PREFIX}*"`;

/** Link-local addresses: the node's own (cloud metadata and the like), never a pod's way out. */
export const LINK_LOCAL = "169.254.0.0/16";

/** IPv6's link-local addresses: never a pod's way out either. */
export const LINK_LOCAL6 = "fe80::/10";

/** What the IPv4 table and its IPv6 twin spell differently. */
interface Family {
  /** The table's family, and the address keyword of its rules. */
  name: "ip" | "ip6";
  redirect: string;
  linkLocal: string;
  /**
   * Neighbour discovery between the node and the pods: untracked by conntrack (no mark, no
   * state), so let through before the rules that need either (IPv6 only: ARP has a table).
   */
  neighbours: string[];
}

const V4: Family = {
  name: "ip",
  redirect: "icmp type redirect",
  linkLocal: LINK_LOCAL,
  neighbours: [],
};
const V6: Family = {
  name: "ip6",
  redirect: "icmpv6 type nd-redirect",
  linkLocal: LINK_LOCAL6,
  neighbours: [
    `iifname ${ANY_HOST_PORT} icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept`,
  ],
};

/** The IPv6 side of the networks that have one, as networks of the IPv6 table (its bindings). */
function v6Nets(nets: HostNet[]): FamilyNet[] {
  return nets.flatMap((n) =>
    n.v6 ? [{ ...n, gateway: n.v6.gateway, cidr: n.v6.cidr, floating: n.floating6 }] : []
  );
}

/**
 * The whole table as `nft -f` text: created if missing, emptied and filled in one transaction (no
 * moment without rules). `uplinks` are the interfaces egress leaves through (host_ports.ts),
 * `uplinks6` those of IPv6 egress. With no host port the table still closes every `kh*` port and
 * the pods' veths. The networks with an IPv6 side get the same rules for it in an `ip6` table of
 * the same name (none without one: their host ports have no IPv6).
 */
export function hostRuleset(nets: HostNet[], uplinks: string[] = [], uplinks6 = uplinks): string {
  const head = `table ip ${NFT_TABLE} {}\ndelete table ip ${NFT_TABLE}\n` +
    `table arp ${NFT_TABLE} {}\ndelete table arp ${NFT_TABLE}\n` +
    `table ip6 ${NFT_TABLE} {}\ndelete table ip6 ${NFT_TABLE}\n`;
  const [four, six] = [v4Nets(nets), v6Nets(nets)];
  const lines = [
    ...ipTable(four, uplinks, V4),
    `table arp ${NFT_TABLE} {`,
    ...chain("input", "filter hook input priority filter", arpRules(four)),
    "}",
    ...(six.length > 0 ? ipTable(six, uplinks6, V6) : []),
  ];
  return head + lines.join("\n") + "\n";
}

/** The table of one family (`ip` or `ip6`). */
function ipTable(nets: FamilyNet[], uplinks: string[], fam: Family): string[] {
  return [
    `table ${fam.name} ${NFT_TABLE} {`,
    ...chain("raw", "filter hook prerouting priority raw", rawRules(nets, fam)),
    ...chain("mangle", "filter hook prerouting priority mangle", markRules(nets, fam)),
    ...(hasFloating(nets)
      ? chain("prerouting", "nat hook prerouting priority dstnat", dnatRules(nets, fam))
      : []),
    ...chain("input", "filter hook input priority filter", inputRules(nets, fam)),
    ...chain("output", "filter hook output priority filter", outputRules(nets, fam)),
    ...chain("forward", "filter hook forward priority filter", forwardRules(nets, uplinks, fam)),
    ...chain("postrouting", "nat hook postrouting priority srcnat", natRules(nets, uplinks, fam)),
    "}",
  ];
}

function chain(name: string, hook: string, rules: string[]): string[] {
  return [
    `  chain ${name} {`,
    `    type ${hook}; policy accept;`,
    ...rules.map((r) => `    ${r}`),
    "  }",
  ];
}

/**
 * The pods' veths shut; each network's connections in its own conntrack zone: two tenants' pods
 * may have the same address. The zone is of the original direction only, as the replies of egress
 * arrive on the uplink, where nothing tells their network before conntrack has found it; so a
 * packet from a host port is also matched against the reply direction of every other connection
 * (markRules stops that).
 */
function rawRules(nets: FamilyNet[], fam: Family): string[] {
  return [
    `iifname "${POD_VETHS}" drop`,
    ...nets.map((n) => `iifname "${n.port}" ct original zone set ${n.number}`),
    // What the fabric sends to an advertised network (their CIDRs never overlap: the manager).
    ...nets.filter((n) => n.advertise).map((n) =>
      `iifname != ${ANY_HOST_PORT} ${fam.name} daddr ${n.cidr} ct original zone set ${n.number}`
    ),
    ...floatingZoneRules(nets, ANY_HOST_PORT, fam.name),
  ];
}

/**
 * Every connection of a network carries its mark: set when it starts from the host port (egress)
 * or towards it (intoRules: hostPort, probes), never changed after. What comes from a host port
 * must belong to a connection of its own network: a packet that matches another tenant's
 * connection (its reply direction, see rawRules), or the node's own, is dropped. The packet mark
 * follows the connection's: replies find the network's routing table.
 */
function markRules(nets: HostNet[], fam: Family): string[] {
  return [
    ...fam.neighbours,
    ...nets.map((n) => `iifname "${n.port}" ct state new ${setCtMark(n)}`),
    ...floatingMarkRules(nets, ANY_HOST_PORT, setCtMark, fam.name),
    ...nets.map((n) => `iifname "${n.port}" ${ctMarkIs(n, "!=")} drop`),
    ...nets.map((n) =>
      `${ctMarkIs(n, "==")} meta mark set meta mark & ${hex(MARK_KEEP)} | ${hex(markOf(n.number))}`
    ),
  ];
}

/** Floating addresses to their pods (floating_nft.ts); nothing else is DNATed here. */
function dnatRules(nets: HostNet[], fam: Family): string[] {
  return floatingDnatRules(nets, ANY_HOST_PORT, fam.name);
}

/** The network's number into the conntrack mark's bits of ours, the others kept. */
function setCtMark(n: HostNet): string {
  return `ct mark set ct mark & ${hex(MARK_KEEP)} | ${hex(markOf(n.number))}`;
}

function ctMarkIs(n: HostNet, op: "==" | "!="): string {
  return `ct mark & ${hex(MARK_MASK)} ${op} ${hex(markOf(n.number))}`;
}

/** New connections into a host port (forward: hostPort's DNAT; output: the node's probes). */
function intoRules(nets: HostNet[]): string[] {
  return nets.map((n) => `oifname "${n.port}" ct state new ${setCtMark(n)}`);
}

/**
 * Pods never open connections to the node itself; replies to the node's own (probes) pass. The
 * gateways' addresses are the node's on the networks only: not reached from anywhere else.
 */
function inputRules(nets: FamilyNet[], fam: Family): string[] {
  return [
    ...fam.neighbours,
    `iifname ${ANY_HOST_PORT} ct state established,related ct direction reply accept`,
    `iifname ${ANY_HOST_PORT} drop`,
    ...(nets.length ? [`iifname != "lo" ${fam.name} daddr ${gateways(nets)} drop`] : []),
  ];
}

/** The node tells pods of no other way (a redirect would send them past the flows). */
function outputRules(nets: HostNet[], fam: Family): string[] {
  return [...intoRules(nets), `oifname ${ANY_HOST_PORT} ${fam.redirect} drop`];
}

/**
 * Never from one host port to another (no pod reaches another network, or tenant, through the
 * node). Out of a network: an egress network's pods to the uplinks, not to link-local addresses,
 * the replies of connections that came in by DNAT (hostPort) and, advertised, of those routed in
 * (the mark says they are the network's own). Into a network: the replies of its egress, DNAT to
 * one of its own pods and, advertised, what the fabric routes to its CIDR (from any interface but
 * the host ports: no other network's pods). Established connections get no pass of their own:
 * a network whose egress is turned off is cut off at once.
 */
function forwardRules(nets: FamilyNet[], uplinks: string[], fam: Family): string[] {
  const egress = uplinks.length ? nets.filter((n) => n.egress).map((n) => n.port) : [];
  const access = nets.filter((n) => n.hostAccess);
  const advertised = nets.filter((n) => n.advertise);
  return [
    `iifname ${ANY_HOST_PORT} oifname ${ANY_HOST_PORT} drop`,
    ...intoRules(nets),
    ...(egress.length
      ? [
        `iifname ${set(egress)} oifname ${
          set(uplinks)
        } ${fam.name} daddr != ${fam.linkLocal} accept`,
      ]
      : []),
    ...(access.length
      ? [`iifname ${set(access.map((n) => n.port))} ct direction reply ct status dnat accept`]
      : []),
    ...(advertised.length
      ? [`iifname ${set(advertised.map((n) => n.port))} ct direction reply accept`]
      : []),
    ...floatingOutRules(nets, ANY_HOST_PORT, { fam: fam.name, linkLocal: fam.linkLocal }),
    `iifname ${ANY_HOST_PORT} drop`,
    ...(egress.length
      ? [`iifname ${set(uplinks)} oifname ${set(egress)} ct direction reply accept`]
      : []),
    ...access.map((n) =>
      `oifname "${n.port}" ${fam.name} daddr ${n.cidr} ct direction original ct status dnat accept`
    ),
    ...advertised.map((n) =>
      `oifname "${n.port}" ${fam.name} daddr ${n.cidr} ct direction original accept`
    ),
    ...floatingInRules(nets, fam.name),
    `oifname ${ANY_HOST_PORT} drop`,
  ];
}

/** Egress leaves with the node's address on the uplink. */
function natRules(nets: HostNet[], uplinks: string[], fam: Family): string[] {
  const egress = nets.filter((n) => n.egress).map((n) => n.port);
  // A pod with a floating address leaves with it, not with the node's (the first NAT rule wins).
  const floating = floatingSnatRules(nets, ANY_HOST_PORT, fam.name);
  if (!egress.length || !uplinks.length) return floating;
  return [...floating, `iifname ${set(egress)} oifname ${set(uplinks)} masquerade`];
}

/**
 * The pods' veths shut; the gateways' addresses are answered for only on host ports (never on the
 * underlay, where a tenant's gateway could take the address of the LAN's router).
 */
function arpRules(nets: FamilyNet[]): string[] {
  return [
    `iifname "${POD_VETHS}" drop`,
    ...(nets.length
      ? [`iifname != ${ANY_HOST_PORT} arp operation request arp daddr ip ${gateways(nets)} drop`]
      : []),
  ];
}
