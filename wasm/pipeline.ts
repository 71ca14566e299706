/**
 * The OpenFlow pipeline of br-int as data: tables (with their default flows), priorities, the table
 * and priority of every kind of flow, the cookie layout and the match and action texts every engine
 * writes the same way. The one source of these facts: the compiler (assembly/, built into both
 * engines) reads constants that build.ts generates from it, the trace (flow_trace.ts) reads this
 * module, and pipeline_test.ts checks ../agent/PIPELINE.md against it.
 *
 * @module
 */

/** Table numbers by name. */
export const TABLE = {
  CLASSIFY: 0,
  SPOOF: 10,
  ARP: 20,
  ARP_REPLY: 21,
  ROUTE: 25,
  NEXT_HOP: 26,
  FORWARD: 30,
} as const;

/** The tables of br-int, in pipeline order, with what each does and what its default flow does. */
export const FLOW_TABLES = [
  {
    id: TABLE.CLASSIFY,
    name: "CLASSIFY",
    purpose: "ingress port → network in reg0, source port cookie in reg1 (0 from outside)",
    default: "drop",
  },
  {
    id: TABLE.SPOOF,
    name: "SPOOF",
    purpose: "a local port may only send from its own MAC and IPs (ARP, IPv4, IPv6, ND DAD)",
    default: "drop",
  },
  {
    id: TABLE.ARP,
    name: "ARP",
    purpose:
      "ARP requests for known IPv4s and the gateway: answering MAC into xreg1, on to ARP_REPLY; " +
      "the gateway's echo replies; vet ND",
    default: `goto_table:${TABLE.FORWARD}`,
  },
  {
    id: TABLE.ARP_REPLY,
    name: "ARP_REPLY",
    purpose:
      "shared flows turn the ARP request (or the gateway's neighbour solicitation) into the " +
      "reply from the MAC in xreg1, in place",
    default: "the shared reply",
  },
  {
    id: TABLE.ROUTE,
    name: "ROUTE",
    purpose:
      "traffic a pod sent to its gateway, by reg0 + nw_dst (longest prefix): rewritten onto the " +
      "destination network (gateway MAC as source, reg0, TTL), on to NEXT_HOP (or FORWARD for a " +
      "static route's next hop)",
    default: "drop",
  },
  {
    id: TABLE.NEXT_HOP,
    name: "NEXT_HOP",
    purpose: "routed traffic by reg0 + nw_dst: the destination port's MAC as eth_dst",
    default: "drop",
  },
  {
    id: TABLE.FORWARD,
    name: "FORWARD",
    purpose:
      "unicast by reg0 + dl_dst, flooding, and nothing from outside back out; the gateway MAC dropped",
    default: "drop",
  },
] as const;

/** Priorities, one meaning each across every table (see ../agent/PIPELINE.md). */
export const PRIORITY = {
  /**
   * The gateway's own address in ROUTE, above every route: what the gateway does not answer
   * itself (it answers pings) gets "port unreachable" from the router's slow path.
   */
  SELF: 1100,
  /**
   * A route in ROUTE: this plus twice its prefix length, plus one for a static route (the longest
   * prefix wins; a static route wins over a connected network of the same length).
   */
  ROUTE: 1000,
  /**
   * The host port's catch-all in ROUTE: IPv4 to the gateway MAC that no route takes goes to the
   * node (egress, replies to the node), below every route (a /0 route is 1000).
   */
  HOST: 500,
  /**
   * A routed packet larger than its destination network's MTU, in FORWARD: to the slow path
   * ("fragmentation needed"), above every other flow there (a router checks the size first).
   */
  OVERSIZE: 140,
  /** A router solicitation in ARP: to the slow path (the gateway's advertisement answers it). */
  SOLICIT: 122,
  /** The gateway's answer to neighbour solicitations for its address, before EXCEPTION's vetting. */
  GATEWAY: 120,
  /** Exceptions to a specific flow: the owner's own ARP requests, vetted ND. */
  EXCEPTION: 110,
  /** Network-wide drops of what EXCEPTION did not allow (ND). */
  GUARD: 105,
  /** A filtered mirror's copy of what a local port sends, before its classification (CLASSIFY). */
  MIRROR: 101,
  /** One port or endpoint: classification, spoof allowances, ARP replies, local unicast. */
  SPECIFIC: 100,
  /** Flooding of traffic from outside (tunnel, physnet) to local ports only. */
  FLOOD_IN: 90,
  /** Anything else from outside: dropped, so nothing goes back out. */
  FROM_OUTSIDE: 80,
  /** Unicast to a remote port. */
  REMOTE: 70,
  /** IPv4 to the gateway MAC of a routed network (in ARP, below the gateway's own answers). */
  ROUTED: 60,
  /** Flooding of traffic from a local port. */
  FLOOD: 50,
  /** Unknown unicast from a local port (vlan and flat networks: to the physnet). */
  UNKNOWN: 10,
  /** What no route takes in ROUTE: "unreachable" from the router's slow path, above the drop. */
  UNROUTED: 1,
  /** Table default. */
  DEFAULT: 0,
} as const;

/** Where the flows of one kind go: table and priority. */
export interface FlowKind {
  readonly table: number;
  readonly priority: number;
}

/**
 * Every kind of flow by the name of the builder that makes it (the same name in both engines; the
 * table of ../agent/PIPELINE.md): its table and priority. The tables' default flows are in
 * FLOW_TABLES.
 */
export const FLOW_KINDS = {
  classifyLocal: { table: TABLE.CLASSIFY, priority: PRIORITY.SPECIFIC },
  classifyTunnel: { table: TABLE.CLASSIFY, priority: PRIORITY.SPECIFIC },
  classifyPhysnet: { table: TABLE.CLASSIFY, priority: PRIORITY.SPECIFIC },
  classifyHost: { table: TABLE.CLASSIFY, priority: PRIORITY.SPECIFIC },
  spoofArp: { table: TABLE.SPOOF, priority: PRIORITY.SPECIFIC },
  spoofDad: { table: TABLE.SPOOF, priority: PRIORITY.SPECIFIC },
  spoofIpv4: { table: TABLE.SPOOF, priority: PRIORITY.SPECIFIC },
  spoofIpv6: { table: TABLE.SPOOF, priority: PRIORITY.SPECIFIC },
  spoofRouted: { table: TABLE.SPOOF, priority: PRIORITY.SPECIFIC },
  arpReply: { table: TABLE.ARP, priority: PRIORITY.SPECIFIC },
  arpReplyShared: { table: TABLE.ARP_REPLY, priority: PRIORITY.DEFAULT },
  gatewayPing: { table: TABLE.ARP, priority: PRIORITY.SPECIFIC },
  gatewayNd: { table: TABLE.ARP, priority: PRIORITY.GATEWAY },
  ndReplyShared: { table: TABLE.ARP_REPLY, priority: PRIORITY.DEFAULT },
  arpOwner: { table: TABLE.ARP, priority: PRIORITY.EXCEPTION },
  ndSolicit: { table: TABLE.ARP, priority: PRIORITY.EXCEPTION },
  ndAdvert: { table: TABLE.ARP, priority: PRIORITY.EXCEPTION },
  ndGuard: { table: TABLE.ARP, priority: PRIORITY.GUARD },
  routeIn: { table: TABLE.ARP, priority: PRIORITY.ROUTED },
  routeTo: { table: TABLE.ROUTE, priority: PRIORITY.ROUTE },
  hostExit: { table: TABLE.ROUTE, priority: PRIORITY.HOST },
  routeMiss: { table: TABLE.ROUTE, priority: PRIORITY.UNROUTED },
  gatewaySelf: { table: TABLE.ROUTE, priority: PRIORITY.SELF },
  tooBig: { table: TABLE.FORWARD, priority: PRIORITY.OVERSIZE },
  raSolicit: { table: TABLE.ARP, priority: PRIORITY.SOLICIT },
  gatewayLinkGuard: { table: TABLE.ARP, priority: PRIORITY.GATEWAY },
  nextHop: { table: TABLE.NEXT_HOP, priority: PRIORITY.SPECIFIC },
  forwardLocal: { table: TABLE.FORWARD, priority: PRIORITY.SPECIFIC },
  gatewayDrop: { table: TABLE.FORWARD, priority: PRIORITY.SPECIFIC },
  forwardHost: { table: TABLE.FORWARD, priority: PRIORITY.SPECIFIC },
  hostGuard: { table: TABLE.FORWARD, priority: PRIORITY.EXCEPTION },
  floodIn: { table: TABLE.FORWARD, priority: PRIORITY.FLOOD_IN },
  fromOutside: { table: TABLE.FORWARD, priority: PRIORITY.FROM_OUTSIDE },
  forwardRemote: { table: TABLE.FORWARD, priority: PRIORITY.REMOTE },
  flood: { table: TABLE.FORWARD, priority: PRIORITY.FLOOD },
  unknownUnicast: { table: TABLE.FORWARD, priority: PRIORITY.UNKNOWN },
  inactivePort: { table: TABLE.CLASSIFY, priority: PRIORITY.SPECIFIC },
  mirrorOut: { table: TABLE.CLASSIFY, priority: PRIORITY.MIRROR },
} as const satisfies Record<string, FlowKind>;

/**
 * A flow's cookie is `network << COOKIE_NETWORK_SHIFT | port`: the node-local network number (0 for
 * the pipeline's own flows) and the node-local port number (0 for a network's flows), so that the
 * flows of one port or one network can be found by cookie mask.
 */
export const COOKIE_NETWORK_SHIFT = 32;

/** Match texts, spelled as dump-flows prints them. */
export const MATCH = {
  /** Multicast and broadcast destinations (the group bit). */
  MCAST: "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
  /** Frames without a VLAN tag. */
  UNTAGGED: "vlan_tci=0x0000/0x1fff",
  /** IPv6 link-local sources and ND targets. */
  LINK_LOCAL: "fe80::/10",
  /** The MAC an ND option carries when there is none. */
  NO_LL: "00:00:00:00:00:00",
} as const;

/**
 * The reply to any request an ARP flow let through, back out of the port it came in on: to the
 * sender, from the MAC in xreg1 (its low 48 bits), with the sender and target IPs swapped through
 * reg4. Spelled as dump-flows prints it (`xreg1` is OXM_OF_PKT_REG1, `reg4` NXM_NX_REG4).
 */
export const ARP_REPLY_ACTIONS = [
  "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
  "move:OXM_OF_PKT_REG1[0..47]->NXM_OF_ETH_SRC[]",
  "set_field:2->arp_op",
  "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]",
  "move:OXM_OF_PKT_REG1[0..47]->NXM_NX_ARP_SHA[]",
  "move:NXM_OF_ARP_TPA[]->NXM_NX_REG4[]",
  "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]",
  "move:NXM_NX_REG4[]->NXM_OF_ARP_SPA[]",
  "IN_PORT",
].join(",");

/**
 * The gateway's answer to an ICMP echo request for its address, back out of the port it came in
 * on: to the sender, from the network's gateway MAC and address, as an echo reply (type 0; Open
 * vSwitch fixes the IPv4 and ICMP checksums as it rewrites). The texts around the gateway's MAC
 * and address, spelled as dump-flows prints them.
 */
export const GATEWAY_PING = {
  BEFORE_MAC: "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:",
  BEFORE_IP: "->eth_src,move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],set_field:",
  AFTER_IP: "->ip_src,set_field:0->icmp_type,IN_PORT",
  /** The same for an IPv6 gateway: ICMPv6 echo reply (type 129). */
  BEFORE_IP6: "->eth_src,move:NXM_NX_IPV6_SRC[]->NXM_NX_IPV6_DST[],set_field:",
  AFTER_IP6: "->ipv6_src,set_field:129->icmpv6_type,IN_PORT",
} as const;

/**
 * The neighbour advertisement that answers a solicitation for an IPv6 gateway, back out of the port
 * it came in on (the gateway's flow in ARP stashed the gateway MAC in xreg1 and made the packet an
 * advertisement, type 136, so that the target link-layer address may be set): to the sender, from
 * the MAC in xreg1 and the target address, flags router, solicited and override (0xe0000000, as
 * dump-flows prints it: in decimal), the option turned
 * into the target link-layer address holding the MAC in xreg1.
 */
export const ND_REPLY_ACTIONS = [
  "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
  "move:OXM_OF_PKT_REG1[0..47]->NXM_OF_ETH_SRC[]",
  "move:NXM_NX_IPV6_SRC[]->NXM_NX_IPV6_DST[]",
  "move:NXM_NX_ND_TARGET[]->NXM_NX_IPV6_SRC[]",
  "set_field:3758096384->nd_reserved",
  "set_field:2->nd_options_type",
  "move:OXM_OF_PKT_REG1[0..47]->NXM_NX_ND_TLL[]",
  "IN_PORT",
].join(",");

/**
 * A network's DSCP marking, in front of `goto_table:20` in the SPOOF flows that let a pod's IPv4
 * and IPv6 through, duplicate address detection included (`set_field:46->ip_dscp,`): every IP packet a pod of the network sends carries
 * the network's DSCP from then on. `ip_dscp` is the six DSCP bits alone, so the two ECN bits stay
 * as the pod set them; dump-flows prints `mod_nw_tos` the same way.
 */
export const DSCP_MARK = { BEFORE: "set_field:", AFTER: "->ip_dscp," } as const;

/**
 * Why a flow hands a packet to the agent's router slow path (../agent/punt/, PIPELINE.md "Router
 * errors"): the `controller` action's flows load one of these into the low 8 bits of reg5 (a
 * too-big packet the egress MTU into its high 16). A TTL that runs out needs none: `dec_ttl` sends
 * it up with its own reason (invalid TTL). The flow's cookie names the network whose gateway answers.
 */
export const PUNT = {
  /** A routed packet no route takes: destination unreachable (net; ICMPv6 no route). */
  UNREACHABLE: 1,
  /** A packet for the gateway's own address that nothing answers: port unreachable. */
  GATEWAY: 2,
  /** A routed packet larger than the egress network's MTU: fragmentation needed / too big. */
  TOO_BIG: 3,
  /** A router solicitation on a network that sends router advertisements. */
  SOLICIT: 4,
} as const;

/** The register of {@link PUNT}, as flows write it. */
export const PUNT_REGISTER = "reg5";

/** The bit of the punt register where a route's `check_pkt_larger` puts its answer. */
export const PUNT_LARGER_BIT = "NXM_NX_REG5[0]";

/** The action that hands a packet up, as dump-flows prints it (the whole frame). */
export const PUNT_ACTION = "CONTROLLER:65535";
