/**
 * The services section of the flow compiler's input (agent/PIPELINE.md, "Services"): the services
 * of the networks this node has pods on (and of those a router joins to them), with their backends
 * resolved against the ports the feed knows. A backend is a port the service names, of its tenant
 * and network, bound to a node: a port deleted or unbound is out of the next compile, without a
 * service change. A service with a VIP per family (dual stack) is one compiler service per VIP,
 * each with the backends' addresses of that family.
 */
import { MAX_SERVICE_BACKENDS, type Port, type ServiceInfo } from "@knitter/common";
import { parseIp } from "@knitter/common/address";
import { type FlowNetwork, type FlowService, gatewayMac } from "@knitter/wasm";

/** An address family, as the ports' `family` spells it. */
type Family = 4 | 6;

/** The family of an address text (a colon is IPv6). */
function familyOf(ip: string): Family {
  return ip.includes(":") ? 6 : 4;
}

/** A port's address of `family`: its own, or its IPv6 pair on a dual-stack network. */
function addressOf(p: Port, family: Family): string | undefined {
  if (p.family === family) return p.ip;
  return family === 6 ? p.ip6 : undefined;
}

/**
 * The ready backends' addresses of `family` (default: the VIP's) of a service among `ports`: the
 * ports it names, or its selector matches, of its tenant and network, bound to a node; at most
 * MAX_SERVICE_BACKENDS (the first by address). A port without an address of that family is no
 * backend of that family's VIP.
 */
export function backendIps(
  s: ServiceInfo,
  ports: Iterable<Port>,
  family: Family = familyOf(s.vip),
): string[] {
  const named = new Set(s.backends);
  const chosen = (p: Port) =>
    named.has(p.id) ||
    (s.selector !== undefined &&
      Object.entries(s.selector).every(([k, v]) => p.labels?.[k] === v));
  const out: string[] = [];
  for (const p of ports) {
    if (p.networkId !== s.networkId || p.tenant !== s.tenant || !chosen(p)) continue;
    const ip = addressOf(p, family);
    if (p.node === undefined || ip === undefined) continue;
    out.push(ip);
  }
  return out.sort(byAddress).slice(0, MAX_SERVICE_BACKENDS);
}

/** Addresses of one family in numeric order. */
function byAddress(a: string, b: string): number {
  const [x, y] = [parseIp(a)?.value ?? 0n, parseIp(b)?.value ?? 0n];
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * A service's VIPs as the flows balance them, each with the key its compiler number is kept under:
 * the IPv4 VIP under "tenant/name" (the number it had before services had IPv6), the IPv6 one
 * under "tenant/name/IPv6".
 */
export function serviceVips(
  s: Pick<ServiceInfo, "tenant" | "name" | "vip" | "vips">,
): { vip: string; key: string }[] {
  return (s.vips ?? [s.vip]).map((vip) => ({
    vip,
    key: familyOf(vip) === 4 ? `${s.tenant}/${s.name}` : `${s.tenant}/${s.name}/IPv6`,
  }));
}

/**
 * The flow model's services: those of `networks` whose manager IDs are in `local` (networks a pod
 * of this node is on, or a router joins to one), one per VIP, numbered by `number` (stable per key
 * of serviceVips).
 */
export async function flowServices(
  view: { services: Iterable<ServiceInfo>; ports: Iterable<Port> },
  networks: { all: Map<string, FlowNetwork>; local: ReadonlySet<string> },
  number: (service: string) => Promise<number>,
): Promise<FlowService[]> {
  const out: FlowService[] = [];
  const ports = [...view.ports];
  for (const s of view.services) {
    const net = networks.all.get(s.networkId);
    if (!net || !networks.local.has(s.networkId)) continue;
    for (const { vip, key } of serviceVips(s)) {
      out.push(flowService(s, net.id, await number(key), ports, vip));
    }
  }
  return out.sort((a, b) => a.id - b.id);
}

/** A service's MAC, the same on every node (the gateway MAC's rule, on the service's name). */
export function serviceMac(s: Pick<ServiceInfo, "tenant" | "name" | "networkId">): string {
  return gatewayMac(["service", s.networkId, `${s.tenant}/${s.name}`].join("/"));
}

/**
 * Service `s`'s VIP `vip` (default: its first) as the compiler takes it: on network number
 * `network`, as number `id`, over the backends' addresses of the VIP's family.
 */
export function flowService(
  s: ServiceInfo,
  network: number,
  id: number,
  ports: Iterable<Port>,
  vip = s.vip,
): FlowService {
  return {
    id,
    network,
    vip,
    mac: serviceMac(s),
    ports: s.ports.map((p) => ({
      protocol: p.protocol === "UDP" ? "udp" : "tcp",
      port: p.port,
      targetPort: p.targetPort,
    })),
    backends: backendIps(s, ports, familyOf(vip)),
    affinity: s.sessionAffinity === "ClientIP",
  };
}
