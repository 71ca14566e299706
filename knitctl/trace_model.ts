/**
 * A node's flows as the manager's model implies them, for `knitctl trace --offline`: the ports
 * bound to the node are its local ports, the ports of the same networks on other nodes its remote
 * ports, and the flow compiler (../wasm/flows.ts) makes the lines the agent would. Node-local
 * numbers (ofports, cookies, network numbers, physnet patch ports) are the agent's own and unknown
 * here: they are numbered in order (ports from 1, the tunnel 100, physnet ports from 200), so an
 * offline trace names the same flows and outcomes as a live one with other numbers.
 */
import type { NodeInfo, Port, RouterInfo, SecurityGroup, ServiceInfo } from "@knitter/common";
import { flowRoutes, portIps, routedNetworks } from "@knitter/common";
import { aclsOf } from "@knitter/agent/acl_model";
import { flowService, serviceVips } from "@knitter/agent/service_model";
import {
  compileFlows,
  flowGateways,
  type FlowInput,
  isolateConflicts,
  portLabel,
  type TraceView,
} from "@knitter/wasm";

/** The agent's default tunnel ofport (agent/config.ts). */
const TUNNEL_OFPORT = 100;
/** The agent's first physnet patch port (agent/dataplane/dataplane.ts). */
const PATCH_OFPORT_BASE = 200;

export interface OfflineNode {
  view: TraceView;
  lines: string[];
  /** The ofport of each local port, by port key (portKey). */
  ofports: Map<string, number>;
}

/**
 * A port's key across tenants and networks: port IDs are a tenant's own, so two tenants' ports on a
 * public network may share one.
 */
export function portKey(p: Pick<Port, "networkId" | "id" | "tenant">): string {
  return `${p.networkId}/${p.id}/${p.tenant}`;
}

/**
 * The flows and names of `node` from the manager's ports, nodes and routers: as the agent models
 * it, the networks a router connects to one with pods here are the node's too (their ports are
 * remote), and the routes leave the local ones. The security groups its ports are in become their
 * flows as the agent resolves them (agent/dataplane/acl_model.ts), and the services of the node's
 * networks their VIPs' balancing (agent/dataplane/service_model.ts), numbered in order.
 */
export function offlineNode(
  node: string,
  ports: Port[],
  nodes: NodeInfo[],
  routers: RouterInfo[] = [],
  groups: SecurityGroup[] = [],
  services: ServiceInfo[] = [],
): OfflineNode {
  const local = ports.filter((p) => p.node === node).sort((a, b) =>
    portKey(a) < portKey(b) ? -1 : 1
  );
  const localIds = new Set(local.map((p) => p.networkId));
  const routed = routedNetworks(routers, localIds);
  const netIds = [
    ...[...localIds].sort(),
    ...[...routed].filter((id) => ports.some((p) => p.networkId === id)).sort(),
  ];
  const physnets = [
    ...new Set(netIds.flatMap((id) => ports.find((p) => p.networkId === id)?.physnet ?? [])),
  ].sort();
  const networkNo = new Map(netIds.map((id, i) => [id, i + 1]));
  const view: TraceView = {
    node,
    tunnelPort: TUNNEL_OFPORT,
    networks: netIds.map((id) => {
      const p = ports.find((x) => x.networkId === id && x.node === node) ??
        ports.find((x) => x.networkId === id)!;
      return {
        id: networkNo.get(id)!,
        label: `${p.networkTenant}/${p.network}`,
        type: p.type,
        ...(p.segmentId !== undefined ? { segmentId: p.segmentId } : {}),
        ...(p.physnet !== undefined
          ? { physnet: p.physnet, physnetPort: PATCH_OFPORT_BASE + physnets.indexOf(p.physnet) }
          : {}),
        // The distributed gateway, as the agent models it.
        ...flowGateways(id, p.gateway, p.gateway6),
        ...(p.networkDscp !== undefined ? { dscp: p.networkDscp } : {}),
      };
    }),
    localPorts: local.map((p, i) => ({
      ofport: i + 1,
      network: networkNo.get(p.networkId)!,
      label: portLabel(p),
      mac: p.mac,
      ips: portIps(p),
    })),
    remotePorts: [],
  };
  const ipOf = new Map(nodes.map((n) => [n.name, n.underlayIp]));
  for (const p of ports) {
    const network = networkNo.get(p.networkId);
    const nodeIp = p.node ? ipOf.get(p.node) : undefined;
    if (!p.node || p.node === node || network === undefined || !nodeIp) continue;
    view.remotePorts.push({
      network,
      mac: p.mac,
      ips: portIps(p),
      nodeIp,
      node: p.node,
      label: portLabel(p),
    });
  }
  const model: FlowInput = {
    tunnelPort: TUNNEL_OFPORT,
    networks: view.networks.map((n) => ({
      id: n.id,
      type: n.type,
      ...(n.segmentId !== undefined && n.type !== "flat" ? { segmentId: n.segmentId } : {}),
      ...(n.physnetPort !== undefined ? { physnetPort: n.physnetPort } : {}),
      ...(n.gateway !== undefined ? { gateway: n.gateway, gatewayMac: n.gatewayMac } : {}),
      ...(n.gateway6 !== undefined ? { gateway6: n.gateway6 } : {}),
      ...(n.dscp !== undefined ? { dscp: n.dscp } : {}),
    })),
    localPorts: view.localPorts.map((p) => ({
      ofport: p.ofport,
      network: p.network,
      mac: p.mac,
      ips: p.ips,
      cookie: p.ofport,
    })),
    remotePorts: view.remotePorts.map((r) => ({
      network: r.network,
      mac: r.mac,
      ips: r.ips,
      nodeIp: r.nodeIp,
    })),
    routes: flowRoutes(
      routers,
      new Map(view.networks.map((n) => [netIds[n.id - 1], n])),
      localIds,
    ),
  };
  const byName = new Map(groups.map((g) => [`${g.tenant}/${g.name}`, g]));
  const acls = aclsOf(local.map((port, i) => ({ port, cookie: i + 1 })), {
    securityGroup: (tenant, name) => byName.get(`${tenant}/${name}`),
    ports: () => ports,
    port: () => undefined,
  });
  if (acls.length > 0) model.acls = acls;
  // One compiler service per VIP (a dual-stack service has two), numbered in order.
  const modelled = services.filter((s) => networkNo.has(s.networkId)).flatMap((s) =>
    serviceVips(s).map(({ vip }) => ({ s, vip }))
  );
  if (modelled.length > 0) {
    model.services = modelled.map(({ s, vip }, i) =>
      flowService(s, networkNo.get(s.networkId)!, i + 1, ports, vip)
    );
  }
  return {
    view,
    lines: compileFlows(isolateConflicts(model).input),
    ofports: new Map(local.map((p, i) => [portKey(p), i + 1])),
  };
}
