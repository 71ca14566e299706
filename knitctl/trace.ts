/**
 * trace: what the pipeline does with one packet on each node it passes, in words. Live, each node's
 * agent runs it through its switch (`ofproto/trace`); offline (`--offline`), the flows come from
 * the manager's model and the flow compiler (trace_model.ts) and the offline evaluator runs them,
 * also for a pod that does not exist yet. Both give the same steps; the packet is followed to the
 * next node when it leaves through the tunnel or the physnet towards a known port.
 */
import {
  type ManagerClient,
  ManagerError,
  type NodeInfo,
  type Port,
  type RouterInfo,
  type SecurityGroup,
} from "@knitter/common";
import { cidrContains, networkOf, parseIp, parseIpPrefix, parseMac } from "@knitter/common/address";
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
import { requireFlagsOf, str, VERB_FLAGS } from "./args.ts";
import { DEFAULT_AGENT_SOCKET, traceOnAgent } from "./agent_client.ts";
import type { AttachContext } from "./attach.ts";
import { UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json } from "./output.ts";
import { type OfflineNode, offlineNode, portKey } from "./trace_model.ts";
import * as V from "./values.ts";
import { managerClient } from "./verbs.ts";

/** A node is visited once; a packet never needs more hops than this here. */
const MAX_HOPS = 4;

/** Where the packet enters the next node, as the agent's route takes it. */
type From =
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

export async function trace(c: AttachContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.trace, "trace");
  if (c.line.args.length) {
    throw new UsageError(`trace takes flags only, not "${c.line.args.join(" ")}"`);
  }
  const f = c.line.flags;
  const offline = f.offline === true;
  const to = str(f, "dst");
  if (!to || !isIpv4(to)) {
    throw new UsageError("trace needs --dst IP, the destination's IPv4 address");
  }
  const proto = str(f, "proto") ?? "icmp";
  if (!["tcp", "udp", "icmp"].includes(proto)) {
    throw new UsageError(`--proto "${proto}" must be tcp, udp or icmp`);
  }
  const dport = str(f, "dport");
  if (dport !== undefined && proto === "icmp") {
    throw new UsageError("--dport goes with --proto tcp or udp");
  }
  for (const [flag, ok] of [["src-ip", isIpv4], ["src-mac", isMac], ["mac", isMac]] as const) {
    const v = str(f, flag);
    if (v !== undefined && !ok(v)) throw new UsageError(`--${flag} "${v}" is malformed`);
  }

  const whatIf = str(f, "src") === undefined && offline ? whatIfArgs(c) : undefined;
  const client = await managerClient(c.settings);
  let ports: Port[];
  let nodes: NodeInfo[];
  let network: WhatIfNetwork | undefined;
  let groups: SecurityGroup[];
  try {
    [ports, nodes, groups, network] = await Promise.all([
      client.listPorts(),
      client.listNodes(),
      offline ? securityGroups(client, c.settings.tenant) : [],
      whatIf
        ? client.request<WhatIfNetwork>(
          "GET",
          `/api/v1/tenants/${encodeURIComponent(c.settings.tenant)}/networks/${
            encodeURIComponent(whatIf.network)
          }`,
        )
        : undefined,
    ]);
  } catch (err) {
    throw explainManagerError(err, `knitctl -t ${c.settings.tenant} get networks`);
  } finally {
    client.close();
  }
  const { src, hypothetical } = whatIf && network
    ? { src: whatIfPort(c, whatIf, network), hypothetical: true }
    : source(c, ports);
  const all = hypothetical ? [...ports, src] : ports;
  // On its own network first, then the tenant's (a router may connect it), then anyone's.
  const owner = all.find((p) => p.ip === to && p.networkId === src.networkId) ??
    all.find((p) => p.ip === to && p.node && p.networkTenant === src.networkTenant) ??
    all.find((p) => p.ip === to && p.node);
  const routers = await tenantRouters(c, src.networkTenant);
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
      : {}),
  };
  // Nobody has the address: the pod's ARP request for it is what goes out.
  // Off its subnet, a pod whose network is on a router sends to its gateway (its default route),
  // which routes it; otherwise the trace sends to the owner's MAC, to show where it is stopped.
  const viaGateway = offSubnet(src, to) &&
    routers.some((r) => r.networks.some((n) => n.id === src.networkId));
  const packet: TracePacket = {
    proto: owner || viaGateway ? proto as TracePacket["proto"] : "arp",
    dlSrc: parseMac(str(f, "src-mac") ?? src.mac) ?? src.mac,
    dlDst: viaGateway
      ? gatewayMac(src.networkId)
      : owner
      ? owner.mac.toLowerCase()
      : "ff:ff:ff:ff:ff:ff",
    ipSrc: str(f, "src-ip") ?? src.ip,
    ipDst: to,
    ...(owner && dport !== undefined ? { dstPort: V.integer("dport", dport, 0, 65535) } : {}),
  };

  const hops: TraceHop[] = [];
  const offlineNodes = new Map<string, OfflineNode>();
  let node = src.node!;
  let from: From = { kind: "port", portId: src.id, tenant: src.tenant };
  // The packet as it leaves each node: a route rewrites its MACs on the way.
  let wire = packet;
  while (hops.length < MAX_HOPS) {
    let hop: TraceHop;
    if (offline) {
      const model = offlineNodes.get(node) ??
        offlineNodes.set(node, offlineNode(node, all, nodes, routers, groups)).get(node)!;
      const ingress: TraceIngress = from.kind === "port"
        ? { kind: "port", ofport: model.ofports.get(portKey(src))! }
        : from;
      const walked = evaluate(
        flowTables(model.lines),
        evalPacket(model.view, ingress, wire),
        flowGroups(model.lines),
      );
      hop = explainHop(model.view, ingress, wire, walked.matched, {
        mode: "offline",
        target,
        ...(walked.balanced ? { balanced: walked.balanced } : {}),
      });
    } else {
      hop = await traceOnAgent(socketOf(c, node, hops.length === 0), {
        from,
        packet: wire,
        target,
      });
    }
    hops.push(hop);
    wire = rewritten(wire, hop);
    const next = nextHop(hop, nodes, target, node);
    if (!next || hops.some((h) => h.node === next.node)) break;
    if (!offline && !reachable(c, next.node)) {
      hop.outcomes.push({
        kind: "drop",
        code: "not_followed",
        reason:
          `the trace stops here: node ${next.node}'s agent is not reachable from this knitctl (use --stack, or trace there)`,
      });
      break;
    }
    node = next.node;
    from = next.from;
  }
  const report = summarize({
    mode: offline ? "offline" : "live",
    source: {
      port: hypothetical ? `${src.tenant}/${src.id}` : portLabel(src),
      network: `${src.networkTenant}/${src.network}`,
      node: src.node!,
      ...(hypothetical ? { hypothetical: true } : {}),
    },
    packet,
    target,
    hops,
  });
  c.io.out(c.settings.output === "json" ? json(report) : render(report));
}

/** Whether `to` lies off the source port's subnet, with a gateway to send it to. */
function offSubnet(src: Port, to: string): boolean {
  const own = parseIpPrefix(src.address, "required");
  const ip = parseIp(to);
  if ("error" in own || !ip || own.prefix === undefined || src.gateway === undefined) return false;
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

/** The routers of the source's tenant, for the offline model (the agents know them live). */
async function tenantRouters(c: AttachContext, tenant: string): Promise<RouterInfo[]> {
  const client = await managerClient(c.settings);
  try {
    return (await client.request<{ items: RouterInfo[] }>(
      "GET",
      `/api/v1/tenants/${encodeURIComponent(tenant)}/routers`,
    )).items;
  } catch (err) {
    throw explainManagerError(err, `knitctl -t ${tenant} get routers`);
  } finally {
    client.close();
  }
}

/** The source port: an existing one (--from), or a pod that does not exist yet (offline). */
function source(c: AttachContext, ports: Port[]): { src: Port; hypothetical: boolean } {
  const f = c.line.flags;
  const from = str(f, "src");
  if (from === undefined) {
    throw new UsageError(
      "trace needs --src TENANT/NETWORK/PORT or --src IP (or, with --offline, --node, --network and --ip for a pod that does not exist yet)",
    );
  }
  const parts = from.split("/");
  let found: Port[];
  if (isIpv4(from)) {
    found = ports.filter((p) => p.ip === from && p.node);
    if (found.length > 1 && str(f, "tenant") !== undefined) {
      found = found.filter((p) => p.tenant === c.settings.tenant);
    }
  } else if (parts.length === 3) {
    const [tenant, network, id] = parts;
    found = ports.filter((p) => p.tenant === tenant && p.network === network && p.id === id);
  } else {
    throw new UsageError(`--src "${from}" must be TENANT/NETWORK/PORT or an IPv4 address`);
  }
  if (found.length === 0) {
    throw new UsageError(`No port ${from} bound to a node: "knitctl get ports" lists them`);
  }
  if (found.length > 1) {
    throw new UsageError(
      `${from} is the address of ${
        found.map((p) => `${p.tenant}/${p.network}/${p.id}`).join(", ")
      }: name the port (TENANT/NETWORK/PORT) or the tenant (-t)`,
    );
  }
  if (!found[0].node) throw new UsageError(`Port ${from} is not bound to a node`);
  return { src: found[0], hypothetical: false };
}

/** What the manager says of the network of a pod that does not exist yet. */
interface WhatIfNetwork {
  id: string;
  tenant: string;
  name: string;
  type: Port["type"];
  segmentId?: number;
  physnet?: string;
  mtu: number;
}

/** `--offline --node N --network NET [-t T] --ip IP [--mac MAC]`, checked. */
function whatIfArgs(c: AttachContext): { node: string; network: string; ip: string } {
  const f = c.line.flags;
  const node = str(f, "node");
  const network = str(f, "network");
  const ip = str(f, "ip");
  if (!node || !network || !ip || !isIpv4(ip)) {
    throw new UsageError(
      "trace --offline of a pod that does not exist yet needs --node NAME, --network NAME (-t TENANT) and --ip IP (or --src for an existing one)",
    );
  }
  return { node, network, ip };
}

/** The port a pod on `network` would get, as if bound to the node now. */
function whatIfPort(
  c: AttachContext,
  w: { node: string; ip: string },
  net: WhatIfNetwork,
): Port {
  return {
    id: "what-if",
    tenant: c.settings.tenant,
    network: net.name,
    networkTenant: net.tenant,
    networkId: net.id,
    type: net.type,
    ...(net.segmentId !== undefined ? { segmentId: net.segmentId } : {}),
    ...(net.physnet !== undefined ? { physnet: net.physnet } : {}),
    ip: w.ip,
    address: `${w.ip}/32`,
    family: 4,
    mac: parseMac(str(c.line.flags, "mac") ?? "") ?? "02:00:00:00:ff:01",
    mtu: net.mtu,
    routes: [],
    dns: {},
    node: w.node,
    createdAt: new Date().toISOString(),
  } as Port;
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

/** The agent socket of `node`: the stack's, or --agent-socket / the default for the first hop. */
function socketOf(c: AttachContext, node: string, first: boolean): string {
  const stack = c.settings.stack;
  const known = stack?.nodes.find((n) => n.name === node);
  if (known) return known.agentSocket;
  const explicit = str(c.line.flags, "agent-socket") ?? c.env("KNITCTL_AGENT_SOCKET");
  if (first) return explicit ?? DEFAULT_AGENT_SOCKET;
  throw new UsageError(`No agent socket known for node ${node}`);
}

function reachable(c: AttachContext, node: string): boolean {
  return c.settings.stack?.nodes.some((n) => n.name === node) ?? false;
}

function summarize(r: Omit<TraceReport, "result" | "delivered">): TraceReport {
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

function outcomeWords(o: TraceHop["outcomes"][number]): string {
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

function render(r: TraceReport): string {
  const p = r.packet;
  const l4 = p.dstPort !== undefined ? ` port ${p.dstPort}` : "";
  const out = [
    `${r.mode} trace: ${p.proto} ${p.ipSrc} -> ${p.ipDst}${l4} from ${r.source.port}${
      r.source.hypothetical ? " (not bound yet)" : ""
    } on network ${r.source.network}, node ${r.source.node}`,
  ];
  for (const hop of r.hops) {
    out.push("", `node ${hop.node}: in from ${hop.ingress}`);
    for (const s of hop.steps) {
      out.push(
        `  ${String(s.table).padStart(2)} ${s.tableName.padEnd(9)} prio ${
          String(s.priority).padStart(3)
        }  cookie ${s.cookie}  ${s.kind.padEnd(15)} ${s.what}`,
      );
    }
    for (const o of hop.outcomes) out.push(`  => ${outcomeWords(o)}`);
  }
  out.push("", `result: ${r.result}`);
  return out.join("\n") + "\n";
}

function isIpv4(text: string): boolean {
  return parseIp(text)?.family === 4;
}

function isMac(text: string): boolean {
  return parseMac(text) !== null;
}

/** The groups the offline model needs: every tenant's (admin), else the tenant's own. */
async function securityGroups(client: ManagerClient, tenant: string): Promise<SecurityGroup[]> {
  try {
    return await client.listSecurityGroups();
  } catch (err) {
    if (!(err instanceof ManagerError && err.status === 403)) throw err;
    const path = `/api/v1/tenants/${encodeURIComponent(tenant)}/security-groups`;
    return (await client.request<{ items: SecurityGroup[] }>("GET", path)).items;
  }
}
