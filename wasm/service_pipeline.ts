/**
 * The service part of the br-int pipeline as data (../agent/PIPELINE.md, "Services"): one table,
 * the priorities and kinds of its flows, and the select groups. Kept apart from pipeline.ts (which
 * it extends) so that a node without services has exactly the flows it had before them.
 *
 * @module
 */
import { TABLE } from "./pipeline.ts";

/**
 * SERVICE: the table a new connection to a service port goes through after conntrack's NAT lookup;
 * HAIRPIN: a backend's connection to its own service, source-NATed to the VIP (and its replies).
 */
export const SERVICE_TABLE = { SERVICE: 22, HAIRPIN: 23 } as const;

/**
 * A network's hairpin connections are source-NATed in conntrack zone this + the network's zone: a
 * connection that is NATed twice needs a second zone (its first, the network's, holds the DNAT).
 * Networks whose zone is not below it get no hairpin flows (PIPELINE.md, "Services").
 */
export const HAIRPIN_ZONE_BASE = 0x8000;

export const SERVICE_TABLES = [
  {
    id: SERVICE_TABLE.SERVICE,
    name: "SERVICE",
    purpose:
      "connections to a VIP after conntrack: a new one to its port's select group, a known one " +
      "(already translated) to NEXT_HOP",
    default: "drop",
  },
  {
    id: SERVICE_TABLE.HAIRPIN,
    name: "HAIRPIN",
    purpose:
      "a backend's connection to its own VIP after its source NAT (delivered back to it), and its " +
      "replies after their un-NAT",
    default: "drop",
  },
] as const;

/** Priorities of the service flows (one meaning each, none shared with PRIORITY's or ACL's). */
export const SERVICE_PRIORITY = {
  /** NEXT_HOP: a connection translated to the backend that opened it: source NAT to the VIP. */
  HAIRPIN: 135,
  /** HAIRPIN: a reply in the hairpin zone (un-SNATed): un-DNATed in the network's zone. */
  HAIRPIN_UNDO: 133,
  /** HAIRPIN: from the VIP to a local backend (both NATs done): back out of the port it came in. */
  HAIRPIN_DELIVER: 132,
  /** ARP: a local backend's packet to a VIP of its network: first the hairpin zone's un-SNAT. */
  HAIRPIN_REPLY: 131,
  /**
   * ARP (from a client of the VIP's network) and NEXT_HOP (routed from another network): a service
   * port on a VIP, into conntrack (NAT) and on to SERVICE.
   */
  VIP: 130,
  /** ARP: anything else addressed to a VIP: dropped (a VIP answers its ports only). */
  VIP_GUARD: 125,
  /**
   * ARP: a local backend's reply to its gateway (to a routed client), un-NATed, then routed (above
   * REPLY, which would send it to FORWARD, past the router).
   */
  REPLY_ROUTED: 109,
  /** ARP (from a local backend) and FORWARD (from outside): a backend's reply, un-NATed. */
  REPLY: 108,
  /** SERVICE: a new connection to a service port: its select group. */
  NEW: 100,
  /** SERVICE: a connection conntrack knows: translated already, to NEXT_HOP. */
  TRACKED: 90,
  /** HAIRPIN: not a hairpin reply after all: back to ARP, on to the VIP's own flows. */
  HAIRPIN_AGAIN: 87,
} as const;

/** Table and priority of each kind of service flow, by builder name. */
export const SERVICE_KINDS = {
  serviceVip: { table: TABLE.ARP, priority: SERVICE_PRIORITY.VIP },
  serviceVipGuard: { table: TABLE.ARP, priority: SERVICE_PRIORITY.VIP_GUARD },
  serviceReplyLocal: { table: TABLE.ARP, priority: SERVICE_PRIORITY.REPLY },
  serviceReplyIn: { table: TABLE.FORWARD, priority: SERVICE_PRIORITY.REPLY },
  serviceNew: { table: SERVICE_TABLE.SERVICE, priority: SERVICE_PRIORITY.NEW },
  serviceTracked: { table: SERVICE_TABLE.SERVICE, priority: SERVICE_PRIORITY.TRACKED },
  serviceVipRouted: { table: TABLE.NEXT_HOP, priority: SERVICE_PRIORITY.VIP },
  serviceReplyRouted: { table: TABLE.ARP, priority: SERVICE_PRIORITY.REPLY_ROUTED },
  hairpinSnat: { table: TABLE.NEXT_HOP, priority: SERVICE_PRIORITY.HAIRPIN },
  hairpinReply: { table: TABLE.ARP, priority: SERVICE_PRIORITY.HAIRPIN_REPLY },
  hairpinUndo: { table: SERVICE_TABLE.HAIRPIN, priority: SERVICE_PRIORITY.HAIRPIN_UNDO },
  hairpinDeliver: { table: SERVICE_TABLE.HAIRPIN, priority: SERVICE_PRIORITY.HAIRPIN_DELIVER },
  hairpinAgain: { table: SERVICE_TABLE.HAIRPIN, priority: SERVICE_PRIORITY.HAIRPIN_AGAIN },
  /** ARP: a neighbour solicitation for an IPv6 VIP, answered (above VIP_GUARD: NUD is unicast). */
  serviceNd: { table: TABLE.ARP, priority: SERVICE_PRIORITY.VIP },
} as const;

/**
 * A service's group ids: its node-local id × this + the index of the port (at most this many
 * ports per service, the manager's MAX_SERVICE_PORTS).
 */
export const GROUPS_PER_SERVICE = 16;

/** How a compiled line that is a select group, not a flow, begins. */
export const GROUP_PREFIX = "group_id=";

/** Splits the compiler's lines into flows and groups (the groups come last, sorted). */
export function splitGroups(lines: string[]): { flows: string[]; groups: string[] } {
  const at = lines.findIndex((l) => l.startsWith(GROUP_PREFIX));
  return at < 0
    ? { flows: lines, groups: [] }
    : { flows: lines.slice(0, at), groups: lines.slice(at) };
}
