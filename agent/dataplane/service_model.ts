/**
 * The services section of the flow compiler's input (agent/PIPELINE.md, "Services"): the services
 * of the networks this node has pods on (and of those a router joins to them), with their backends
 * resolved against the ports the feed knows. A backend is a port the service names, of its tenant and network, bound to a node: a port
 * deleted or unbound is out of the next compile, without a service change.
 */
import { MAX_SERVICE_BACKENDS, type Port, type ServiceInfo } from "@knitter/common";
import { type FlowNetwork, type FlowService, gatewayMac } from "@knitter/wasm";

/**
 * The ready backends' IPv4 addresses of a service among `ports`: the ports it names, or its
 * selector matches, of its tenant and network, bound to a node; at most MAX_SERVICE_BACKENDS (the
 * first by address).
 */
export function backendIps(s: ServiceInfo, ports: Iterable<Port>): string[] {
  const named = new Set(s.backends);
  const chosen = (p: Port) =>
    named.has(p.id) ||
    (s.selector !== undefined &&
      Object.entries(s.selector).every(([k, v]) => p.labels?.[k] === v));
  const out: string[] = [];
  for (const p of ports) {
    if (p.networkId !== s.networkId || p.tenant !== s.tenant || !chosen(p)) continue;
    if (p.node === undefined || p.family !== 4) continue;
    out.push(p.ip);
  }
  return out.sort(byAddress).slice(0, MAX_SERVICE_BACKENDS);
}

/** Dotted quads in numeric order. */
function byAddress(a: string, b: string): number {
  const n = (ip: string) => ip.split(".").reduce((v, x) => v * 256 + Number(x), 0);
  return n(a) - n(b);
}

/**
 * The flow model's services: those of `networks` whose manager IDs are in `local` (networks a pod
 * of this node is on, or a router joins to one), numbered by `number` (stable per "tenant/name").
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
    if (!net || !networks.local.has(s.networkId) || balancedVip(s) === undefined) continue;
    out.push(flowService(s, net.id, await number(`${s.tenant}/${s.name}`), ports));
  }
  return out.sort((a, b) => a.id - b.id);
}

/**
 * The VIP the flows balance: the service's IPv4 one (the compiler has no IPv6 service flows yet,
 * PIPELINE.md "Services"), whichever family is first; none for an IPv6-only service, which is then
 * left out of the compile rather than failing it for the node's every network.
 */
export function balancedVip(s: Pick<ServiceInfo, "vip" | "vips">): string | undefined {
  return (s.vips ?? [s.vip]).find((v) => !v.includes(":"));
}

/** A service's MAC, the same on every node (the gateway MAC's rule, on the service's name). */
export function serviceMac(s: Pick<ServiceInfo, "tenant" | "name" | "networkId">): string {
  return gatewayMac(["service", s.networkId, `${s.tenant}/${s.name}`].join("/"));
}

/** Service `s` as the compiler takes it: on network number `network`, as number `id`. */
export function flowService(
  s: ServiceInfo,
  network: number,
  id: number,
  ports: Iterable<Port>,
): FlowService {
  return {
    id,
    network,
    vip: balancedVip(s) ?? s.vip,
    mac: serviceMac(s),
    ports: s.ports.map((p) => ({
      protocol: p.protocol === "UDP" ? "udp" : "tcp",
      port: p.port,
      targetPort: p.targetPort,
    })),
    backends: backendIps(s, ports),
    affinity: s.sessionAffinity === "ClientIP",
  };
}
