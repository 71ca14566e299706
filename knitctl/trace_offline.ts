/**
 * A trace from the manager's model: what the pipeline does with one packet on each node it passes,
 * from the ports, nodes, routers and security groups alone. The one place the trace is computed
 * from the model: `knitctl trace` (live or `--offline`) follows the packet with it, and the
 * manager's trace route (manager/routes/trace.ts, for the console) runs it whole. The flows come
 * from the flow compiler (trace_model.ts) and the offline evaluator runs them; live, the hops come
 * from the nodes' agents instead, and the rest is the same.
 */
import type { NodeInfo, Port, RouterInfo, SecurityGroup, ServiceInfo } from "@knitter/common";
import { serviceVips } from "@knitter/agent/service_model";
import { cidrContains, networkOf, parseIp, parseIpPrefix } from "@knitter/common/address";
import {
  evalPacket,
  evaluate,
  explainHop,
  flowGroups,
  flowTables,
  gatewayMac,
  portLabel,
  type TraceHop,
  type TraceIngress,
  type TracePacket,
  type TraceTarget,
} from "@knitter/wasm";
import { type OfflineNode, offlineNode, portKey } from "./trace_model.ts";
import { serviceMac } from "@knitter/agent/service_model";

/** A node is visited once; a packet never needs more hops than this here. */
const MAX_HOPS = 4;

/** What the trace is computed from: the manager's view, as the caller may see it. */
export interface TraceModel {
  ports: Port[];
  nodes: NodeInfo[];
  routers: RouterInfo[];
  groups: SecurityGroup[];
  /** The services the caller may see: their VIPs balance as on the nodes. */
  services?: ServiceInfo[];
}

/** What is traced: from a port (perhaps one not bound yet) to an IPv4 address. */
export interface TraceAsk {
  src: Port;
  /** The source is a pod that does not exist yet (a what-if port, not in the model's ports). */
  hypothetical?: boolean;
  dst: string;
  proto: "tcp" | "udp" | "icmp";
  dport?: number;
  /** Another source address or MAC than the port's (spoofing, as the flows see it). */
  srcIp?: string;
  srcMac?: string;
}

/** Where the packet enters the next node, as the agent's route takes it. */
export type From =
  | { kind: "port"; portId: string; tenant?: string }
  | { kind: "tunnel"; vni: number }
  | { kind: "physnet"; physnet: string; vlan?: number };

export interface TraceReport {
  mode: "live" | "offline";
  source: { port: string; network: string; node: string; hypothetical?: boolean };
  packet: TracePacket;
  target: TraceTarget;
  hops: TraceHop[];
  /** The last hop's fate, in words. */
  result: string;
  /** Whether the packet reached a pod (or was answered, for ARP). */
  delivered: boolean;
}

/** How one node's hop is had: from its agent (live) or the model (offline). */
export type HopAt = (node: string, from: From, packet: TracePacket) => Promise<TraceHop>;

/** The packet and its target: the address's owner, and whether a router's gateway takes it. */
export function tracePlan(
  model: TraceModel,
  ask: TraceAsk,
): { packet: TracePacket; target: TraceTarget; ports: Port[] } {
  const { src, dst: to } = ask;
  const all = ask.hypothetical ? [...model.ports, src] : model.ports;
  // A port has the address as its own (IPv4, or an IPv6-only port's IPv6) or its IPv6 (ip6).
  const has = (p: Port) => p.ip === to || p.ip6 === to;
  // On its own network first, then the tenant's (a router may connect it), then anyone's.
  const owner = all.find((p) => has(p) && p.networkId === src.networkId) ??
    all.find((p) => has(p) && p.node && p.networkTenant === src.networkTenant) ??
    all.find((p) => has(p) && p.node);
  // No port has it: a service's VIP (of either family), of its network first, then the tenant's.
  const isVip = (s: ServiceInfo) => serviceVips(s).some((v) => v.vip === to);
  const service = owner
    ? undefined
    : model.services?.find((s) => isVip(s) && s.networkId === src.networkId) ??
      model.services?.find((s) => isVip(s) && s.tenant === src.networkTenant);
  const target: TraceTarget = {
    ip: to,
    ...(owner
      ? {
        owner: {
          label: portLabel(owner),
          network: `${owner.networkTenant}/${owner.network}`,
          ...(owner.node ? { node: owner.node } : {}),
        },
      }
      : service
      ? {
        owner: {
          label: `service ${service.tenant}/${service.name}`,
          network: `${service.tenant}/${service.network}`,
        },
      }
      : {}),
  };
  // Nobody has the address: the pod's ARP request for it is what goes out.
  // Off its subnet, a pod whose network is on a router sends to its gateway (its default route),
  // which routes it; otherwise the trace sends to the owner's MAC, to show where it is stopped.
  const viaGateway = offSubnet(src, to) &&
    model.routers.some((r) => r.networks.some((n) => n.id === src.networkId));
  const known = owner !== undefined || service !== undefined;
  const packet: TracePacket = {
    proto: known || viaGateway ? ask.proto : "arp",
    dlSrc: ask.srcMac ?? src.mac,
    dlDst: viaGateway
      ? gatewayMac(src.networkId)
      : owner
      ? owner.mac.toLowerCase()
      : service
      ? serviceMac(service)
      : "ff:ff:ff:ff:ff:ff",
    ipSrc: ask.srcIp ?? sourceIp(src, to),
    ipDst: to,
    ...(known && ask.dport !== undefined ? { dstPort: ask.dport } : {}),
  };
  return { packet, target, ports: all };
}

/**
 * Follows the packet from the source's node, hop by hop (`hopAt`), to the next node while it
 * leaves through the tunnel or the physnet towards a known port. `follows` says why a node cannot
 * be followed to (an agent out of reach), or nothing when it can.
 */
export async function followTrace(
  model: TraceModel,
  ask: TraceAsk,
  packet: TracePacket,
  target: TraceTarget,
  hopAt: HopAt,
  follows: (node: string) => string | undefined = () => undefined,
): Promise<TraceHop[]> {
  const hops: TraceHop[] = [];
  let node = ask.src.node!;
  let from: From = { kind: "port", portId: ask.src.id, tenant: ask.src.tenant };
  // The packet as it leaves each node: a route rewrites its MACs on the way.
  let wire = packet;
  while (hops.length < MAX_HOPS) {
    const hop = await hopAt(node, from, wire);
    hops.push(hop);
    wire = rewritten(wire, hop);
    const next = nextHop(hop, model.nodes, target, node);
    if (!next || hops.some((h) => h.node === next.node)) break;
    const stop = follows(next.node);
    if (stop !== undefined) {
      hop.outcomes.push({ kind: "drop", code: "not_followed", reason: stop });
      break;
    }
    node = next.node;
    from = next.from;
  }
  return hops;
}

/** Each node's hop from the model: its flows compiled and the packet evaluated on them. */
export function offlineHops(model: TraceModel, ask: TraceAsk, target: TraceTarget): HopAt {
  const all = ask.hypothetical ? [...model.ports, ask.src] : model.ports;
  const nodes = new Map<string, OfflineNode>();
  return (node, from, packet) => {
    const m = nodes.get(node) ??
      nodes.set(
        node,
        offlineNode(node, all, model.nodes, model.routers, model.groups, model.services),
      ).get(node)!;
    const ingress: TraceIngress = from.kind === "port"
      ? { kind: "port", ofport: m.ofports.get(portKey(ask.src))! }
      : from;
    const walked = evaluate(
      flowTables(m.lines),
      evalPacket(m.view, ingress, packet),
      flowGroups(m.lines),
    );
    return Promise.resolve(
      explainHop(m.view, ingress, packet, walked.matched, {
        mode: "offline",
        target,
        ...(walked.balanced ? { balanced: walked.balanced } : {}),
      }),
    );
  };
}

/** The whole trace from the model alone, as `knitctl trace --offline` gives it. */
export async function offlineTrace(model: TraceModel, ask: TraceAsk): Promise<TraceReport> {
  const { packet, target } = tracePlan(model, ask);
  const hops = await followTrace(model, ask, packet, target, offlineHops(model, ask, target));
  return summarize({ mode: "offline", source: sourceOf(ask), packet, target, hops });
}

/** How the report names the source. */
export function sourceOf(ask: TraceAsk): TraceReport["source"] {
  const src = ask.src;
  return {
    port: ask.hypothetical ? `${src.tenant}/${src.id}` : portLabel(src),
    network: `${src.networkTenant}/${src.network}`,
    node: src.node!,
    ...(ask.hypothetical ? { hypothetical: true } : {}),
  };
}

/**
 * The source's address and gateway of `to`'s family: a dual-stack port's IPv6 ones for an IPv6
 * destination (address6, gateway6), else its own.
 */
function sideOf(src: Port, to: string): { address?: string; gateway?: string } {
  const v6 = to.includes(":");
  if (v6 === src.address.includes(":")) return { address: src.address, gateway: src.gateway };
  return v6 ? { address: src.address6, gateway: src.gateway6 } : {};
}

/** The source address of a packet to `to`: the port's of that family (its own when it has none). */
function sourceIp(src: Port, to: string): string {
  const address = sideOf(src, to).address;
  return address === undefined ? src.ip : address.slice(0, address.indexOf("/"));
}

/** Whether `to` lies off the source port's subnet of its family, with a gateway to send it to. */
function offSubnet(src: Port, to: string): boolean {
  const side = sideOf(src, to);
  if (side.address === undefined || side.gateway === undefined) return false;
  const own = parseIpPrefix(side.address, "required");
  const ip = parseIp(to);
  if ("error" in own || !ip || own.prefix === undefined) return false;
  return !cidrContains(networkOf(own.ip, own.prefix), ip);
}

/** The packet with the MACs the hop's flows set (a route's rewrite), for the next node. */
function rewritten(p: TracePacket, hop: TraceHop): TracePacket {
  let out = p;
  for (const step of hop.steps) {
    for (const a of step.flow.slice(step.flow.indexOf("actions=") + 8).split(",")) {
      const m = /^set_field:([0-9a-f:]{17})->eth_(src|dst)$/.exec(a);
      if (m) out = { ...out, [m[2] === "src" ? "dlSrc" : "dlDst"]: m[1] };
    }
  }
  return out;
}

/** Where the packet goes next: through the tunnel to a node, or over the physnet to its port's. */
function nextHop(
  hop: TraceHop,
  nodes: NodeInfo[],
  target: TraceTarget,
  here: string,
): { node: string; from: From } | null {
  const outs = hop.outcomes.filter((o) => o.kind === "tunnel" || o.kind === "physnet");
  if (outs.length !== 1 || hop.outcomes.length !== 1) return null;
  const o = outs[0];
  if (o.kind === "tunnel") {
    const node = o.node ?? nodes.find((n) => n.underlayIp === o.nodeIp)?.name;
    return node ? { node, from: { kind: "tunnel", vni: o.vni } } : null;
  }
  if (o.kind !== "physnet") return null;
  const node = target.owner?.node;
  if (!node || node === here) return null;
  return {
    node,
    from: {
      kind: "physnet",
      physnet: o.physnet,
      ...(o.vlan !== undefined ? { vlan: o.vlan } : {}),
    },
  };
}

/** The report with the last hop's fate in words. */
export function summarize(r: Omit<TraceReport, "result" | "delivered">): TraceReport {
  const last = r.hops.at(-1)!;
  const drop = last.outcomes.find((o) => o.kind === "drop");
  const locals = last.outcomes.flatMap((o) =>
    o.kind === "local" ? [o.port ?? `ofport ${o.ofport}`] : []
  );
  let result: string;
  let delivered = false;
  if (drop?.kind === "drop") {
    result = `dropped on ${last.node}: ${drop.reason}`;
  } else if (last.outcomes.some((o) => o.kind === "reply")) {
    result = `the ARP request is answered on ${last.node}`;
    delivered = true;
  } else if (locals.length) {
    result = `delivered on ${last.node} to ${locals.join(", ")}`;
    delivered = true;
  } else {
    result = `leaves ${last.node}: ${last.outcomes.map(outcomeWords).join("; ")}`;
  }
  if (r.packet.proto === "arp") {
    // Nobody has the address: the request is flooded (or dropped) and no port answers it.
    delivered = false;
    result = drop?.kind === "drop"
      ? `nobody has ${r.target.ip}: the ARP request for it is ${result}`
      : `nobody has ${r.target.ip}: the ARP request for it goes ${
        last.outcomes.map(outcomeWords).join(", ")
      } and no port answers it`;
  }
  return { ...r, result, delivered };
}

/** One outcome of a hop, in words. */
export function outcomeWords(o: TraceHop["outcomes"][number]): string {
  switch (o.kind) {
    case "local":
      return `to ${o.port ?? "a local port"} (ofport ${o.ofport})`;
    case "tunnel":
      return `through the tunnel to node ${
        o.node ?? o.nodeIp
      } (VNI ${o.vni}, endpoint ${o.nodeIp})`;
    case "physnet":
      return `out to physnet ${o.physnet}${
        o.vlan !== undefined ? `, VLAN ${o.vlan}` : ", untagged"
      }`;
    case "reply":
      return `answered, back out of ofport ${o.ofport}`;
    case "drop":
      return `dropped: ${o.reason}`;
  }
}
