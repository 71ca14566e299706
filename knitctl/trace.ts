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
  type SecurityGroup,
  type ServiceInfo,
} from "@knitter/common";
import { formatIp, parseIp, parseMac } from "@knitter/common/address";
import type { RouterInfo } from "@knitter/common";
import { requireFlagsOf, str, VERB_FLAGS } from "./args.ts";
import { DEFAULT_AGENT_SOCKET, traceOnAgent } from "./agent_client.ts";
import type { AttachContext } from "./attach.ts";
import { UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json } from "./output.ts";
import {
  followTrace,
  type HopAt,
  offlineHops,
  outcomeWords,
  sourceOf,
  summarize,
  type TraceAsk,
  type TraceModel,
  tracePlan,
  type TraceReport,
} from "./trace_offline.ts";
import * as V from "./values.ts";
import { managerClient } from "./verbs.ts";

export type { TraceReport } from "./trace_offline.ts";

export async function trace(c: AttachContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.trace, "trace");
  if (c.line.args.length) {
    throw new UsageError(`trace takes flags only, not "${c.line.args.join(" ")}"`);
  }
  const f = c.line.flags;
  const offline = f.offline === true;
  const dst = str(f, "dst");
  if (!dst || !isIp(dst)) {
    throw new UsageError("trace needs --dst IP, the destination's IPv4 or IPv6 address");
  }
  // Canonical, as the ports and the flows spell addresses.
  const to = canonicalIp(dst);
  const proto = str(f, "proto") ?? "icmp";
  if (!["tcp", "udp", "icmp"].includes(proto)) {
    throw new UsageError(`--proto "${proto}" must be tcp, udp or icmp`);
  }
  const dport = str(f, "dport");
  if (dport !== undefined && proto === "icmp") {
    throw new UsageError("--dport goes with --proto tcp or udp");
  }
  for (const [flag, ok] of [["src-ip", isIp], ["src-mac", isMac], ["mac", isMac]] as const) {
    const v = str(f, flag);
    if (v !== undefined && !ok(v)) throw new UsageError(`--${flag} "${v}" is malformed`);
  }
  // A packet is of one family: its source's is the destination's.
  for (const flag of ["src-ip", "ip"]) {
    const v = str(f, flag);
    if (v !== undefined && isIp(v) && isIpv4(v) !== isIpv4(to)) {
      throw new UsageError(`--${flag} "${v}" is not of --dst ${to}'s family`);
    }
  }

  const whatIf = str(f, "src") === undefined && offline ? whatIfArgs(c) : undefined;
  const client = await managerClient(c.settings);
  let ports: Port[];
  let nodes: NodeInfo[];
  let network: WhatIfNetwork | undefined;
  let groups: SecurityGroup[];
  let services: ServiceInfo[];
  try {
    [ports, nodes, groups, network, services] = await Promise.all([
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
      offline ? servicesOf(client, c.settings.tenant) : [],
    ]);
  } catch (err) {
    throw explainManagerError(err, `knitctl -t ${c.settings.tenant} get networks`);
  } finally {
    client.close();
  }
  const { src, hypothetical } = whatIf && network
    ? { src: whatIfPort(c, whatIf, network), hypothetical: true }
    : source(c, ports);
  const routers = await tenantRouters(c, src.networkTenant);
  const model: TraceModel = { ports, nodes, routers, groups, services };
  const srcMac = str(f, "src-mac");
  const ask: TraceAsk = {
    src,
    hypothetical,
    dst: to,
    proto: proto as TraceAsk["proto"],
    ...(dport !== undefined ? { dport: V.integer("dport", dport, 0, 65535) } : {}),
    ...(str(f, "src-ip") !== undefined ? { srcIp: canonicalIp(str(f, "src-ip")!) } : {}),
    ...(srcMac !== undefined ? { srcMac: parseMac(srcMac)! } : {}),
  };
  const { packet, target } = tracePlan(model, ask);
  const hopAt: HopAt = offline
    ? offlineHops(model, ask, target)
    : (node, from, wire) =>
      traceOnAgent(socketOf(c, node, node === src.node), { from, packet: wire, target });
  const hops = await followTrace(
    model,
    ask,
    packet,
    target,
    hopAt,
    (next) =>
      offline || reachable(c, next)
        ? undefined
        : `the trace stops here: node ${next}'s agent is not reachable from this knitctl (use --stack, or trace there)`,
  );
  const report = summarize({
    mode: offline ? "offline" : "live",
    source: sourceOf(ask),
    packet,
    target,
    hops,
  });
  c.io.out(c.settings.output === "json" ? json(report) : render(report));
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
  if (isIp(from)) {
    const ip = canonicalIp(from);
    found = ports.filter((p) => (p.ip === ip || p.ip6 === ip) && p.node);
    if (found.length > 1 && str(f, "tenant") !== undefined) {
      found = found.filter((p) => p.tenant === c.settings.tenant);
    }
  } else if (parts.length === 3) {
    const [tenant, network, id] = parts;
    found = ports.filter((p) => p.tenant === tenant && p.network === network && p.id === id);
  } else {
    throw new UsageError(`--src "${from}" must be TENANT/NETWORK/PORT or an IP address`);
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
  if (!node || !network || !ip || !isIp(ip)) {
    throw new UsageError(
      "trace --offline of a pod that does not exist yet needs --node NAME, --network NAME (-t TENANT) and --ip IP (or --src for an existing one)",
    );
  }
  return { node, network, ip: canonicalIp(ip) };
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
    address: `${w.ip}/${isIpv4(w.ip) ? 32 : 128}`,
    family: isIpv4(w.ip) ? 4 : 6,
    mac: parseMac(str(c.line.flags, "mac") ?? "") ?? "02:00:00:00:ff:01",
    mtu: net.mtu,
    routes: [],
    dns: {},
    node: w.node,
    createdAt: new Date().toISOString(),
  } as Port;
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

function isIp(text: string): boolean {
  return parseIp(text) !== null;
}

function canonicalIp(text: string): string {
  return formatIp(parseIp(text)!);
}

function isMac(text: string): boolean {
  return parseMac(text) !== null;
}

/** The groups the offline model needs: every tenant's (admin), else the tenant's own. */
function securityGroups(client: ManagerClient, tenant: string): Promise<SecurityGroup[]> {
  return everyOrOwn(client, () => client.listSecurityGroups(), tenant, "security-groups");
}

/** The services the offline model needs: every tenant's (admin), else the tenant's own. */
function servicesOf(client: ManagerClient, tenant: string): Promise<ServiceInfo[]> {
  return everyOrOwn(client, () => client.listServices(), tenant, "services");
}

/** Every tenant's items (`every`), or, where the token may not list them all, the tenant's own. */
async function everyOrOwn<T>(
  client: ManagerClient,
  every: () => Promise<T[]>,
  tenant: string,
  collection: string,
): Promise<T[]> {
  try {
    return await every();
  } catch (err) {
    if (!(err instanceof ManagerError && err.status === 403)) throw err;
    const path = `/api/v1/tenants/${encodeURIComponent(tenant)}/${collection}`;
    return (await client.request<{ items: T[] }>("GET", path)).items;
  }
}
