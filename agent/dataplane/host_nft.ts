/**
 * The node's kernel side of the host ports (agent/README.md, "Egress and the node"), as data: the
 * one nftables table the agent owns, rebuilt whole and atomically by `nft -f`, and the marks and
 * routing tables of egress networks. Pure: host_ports.ts applies it.
 *
 * @module
 */

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
}

/** The table of ours; nothing else of the node's nftables is touched. */
export const NFT_TABLE = "knitter";

/**
 * Marks, conntrack marks and routing tables of egress networks: this block plus the network's
 * number. Replies to what a network sent out carry its conntrack mark, which picks its routing
 * table: two tenants' networks may have the same CIDR on one node.
 */
export const MARK_BASE = 0x6b6e0000;
const MARK_MASK = 0xffff0000;

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

export function markOf(n: number): number {
  return MARK_BASE + n;
}

const hex = (v: number) => `0x${v.toString(16).padStart(8, "0")}`;

function set(names: string[]): string {
  return `{ ${names.map((n) => `"${n}"`).join(", ")} }`;
}

/**
 * Our tables as `nft -f` text: created if missing, emptied and filled in one transaction (no
 * moment without rules). With no host port, only the guard of the pods' veths is left.
 */
export function hostRuleset(nets: HostNet[]): string {
  const head = `table ip ${NFT_TABLE} {}\ndelete table ip ${NFT_TABLE}\n` +
    `table arp ${NFT_TABLE} {}\ndelete table arp ${NFT_TABLE}\n`;
  // Once the node has been on a network, forwarding is on (other parts of a node need it too):
  // the pods' veths stay shut to the kernel from then on.
  const guard = [
    `table arp ${NFT_TABLE} {`,
    "  chain input {",
    "    type filter hook input priority filter; policy accept;",
    `    iifname "${POD_VETHS}" drop`,
    "  }",
    "}",
  ];
  if (nets.length === 0) {
    return head + [`table ip ${NFT_TABLE} {`, ...rawChain([]), "}", ...guard].join("\n") + "\n";
  }
  const all = set(nets.map((n) => n.port));
  const egress = nets.filter((n) => n.egress);
  const access = nets.filter((n) => n.hostAccess);
  const lines = [
    `table ip ${NFT_TABLE} {`,
    ...rawChain(nets),
    // What an egress network sends is marked (its table routes the replies back to it).
    "  chain mangle {",
    "    type filter hook prerouting priority mangle; policy accept;",
    ...egress.map((n) =>
      `    iifname "${n.port}" meta mark set ${hex(markOf(n.number))} ct mark set meta mark`
    ),
    `    iifname != ${all} ct mark & ${hex(MARK_MASK)} == ${hex(MARK_BASE)} meta mark set ct mark`,
    "  }",
    // Pods never open connections to the node itself; replies (probes) come back.
    "  chain input {",
    "    type filter hook input priority filter; policy accept;",
    `    iifname ${all} ct state established,related accept`,
    `    iifname ${all} drop`,
    "  }",
    "  chain forward {",
    "    type filter hook forward priority filter; policy accept;",
    // Never from one network into another (or another tenant's) through the node.
    `    iifname ${all} oifname ${all} drop`,
    `    iifname ${all} ct state established,related accept`,
    ...(egress.length ? [`    iifname ${set(egress.map((n) => n.port))} accept`] : []),
    `    iifname ${all} drop`,
    `    oifname ${all} ct state established,related accept`,
    // hostPort: portmap's DNAT from outside to a pod of a hostAccess network.
    ...(access.length
      ? [`    oifname ${set(access.map((n) => n.port))} ct status dnat accept`]
      : []),
    `    oifname ${all} drop`,
    "  }",
    "  chain postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    ...(egress.length
      ? [`    iifname ${set(egress.map((n) => n.port))} oifname != ${all} masquerade`]
      : []),
    "  }",
    "}",
    ...guard,
  ];
  return head + lines.join("\n") + "\n";
}

/**
 * Before conntrack: the pods' veths shut, and each host port's conntrack zone. The zone is of the
 * original direction only: a network's connections are its own (two tenants' pods may have the
 * same address), their replies are found in the default zone.
 */
function rawChain(nets: HostNet[]): string[] {
  return [
    "  chain raw {",
    "    type filter hook prerouting priority raw; policy accept;",
    `    iifname "${POD_VETHS}" drop`,
    ...nets.map((n) => `    iifname "${n.port}" ct original zone set ${n.number}`),
    "  }",
  ];
}
