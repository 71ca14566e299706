/**
 * The security group part of the br-int pipeline as data: two tables, their priorities, the kinds
 * of their flows and the registers they use. Kept apart from pipeline.ts (which it extends) so that
 * a node without security groups has exactly the flows it had before them. See
 * ../agent/PIPELINE.md, "Security groups".
 *
 * @module
 */
import { TABLE } from "./pipeline.ts";

/** The two tables a port with security groups sends its IP traffic through. */
export const ACL_TABLE = { EGRESS_ACL: 50, INGRESS_ACL: 51 } as const;

export const ACL_TABLES = [
  {
    id: ACL_TABLE.EGRESS_ACL,
    name: "EGRESS_ACL",
    purpose: "IP from a port with groups, tracked: replies and allowed new connections go on",
    default: "drop",
  },
  {
    id: ACL_TABLE.INGRESS_ACL,
    name: "INGRESS_ACL",
    purpose: "IP to a port with groups, tracked: replies and allowed new connections delivered",
    default: "drop",
  },
] as const;

/** Priorities of the security group flows (one meaning each, none shared with PRIORITY's). */
export const ACL_PRIORITY = {
  /** Tracked traffic of a known connection, and neighbour discovery: passes either ACL. */
  TRACKED: 115,
  /**
   * FORWARD: IP from the node (a network's host port), untracked: committed in the network's zone
   * and delivered past the ingress rules (the node reaches its pods, as Kubernetes lets it).
   */
  HOST_COMMIT: 106,
  /** FORWARD: IP from a local port with groups, not yet through EGRESS_ACL. */
  EGRESS_HOOK: 104,
  /** FORWARD: IP to a local port with groups, unless EGRESS_ACL found it established. */
  INGRESS_HOOK: 103,
  /** FORWARD: a new connection EGRESS_ACL allowed, to a port without groups or another node. */
  COMMIT: 102,
  /** One rule of one port. */
  RULE: 100,
} as const;

/** Table and priority of each kind of security group flow, by builder name. */
export const ACL_KINDS = {
  egressHook: { table: TABLE.FORWARD, priority: ACL_PRIORITY.EGRESS_HOOK },
  ingressHook: { table: TABLE.FORWARD, priority: ACL_PRIORITY.INGRESS_HOOK },
  aclCommit: { table: TABLE.FORWARD, priority: ACL_PRIORITY.COMMIT },
  hostCommit: { table: TABLE.FORWARD, priority: ACL_PRIORITY.HOST_COMMIT },
  egressTracked: { table: ACL_TABLE.EGRESS_ACL, priority: ACL_PRIORITY.TRACKED },
  egressRule: { table: ACL_TABLE.EGRESS_ACL, priority: ACL_PRIORITY.RULE },
  ingressTracked: { table: ACL_TABLE.INGRESS_ACL, priority: ACL_PRIORITY.TRACKED },
  ingressRule: { table: ACL_TABLE.INGRESS_ACL, priority: ACL_PRIORITY.RULE },
} as const;

/**
 * reg6 says where a packet is in the ACLs: 0 not tracked yet, 1 done (a known connection, or
 * committed), 2 a new connection EGRESS_ACL allowed and nobody committed yet. reg7 is the ofport
 * INGRESS_ACL delivers to. Both are scratch space no flow outside these sets or the hooks reads.
 */
export const ACL_REG = { STATE: "reg6", OUTPORT: "reg7", OUTPORT_FIELD: "NXM_NX_REG7[0..15]" };
export const ACL_STATE = { UNTRACKED: 0, DONE: 1, NEW_ALLOWED: 2 } as const;

/**
 * Connection tracking in a zone of the packet's networks (`zones` in assembly/acl.ts): an immediate number, the
 * same for the networks a router joins, so that tenants never share state but a routed connection
 * and its replies do.
 */
export function ctZone(zone: number): string {
  return `zone=${zone}`;
}

/** ICMPv6 types that pass both ACLs: router and neighbour solicitation and advertisement. */
export const ND_TYPES = [133, 134, 135, 136] as const;
