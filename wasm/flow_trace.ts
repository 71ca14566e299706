/**
 * What the pipeline of br-int does with one packet, in words: `knitctl trace`. The flows a packet
 * matched come either from the node's switch (Open vSwitch's `ofproto/trace`, read by
 * {@link parseOfprotoTrace}: live mode) or from the offline evaluator over the compiled flows
 * (flow_eval.ts: offline mode); {@link explainHop} turns them into the same steps either way:
 * table, flow, cookie and what it means, then where the packet goes (a local port, the tunnel to
 * another node, the physnet) or why it is dropped. The mapping is in ../agent/PIPELINE.md
 * ("Tracing a packet").
 *
 * @module
 */
import { GATEWAY_MAC_PREFIX } from "./flow_input.ts";
import { type EvalPacket, type ParsedFlow, parseFlowLine, parts } from "./flow_eval.ts";
import { parseDumpFlows } from "./flows.ts";
import { type FLOW_KINDS, FLOW_TABLES, MATCH, PRIORITY, TABLE } from "./pipeline.ts";
import { type ACL_KINDS, ACL_PRIORITY, ACL_REG, ACL_TABLE, ACL_TABLES } from "./acl_pipeline.ts";
import {
  type SERVICE_KINDS,
  SERVICE_PRIORITY,
  SERVICE_TABLE,
  SERVICE_TABLES,
} from "./service_pipeline.ts";

/** What a node knows that names the numbers in its flows. */
export interface TraceView {
  node: string;
  tunnelPort: number;
  networks: {
    id: number;
    /** tenant/name */
    label: string;
    type: "vxlan" | "vlan" | "flat";
    segmentId?: number;
    physnetPort?: number;
    physnet?: string;
    /** The network's gateway and its MAC (PIPELINE.md, "Distributed gateway"). */
    gateway?: string;
    gatewayMac?: string;
    /** A dual-stack network's IPv6 gateway, answered with the same MAC. */
    gateway6?: string;
    /** Its DSCP marking (PIPELINE.md, "DSCP marking"). */
    dscp?: number;
  }[];
  localPorts: { ofport: number; network: number; label: string; mac: string; ips: string[] }[];
  remotePorts: {
    network: number;
    mac: string;
    ips: string[];
    nodeIp: string;
    node?: string;
    label?: string;
  }[];
}

/** Where the packet enters br-int on this node. */
export type TraceIngress =
  | { kind: "port"; ofport: number }
  | { kind: "tunnel"; vni: number }
  | { kind: "physnet"; physnet: string; vlan?: number };

/** The destination as the manager knows it (knitctl fills it in): whose address it is. */
export interface TraceTarget {
  ip: string;
  owner?: { label: string; network: string; node?: string };
}

/** One flow the packet matched. */
export interface TraceStep {
  table: number;
  tableName: string;
  priority: number;
  cookie: string;
  /** The builder that makes this kind of flow (PIPELINE.md, "Flow kinds"); "default" for a table's. */
  kind: string;
  /** The flow as a canonical line. */
  flow: string;
  what: string;
}

/** Where the packet goes after the pipeline of one node (a flood has several). */
export type TraceOutcome =
  | { kind: "local"; ofport: number; port?: string }
  | { kind: "tunnel"; nodeIp: string; vni: number; node?: string }
  | { kind: "physnet"; physnet: string; vlan?: number }
  | { kind: "reply"; ofport: number }
  | { kind: "drop"; code: string; reason: string };

/** What one node's pipeline did. */
export interface TraceHop {
  node: string;
  mode: "live" | "offline";
  ingress: string;
  steps: TraceStep[];
  outcomes: TraceOutcome[];
}

/**
 * The packet a trace follows, with how it enters the node: IPv4 or IPv6 by its addresses (`icmp`
 * is ICMPv6 between IPv6 addresses), or ARP.
 */
export interface TracePacket {
  proto: "tcp" | "udp" | "icmp" | "arp";
  dlSrc: string;
  dlDst: string;
  ipSrc: string;
  ipDst: string;
  dstPort?: number;
}

/** The evaluator's packet for an ingress on `view`'s node; throws when the node lacks it. */
export function evalPacket(view: TraceView, ingress: TraceIngress, p: TracePacket): EvalPacket {
  const base = { ...p, inPort: 0 };
  if (ingress.kind === "port") return { ...base, inPort: ingress.ofport };
  if (ingress.kind === "tunnel") return { ...base, inPort: view.tunnelPort, tunId: ingress.vni };
  const net = view.networks.find((n) => n.physnet === ingress.physnet && n.physnetPort);
  if (!net) {
    throw new Error(`Node ${view.node} has no network on physnet "${ingress.physnet}"`);
  }
  return {
    ...base,
    inPort: net.physnetPort!,
    ...(ingress.vlan !== undefined ? { vlan: ingress.vlan } : {}),
  };
}

/** The flow text `ovs-appctl ofproto/trace BRIDGE FLOW` takes for a packet. */
export function ofprotoFlow(p: EvalPacket): string {
  const v6 = p.proto !== "arp" && p.ipDst.includes(":");
  const head = [
    v6 ? `${p.proto}6` : p.proto,
    `in_port=${p.inPort}`,
    ...(p.tunId !== undefined ? [`tun_id=0x${p.tunId.toString(16)}`] : []),
    p.vlan !== undefined ? `dl_vlan=${p.vlan}` : "vlan_tci=0",
    `dl_src=${p.dlSrc}`,
    `dl_dst=${p.dlDst}`,
  ];
  if (p.proto === "arp") {
    return [...head, `arp_spa=${p.ipSrc}`, `arp_tpa=${p.ipDst}`, "arp_op=1", `arp_sha=${p.dlSrc}`]
      .join(",");
  }
  // An ICMP packet of a trace is an echo request (ping), as the offline evaluator assumes.
  const l4 = p.proto === "icmp"
    ? (v6 ? ["icmpv6_type=128", "icmpv6_code=0"] : ["icmp_type=8", "icmp_code=0"])
    : p.dstPort !== undefined
    ? [`${p.proto}_dst=${p.dstPort}`]
    : [];
  const addrs = v6 ? ["ipv6_src", "ipv6_dst"] : ["nw_src", "nw_dst"];
  // A pod's TTL or hop limit (Linux sends 64): without one the packet would arrive with 0, and a
  // route's dec_ttl would drop it.
  return [...head, `${addrs[0]}=${p.ipSrc}`, `${addrs[1]}=${p.ipDst}`, "nw_ttl=64", ...l4]
    .join(",");
}

const TABLE_LINE = /^\s*(\d+)\. (.*)$/;

/**
 * The flows of `bridge` that `ofproto/trace` printed, as canonical lines taken apart. Only that
 * bridge's section counts: a patch port's peer bridge (the physnet's) is not ours.
 */
export function parseOfprotoTrace(text: string, bridge: string): ParsedFlow[] {
  const flows: ParsedFlow[] = [];
  let inBridge = false;
  let current: { table: number; head: string; actions: string[] } | null = null;
  // ofproto/trace prints what a `clone(...)` does inside on the lines after it: not the flow's.
  let inClone = 0;
  // After a route's `check_pkt_larger`, ofproto/trace follows the larger branch first: the flow's
  // other actions at its indentation, then that branch's flows nested there; then the branch of a
  // packet that fits repeats the actions and goes on at the top. A traced packet fits (as the
  // offline evaluator has it): from the first nested flow to the next flow at the top, skipped.
  let larger: number | undefined;
  let inLarger = false;
  const close = () => {
    if (current) flows.push(canonical(current.table, current.head, current.actions));
    current = null;
  };
  for (const raw of text.split("\n")) {
    const bridgeHead = /^bridge\("(.*)"\)$/.exec(raw.trim());
    if (bridgeHead) {
      close();
      if (inBridge) break;
      inBridge = bridgeHead[1] === bridge;
      continue;
    }
    if (!inBridge) continue;
    // The end of a pass; with `--ct-next`, the pass after a ct recirculation follows in a
    // section of its own, under its own bridge("…") head.
    if (/^(Final flow|Megaflow|Datapath actions):/.test(raw)) {
      close();
      inBridge = false;
      larger = undefined;
      inLarger = false;
      continue;
    }
    const t = TABLE_LINE.exec(raw);
    const indent = raw.length - raw.trimStart().length;
    if (larger !== undefined && t && indent >= larger) inLarger = true;
    if (inLarger && !(t && indent < larger!)) continue;
    if (t) {
      larger = undefined;
      inLarger = false;
    }
    if (t && !/^No match/.test(t[2])) {
      close();
      current = { table: Number(t[1]), head: t[2], actions: [] };
      continue;
    }
    const a = raw.trim();
    if (!current || a === "" || a.startsWith("->") || a.startsWith(">>") || /^-+$/.test(a)) {
      continue;
    }
    // ofproto/trace prints "drop" after a ct action (the pass ends or the packet is untracked
    // there); the flow has no such action.
    if (a === "drop" && current.actions.at(-1)?.startsWith("ct(")) continue;
    if (!/^[a-zA-Z_]+[:(]?/.test(a) || a.includes(" ")) continue;
    if (inClone > 0) {
      inClone--;
      continue;
    }
    current.actions.push(a);
    if (a.startsWith("clone(")) inClone = parts(a.slice("clone(".length, -1)).length;
    if (a.startsWith("check_pkt_larger(")) larger = indent;
  }
  close();
  return flows;
}

/**
 * `in_port=1,vlan_tci=…, priority 100, cookie 0x100000001` and its actions, read as the dump-flows
 * line they are (`parseDumpFlows` pads the cookie and supplies the default priority).
 */
function canonical(table: number, head: string, actions: string[]): ParsedFlow {
  let cookie = "0";
  let priority: string | undefined;
  let match = "";
  for (const part of head.split(", ")) {
    if (part.startsWith("priority ")) priority = part.slice("priority ".length);
    else if (part.startsWith("cookie ")) cookie = part.slice("cookie ".length);
    else match = part;
  }
  const fields = [priority && `priority=${priority}`, match].filter((f) => f).join(",");
  const acts = actions.length ? actions : ["drop"];
  const dumped = `cookie=${cookie}, table=${table}, ${fields} actions=${acts.join(",")}`;
  return parseFlowLine(parseDumpFlows(dumped)[0]);
}

/** A flow's builder: a kind of pipeline.ts or acl_pipeline.ts, a table's default, or unknown. */
export type FlowKindName =
  | keyof typeof FLOW_KINDS
  | keyof typeof ACL_KINDS
  | keyof typeof SERVICE_KINDS
  | "default"
  | "unknown";

/** What the router's slow path answers a punted packet with, per flow kind and family. */
const SLOW_PATH_ANSWERS = {
  routeMiss: { v4: "ICMP net unreachable", v6: "ICMPv6 no route" },
  tooBig: { v4: "ICMP fragmentation needed", v6: "ICMPv6 packet too big" },
  gatewaySelf: { v4: "ICMP port unreachable", v6: "ICMPv6 port unreachable" },
} as const;

function slowPathAnswer(kind: keyof typeof SLOW_PATH_ANSWERS, v6: boolean): string {
  return SLOW_PATH_ANSWERS[kind][v6 ? "v6" : "v4"];
}

/** Whether a flow matches IPv6 (a route's flows are of one family). */
function v6Flow(f: ParsedFlow): boolean {
  return f.match.some(([key]) => key === "ipv6");
}

/** The builder that makes a flow (the names of PIPELINE.md's "Flow kinds"). */
export function flowKind(f: ParsedFlow): FlowKindName {
  const has = (k: string) => f.match.some(([key]) => key === k);
  const value = (k: string) => f.match.find(([key]) => key === k)?.[1];
  if (f.priority === PRIORITY.DEFAULT) {
    if (f.table !== TABLE.ARP_REPLY) return "default";
    return has("icmp6") ? "ndReplyShared" : "arpReplyShared";
  }
  switch (f.table) {
    case TABLE.CLASSIFY:
      // A filtered mirror's copy, above the port's classification (PIPELINE.md, "Filtered mirrors").
      if (f.priority === PRIORITY.MIRROR) return "mirrorOut";
      if (has("tun_id")) return "classifyTunnel";
      // Only an inactive port's flow matches a source MAC here (PIPELINE.md, "Inactive ports").
      if (has("dl_src")) return "inactivePort";
      // The host port's flows match ARP, IPv4 or IPv6 and load no reg1 (PIPELINE.md, "Host port").
      if (has("arp") || has("ip") || has("ipv6")) return "classifyHost";
      return f.actions.some((a) => a.endsWith("->reg1")) ? "classifyLocal" : "classifyPhysnet";
    case TABLE.SPOOF:
      if (has("arp")) return "spoofArp";
      if (has("icmp6")) return "spoofDad";
      // An IPv6 static route's destination: a prefix other than link-local's, or none for ::/0.
      if (has("ipv6")) {
        const src = value("ipv6_src");
        return src === undefined || (src.includes("/") && src !== MATCH.LINK_LOCAL)
          ? "spoofRouted"
          : "spoofIpv6";
      }
      // A static route's destination is a prefix (or none for /0); a port's own address is not.
      return value("nw_src")?.includes(".") && !value("nw_src")!.includes("/")
        ? "spoofIpv4"
        : "spoofRouted";
    case TABLE.ROUTE:
      if (f.priority === PRIORITY.HOST) return "hostExit";
      if (f.priority === PRIORITY.UNROUTED) return "routeMiss";
      return f.priority === PRIORITY.SELF ? "gatewaySelf" : "routeTo";
    case TABLE.NEXT_HOP:
      if (f.priority === SERVICE_PRIORITY.HAIRPIN) return "hairpinSnat";
      return f.priority === SERVICE_PRIORITY.VIP ? "serviceVipRouted" : "nextHop";
    case SERVICE_TABLE.SERVICE:
      return f.priority === SERVICE_PRIORITY.NEW ? "serviceNew" : "serviceTracked";
    case SERVICE_TABLE.HAIRPIN:
      if (f.priority === SERVICE_PRIORITY.HAIRPIN_UNDO) return "hairpinUndo";
      return f.priority === SERVICE_PRIORITY.HAIRPIN_DELIVER ? "hairpinDeliver" : "hairpinAgain";
    case TABLE.ARP:
      if (f.priority === SERVICE_PRIORITY.HAIRPIN_REPLY) return "hairpinReply";
      if (f.priority === SERVICE_PRIORITY.VIP) return has("icmp6") ? "serviceNd" : "serviceVip";
      if (f.priority === SERVICE_PRIORITY.VIP_GUARD) return "serviceVipGuard";
      if (f.priority === SERVICE_PRIORITY.REPLY) return "serviceReplyLocal";
      if (f.priority === SERVICE_PRIORITY.REPLY_ROUTED) return "serviceReplyRouted";
      if (f.priority === PRIORITY.ROUTED) return "routeIn";
      if (f.priority === PRIORITY.GUARD) return "ndGuard";
      if (f.priority === PRIORITY.GATEWAY) {
        return value("icmp_type") === "136" ? "gatewayLinkGuard" : "gatewayNd";
      }
      if (f.priority === PRIORITY.SOLICIT) return "raSolicit";
      if (f.priority === PRIORITY.SPECIFIC) {
        return has("icmp") || has("icmp6") ? "gatewayPing" : "arpReply";
      }
      if (has("arp")) return "arpOwner";
      return value("icmp_type") === "135" ? "ndSolicit" : "ndAdvert";
    case ACL_TABLE.EGRESS_ACL:
      return f.priority === ACL_PRIORITY.TRACKED ? "egressTracked" : "egressRule";
    case ACL_TABLE.INGRESS_ACL:
      return f.priority === ACL_PRIORITY.TRACKED ? "ingressTracked" : "ingressRule";
    case TABLE.FORWARD: {
      const byPriority: Record<number, FlowKindName> = {
        [ACL_PRIORITY.EGRESS_HOOK]: "egressHook",
        [ACL_PRIORITY.INGRESS_HOOK]: "ingressHook",
        [ACL_PRIORITY.COMMIT]: "aclCommit",
        [ACL_PRIORITY.HOST_COMMIT]: "hostCommit",
        [SERVICE_PRIORITY.REPLY]: "serviceReplyIn",
        [PRIORITY.EXCEPTION]: "hostGuard",
        [PRIORITY.OVERSIZE]: "tooBig",
        [PRIORITY.SPECIFIC]: f.actions.includes("drop")
          ? "gatewayDrop"
          : value("dl_dst")?.startsWith(GATEWAY_MAC_PREFIX)
          ? "forwardHost"
          : "forwardLocal",
        [PRIORITY.FLOOD_IN]: "floodIn",
        [PRIORITY.FROM_OUTSIDE]: "fromOutside",
        [PRIORITY.REMOTE]: "forwardRemote",
        [PRIORITY.FLOOD]: "flood",
        [PRIORITY.UNKNOWN]: "unknownUnicast",
      };
      return byPriority[f.priority] ?? "unknown";
    }
  }
  return "unknown";
}

function tableName(id: number): string {
  return [...FLOW_TABLES, ...ACL_TABLES, ...SERVICE_TABLES].find((t) => t.id === id)?.name ??
    `table ${id}`;
}

/** Packet state while the actions of the matched flows are followed. */
interface Walk {
  reg0: number;
  /** The ofport INGRESS_ACL delivers to (`output:NXM_NX_REG7[0..15]`). */
  reg7?: number;
  tunDst?: string;
  tunId?: number;
  vlan?: number;
}

function ingressWords(view: TraceView, ingress: TraceIngress): string {
  if (ingress.kind === "port") {
    const lp = view.localPorts.find((p) => p.ofport === ingress.ofport);
    return lp ? `${lp.label} (ofport ${ingress.ofport})` : `ofport ${ingress.ofport}`;
  }
  if (ingress.kind === "tunnel") return `the tunnel, VNI ${ingress.vni}`;
  return `physnet ${ingress.physnet}, ${
    ingress.vlan === undefined ? "untagged" : `VLAN ${ingress.vlan}`
  }`;
}

/**
 * The steps and outcomes of one node's pipeline for `packet`, from the flows it matched (live or
 * offline), named with what `view` knows and `target` says of the destination.
 */
export function explainHop(
  view: TraceView,
  ingress: TraceIngress,
  packet: TracePacket,
  matched: ParsedFlow[],
  opts: {
    mode: "live" | "offline";
    target?: TraceTarget;
    /** The service's select group the walk went through (flow_eval.ts). */
    balanced?: { group: number; candidates: string[] };
  },
): TraceHop {
  const inPort = ingress.kind === "port"
    ? ingress.ofport
    : ingress.kind === "tunnel"
    ? view.tunnelPort
    : view.networks.find((n) => n.physnet === ingress.physnet)?.physnetPort ?? -1;
  const walk: Walk = {
    reg0: 0,
    ...(ingress.kind === "physnet" && ingress.vlan !== undefined ? { vlan: ingress.vlan } : {}),
  };
  const steps: TraceStep[] = [];
  const outcomes: TraceOutcome[] = [];
  const netOf = (id: number) => view.networks.find((n) => n.id === id);
  const remoteOf = (mac: string) =>
    view.remotePorts.find((r) => r.network === walk.reg0 && sameMac(r.mac, mac));
  const localOf = (ofport: number) => view.localPorts.find((p) => p.ofport === ofport);
  for (const f of matched) {
    const kind = flowKind(f);
    for (const a of f.actions) follow(walk, a);
    const net = netOf(walk.reg0);
    const netLabel = net ? `network ${net.label}` : `network ${walk.reg0}`;
    let what: string;
    switch (kind) {
      case "classifyLocal":
      case "classifyTunnel":
      case "classifyPhysnet":
        what = `from ${ingressWords(view, ingress)}: ${netLabel}`;
        break;
      case "mirrorOut": {
        const copy = f.actions.find((a) => a.startsWith("clone(output:"))?.slice(13, -1);
        what = `from ${ingressWords(view, ingress)}: ${netLabel}; a filtered mirror copies it ` +
          `to ofport ${copy}`;
        break;
      }
      case "inactivePort":
        what = `from an inactive port (ofport ${inPort}, a live migration's other end): ` +
          "counted and dropped until its guest runs here";
        break;
      case "classifyHost":
        what = `from the node (its host port, ofport ${inPort}): ${netLabel}, as from outside`;
        break;
      case "hostExit":
        what = `${v6Flow(f) ? "IPv6" : "IPv4"} to the gateway MAC of ${netLabel} that no route ` +
          "takes: to the node";
        break;
      case "routeMiss":
        what = `no route of ${netLabel}'s router covers ${packet.ipDst}: to the slow path, ` +
          `which answers ${slowPathAnswer(kind, v6Flow(f))} from the gateway`;
        break;
      case "tooBig":
        what = `larger than the MTU of ${netLabel}: to the slow path, which answers ` +
          `${slowPathAnswer(kind, v6Flow(f))} with that MTU`;
        break;
      case "gatewaySelf":
        what = `to ${packet.ipDst}, the gateway of ${netLabel}, which answers only ping: to the ` +
          `slow path, which answers ${slowPathAnswer(kind, v6Flow(f))}`;
        break;
      case "forwardHost": {
        const port = Number(f.actions.find((a) => a.startsWith("output:"))?.slice(7));
        what = `to the node through the host port of ${netLabel} (ofport ${port}): egress, or ` +
          "a reply to the node";
        break;
      }
      case "hostGuard":
        what = `to the gateway MAC of ${netLabel} from outside: dropped, only the node's own ` +
          "pods reach the node";
        break;
      case "hostCommit":
        what = `${v6Flow(f) ? "IPv6" : "IPv4"} from the node: committed, past the ingress rules ` +
          "(the node reaches its pods)";
        break;
      case "spoofIpv4":
        what = `source MAC ${packet.dlSrc} and address ${packet.ipSrc} are the port's own` +
          dscpWords(f);
        break;
      case "spoofArp":
        what = `ARP from the port's own MAC ${packet.dlSrc} and address ${packet.ipSrc}`;
        break;
      case "arpReply": {
        if (net?.gateway === packet.ipDst) {
          what = `ARP request for ${packet.ipDst}, the gateway of ${netLabel}: answered here by ` +
            `the gateway (MAC ${net.gatewayMac})`;
          break;
        }
        const owner = view.localPorts.find((p) =>
          p.network === walk.reg0 && p.ips.includes(packet.ipDst)
        )?.label ??
          view.remotePorts.find((r) => r.network === walk.reg0 && r.ips.includes(packet.ipDst))
            ?.label;
        what = `ARP request for ${packet.ipDst}, a port of ${netLabel}${
          owner ? ` (${owner})` : ""
        }: answered here`;
        break;
      }
      case "gatewayPing":
        what = `ICMP echo request for ${packet.ipDst}, the gateway of ${netLabel}: answered here ` +
          `by the gateway (MAC ${net?.gatewayMac ?? "?"}), the echo reply back out of the port`;
        break;
      case "gatewayDrop":
        what = `to the gateway MAC ${packet.dlDst} of ${netLabel}, not an ARP request or ping ` +
          "for the gateway, and no router connects the network: dropped";
        break;
      case "spoofRouted":
        what = `source ${packet.ipSrc}: the port is the next hop of a static route for ${
          f.match.find(([k]) => k === "nw_src" || k === "ipv6_src")?.[1] ?? "every address"
        }, so it may send from there`;
        break;
      case "routeIn":
        what = `${v6Flow(f) ? "IPv6" : "IPv4"} to the gateway MAC of ${netLabel}: routed (a ` +
          "router connects it)";
        break;
      case "routeTo": {
        const v6 = v6Flow(f);
        const dst = f.match.find(([k]) => k === "nw_dst" || k === "ipv6_dst")?.[1] ??
          (v6 ? "::/0" : "0.0.0.0/0");
        const hop = f.actions.find((a) => a.endsWith("->eth_dst"))?.slice(10, -9);
        what = `route ${dst} into ${netLabel}${
          hop ? ` through the next hop ${hop}` : ""
        }: source MAC its gateway's, ${v6 ? "hop limit" : "TTL"} decremented`;
        break;
      }
      case "serviceVip":
        what = `${packet.proto.toUpperCase()} to ${packet.ipDst}:${packet.dstPort}, a service's ` +
          `VIP on ${netLabel}: through conntrack (NAT), to SERVICE`;
        break;
      case "serviceVipRouted":
        what = `${packet.proto.toUpperCase()} to ${packet.ipDst}:${packet.dstPort}, a service's ` +
          `VIP on ${netLabel}, routed there: through conntrack (NAT), to SERVICE`;
        break;
      case "serviceVipGuard":
        what = `to ${packet.ipDst}, a service's VIP on ${netLabel}, not one of its ports: dropped`;
        break;
      case "serviceNew": {
        const group = f.actions.find((a) => a.startsWith("group:"));
        what = group
          ? `a new connection to the service: balanced by select group ${group.slice(6)}${
            opts.balanced
              ? ` over ${opts.balanced.candidates.join(", ")} (the switch's hash picks one; ` +
                `the trace follows ${opts.balanced.candidates[0]})`
              : ""
          }`
          : "a new connection to the service, which has no endpoints: dropped";
        break;
      }
      case "serviceTracked":
        what = "a connection conntrack knows: already translated to its backend, to NEXT_HOP";
        break;
      case "serviceReplyLocal":
      case "serviceReplyIn":
        what = `a backend's reply from ${packet.ipSrc}: translated back to the VIP by conntrack`;
        break;
      case "hairpinReply":
        what = `from a backend to its service's VIP ${packet.ipDst}: first through the ` +
          "hairpin zone (a reply of a connection to itself is un-NATed there), to HAIRPIN";
        break;
      case "hairpinAgain":
        what = "not a hairpin reply: back to ARP, to the VIP's own flows";
        break;
      case "hairpinSnat":
        what = "balanced to the backend that opened it (hairpin): source-NATed to the VIP, to " +
          "HAIRPIN";
        break;
      case "hairpinUndo":
        what = "a hairpin reply, un-SNATed: un-DNATed in the network's zone, to HAIRPIN";
        break;
      case "hairpinDeliver":
        what = "from the VIP to the backend itself: back out of the port it came in on";
        break;
      case "serviceReplyRouted":
        what = `a backend's reply from ${packet.ipSrc} to its gateway: translated back to the ` +
          "VIP by conntrack, to ROUTE";
        break;
      case "nextHop": {
        const mac = f.actions.find((a) => a.endsWith("->eth_dst"))?.slice(10, -9);
        what = `${packet.ipDst} is a port of ${netLabel}: to its MAC ${mac}`;
        break;
      }
      case "arpReplyShared":
        what = "the ARP reply goes back out of the port the request came in on";
        break;
      case "forwardLocal": {
        const port = Number(f.actions.find((a) => a.startsWith("output:"))?.slice(7));
        what = `to ${localOf(port)?.label ?? "a local port"} (ofport ${port}), on this node`;
        break;
      }
      case "forwardRemote": {
        const r = remoteOf(packet.dlDst);
        const who = r?.label ? `${r.label} ` : "";
        what = net?.type === "vxlan"
          ? `to ${who}on node ${
            r?.node ?? walk.tunDst
          } through the tunnel (VNI ${walk.tunId}, endpoint ${walk.tunDst})`
          : `to ${who}on node ${r?.node ?? "?"} over physnet ${net?.physnet ?? "?"}${
            walk.vlan !== undefined ? ` (VLAN ${walk.vlan})` : " (untagged)"
          }`;
        break;
      }
      case "unknownUnicast":
        what = `MAC ${packet.dlDst} is not a port of ${netLabel}: out to physnet ${
          net?.physnet ?? "?"
        }, where hosts outside Knitter may live`;
        break;
      case "flood":
        what = `broadcast or multicast from a local port: to the ${netLabel}'s local ports and ${
          net?.type === "vxlan" ? "its other nodes" : "its physnet"
        }`;
        break;
      case "floodIn":
        what = "broadcast or multicast from outside: to local ports only";
        break;
      case "fromOutside":
        what =
          `from outside, and no local port of ${netLabel} has MAC ${packet.dlDst}: dropped, never sent back out`;
        break;
      case "arpOwner":
        what = "the owner asks for its own address: not answered, forwarded";
        break;
      case "ndGuard":
        what = "neighbour discovery the port may not send: dropped";
        break;
      case "spoofIpv6":
        what = `source MAC ${packet.dlSrc} and address ${packet.ipSrc} are the port's own` +
          dscpWords(f);
        break;
      case "spoofDad":
        what = "IPv6 from the port's own MAC and addresses";
        break;
      case "egressHook":
        what = `IP from a port with security groups: tracked in the zone of ${netLabel}, on to ` +
          "EGRESS_ACL";
        break;
      case "egressRule":
        what = "a new connection an egress rule of the port allows: on to FORWARD";
        break;
      case "aclCommit":
        what = "the new connection allowed out is committed (its replies will pass)";
        break;
      case "ingressHook":
        what = "IP to a port with security groups: tracked, on to INGRESS_ACL";
        break;
      case "ingressRule":
        what = "a new connection an ingress rule of the port allows: committed, delivered";
        break;
      case "egressTracked":
      case "ingressTracked":
        what = "a reply or a known connection (or neighbour discovery): passes";
        break;
      case "default":
        what = f.table === TABLE.ARP
          ? "not an ARP request this node answers: on to FORWARD"
          : "no other flow of this table matches: the table's default";
        break;
      default:
        what = kind;
    }
    steps.push({
      table: f.table,
      tableName: tableName(f.table),
      priority: f.priority,
      cookie: f.cookie,
      kind,
      flow: f.line,
      what,
    });
  }
  // Where it went: the outputs of the flows, as Open vSwitch runs them (never back to in_port).
  const outs: Walk = { reg0: 0, vlan: ingress.kind === "physnet" ? ingress.vlan : undefined };
  for (const f of matched) {
    for (const a of f.actions) {
      follow(outs, a);
      if (a === "IN_PORT" && flowKind(f) === "hairpinDeliver") {
        // A hairpin: the connection is delivered to the port that opened it.
        const lp = localOf(inPort);
        outcomes.push({ kind: "local", ofport: inPort, ...(lp ? { port: lp.label } : {}) });
      } else if (a === "IN_PORT") outcomes.push({ kind: "reply", ofport: inPort });
      if (!a.startsWith("output:")) continue;
      const to = a.slice("output:".length);
      const port = to === ACL_REG.OUTPORT_FIELD ? outs.reg7 ?? -1 : Number(to);
      if (port === inPort) continue;
      if (port === view.tunnelPort) {
        const node = view.remotePorts.find((r) => r.nodeIp === outs.tunDst)?.node;
        outcomes.push({
          kind: "tunnel",
          nodeIp: outs.tunDst ?? "?",
          vni: outs.tunId ?? 0,
          ...(node ? { node } : {}),
        });
        continue;
      }
      const phys = view.networks.find((n) => n.physnetPort === port);
      if (phys) {
        outcomes.push({
          kind: "physnet",
          physnet: phys.physnet ?? `ofport ${port}`,
          ...(outs.vlan !== undefined ? { vlan: outs.vlan } : {}),
        });
        continue;
      }
      const lp = localOf(port);
      outcomes.push({ kind: "local", ofport: port, ...(lp ? { port: lp.label } : {}) });
    }
  }
  if (outcomes.length === 0) {
    outcomes.push(dropReason(view, ingress, packet, matched, walk.reg0, opts.target));
  }
  return {
    node: view.node,
    mode: opts.mode,
    ingress: ingressWords(view, ingress),
    steps,
    outcomes,
  };
}

function follow(w: Walk, action: string): void {
  if (!action.startsWith("set_field:")) {
    if (action === "pop_vlan") w.vlan = undefined;
    return;
  }
  const [value, field] = action.slice("set_field:".length).split("->");
  if (field === "reg0") w.reg0 = Number(value);
  else if (field === "tun_dst") w.tunDst = value;
  else if (field === "tun_id") w.tunId = Number(value);
  else if (field === "vlan_vid") w.vlan = Number(value) - 4096;
  else if (field === ACL_REG.OUTPORT) w.reg7 = Number(value);
}

function sameMac(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** Why the packet was dropped, in words, from the last flow it matched. */
function dropReason(
  view: TraceView,
  ingress: TraceIngress,
  packet: TracePacket,
  matched: ParsedFlow[],
  reg0: number,
  target?: TraceTarget,
): TraceOutcome & { kind: "drop" } {
  const last = matched.at(-1);
  const drop = (code: string, reason: string) => ({ kind: "drop" as const, code, reason });
  if (!last) return drop("no_flow", "no flow of table CLASSIFY matches (is br-int's pipeline in?)");
  const kind = flowKind(last);
  const net = view.networks.find((n) => n.id === reg0);
  const netLabel = net?.label ?? `network ${reg0}`;
  if (last.table === ACL_TABLE.EGRESS_ACL || last.table === ACL_TABLE.INGRESS_ACL) {
    const way = last.table === ACL_TABLE.EGRESS_ACL
      ? "egress rule of the sending"
      : "ingress rule of the receiving";
    return drop(
      "security_group",
      `no ${way} port's security groups allows a new connection like this one: dropped`,
    );
  }
  if (last.table === TABLE.CLASSIFY) {
    if (ingress.kind === "tunnel") {
      return drop("unknown_ingress", `VNI ${ingress.vni} is not a network with ports on this node`);
    }
    if (ingress.kind === "physnet") {
      const tag = ingress.vlan === undefined ? "untagged traffic" : `VLAN ${ingress.vlan}`;
      return drop(
        "unknown_ingress",
        `${tag} of physnet ${ingress.physnet} is not a network with ports on this node`,
      );
    }
    return drop(
      "unknown_ingress",
      `ofport ${ingress.ofport} is not a pod port of this node, or the frame is VLAN-tagged`,
    );
  }
  if (last.table === TABLE.SPOOF) {
    const lp = ingress.kind === "port"
      ? view.localPorts.find((p) => p.ofport === ingress.ofport)
      : undefined;
    if (lp && !sameMac(lp.mac, packet.dlSrc)) {
      return drop(
        "spoofed_mac",
        `source MAC ${packet.dlSrc} is not the port's (${lp.label} has ${lp.mac}): spoofing is dropped`,
      );
    }
    if (lp && !lp.ips.includes(packet.ipSrc)) {
      return drop(
        "spoofed_ip",
        `source address ${packet.ipSrc} is not the port's (${lp.label} has ${
          lp.ips.join(", ")
        }): spoofing is dropped`,
      );
    }
    return drop("spoof", "the port may not send this packet (not its own IPv4, ARP or IPv6)");
  }
  if (kind === "ndGuard") {
    return drop("nd_guard", "neighbour discovery that does not match the port's own addresses");
  }
  if (kind === "hostGuard") {
    return drop(
      "gateway",
      `addressed to the gateway of ${netLabel} (MAC ${packet.dlDst}) from outside: only the node's own pods reach the node`,
    );
  }
  if (kind === "gatewayDrop") {
    return drop(
      "gateway",
      `addressed to the gateway of ${netLabel} (MAC ${packet.dlDst}), which answers only ARP and ping: no router connects ${netLabel}`,
    );
  }
  if (kind === "gatewaySelf") {
    const v6 = packet.ipDst.includes(":");
    return drop(
      "gateway",
      `addressed to ${packet.ipDst}, the gateway of ${netLabel}, which answers only ${
        v6 ? "ND" : "ARP"
      } and ping: the sender gets ${slowPathAnswer(kind, v6)}`,
    );
  }
  if (last.table === TABLE.ROUTE) {
    const answered = kind === "routeMiss"
      ? `: the sender gets ${slowPathAnswer(kind, packet.ipDst.includes(":"))}`
      : "";
    return drop("no_route", `no route of ${netLabel}'s router covers ${packet.ipDst}${answered}`);
  }
  if (last.table === TABLE.NEXT_HOP) {
    return drop("no_port", `routed into ${netLabel}, where no port has address ${packet.ipDst}`);
  }
  if (kind === "floodIn" || kind === "flood") {
    return drop("no_receiver", `a broadcast with no port of ${netLabel} to go to`);
  }
  const other = otherNetwork(target, netLabel);
  if (other) return other;
  if (kind === "fromOutside") {
    return drop(
      "from_outside",
      `it came in from outside and no port of ${netLabel} on this node has MAC ${packet.dlDst}: nothing from outside is sent back out`,
    );
  }
  return drop(
    "no_destination",
    `no port of ${netLabel} has MAC ${packet.dlDst}${
      target && !target.owner ? ` (nobody has address ${target.ip})` : ""
    }${net?.type === "vxlan" ? ": unknown unicast is dropped on VXLAN networks" : ""}`,
  );
}

/** A drop because the destination belongs to another network, said so. */
function otherNetwork(
  target: TraceTarget | undefined,
  netLabel: string,
): (TraceOutcome & { kind: "drop" }) | null {
  const owner = target?.owner;
  if (!owner || owner.network === netLabel) return null;
  const tenantOf = (label: string) => label.split("/")[0];
  if (tenantOf(owner.network) !== tenantOf(netLabel)) {
    return {
      kind: "drop",
      code: "other_tenant",
      reason: `destination ${
        target!.ip
      } is on another tenant's network (${owner.network}, port ${owner.label}), not on ${netLabel}: networks are isolated`,
    };
  }
  return {
    kind: "drop",
    code: "other_network",
    reason: `destination ${
      target!.ip
    } is on another network of the tenant (${owner.network}, port ${owner.label}), not on ${netLabel}: networks are isolated`,
  };
}

/**
 * How a trace names a port of the manager: `namespace/pod/interface` when a pod holds it, else
 * `tenant/port-id`. Live and offline name ports the same way.
 */
export function portLabel(p: {
  id: string;
  tenant: string;
  pod?: { namespace: string; name: string };
  interface?: string;
}): string {
  return p.pod ? `${p.pod.namespace}/${p.pod.name}/${p.interface ?? p.id}` : `${p.tenant}/${p.id}`;
}

/** What a SPOOF flow's DSCP marking does to the packet (PIPELINE.md, "DSCP marking"), or "". */
function dscpWords(f: ParsedFlow): string {
  const mark = f.actions.find((a) => a.endsWith("->ip_dscp"));
  return mark ? `; marked with DSCP ${mark.slice("set_field:".length, -"->ip_dscp".length)}` : "";
}
