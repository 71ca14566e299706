/**
 * The routes of a node's flow model from the tenants' routers (agent/PIPELINE.md, "Routing"), for
 * the agent's flows and knitctl's offline trace alike. Routing happens on the sending node, so a
 * node needs the routes that leave the networks it has pods on, and the networks they lead to
 * (with their ports, wherever those are). The shapes are the flow compiler's (`FlowNetwork`,
 * `FlowRoute` of @knitter/wasm), which common does not import.
 */
import type { RouterInfo } from "./api_types.ts";
import { cidrContains, parseCidr, parseIp } from "./address.ts";

/** What routing needs of a network of the model: its node-local number and gateways. */
export interface RoutedNetwork {
  id: number;
  /** IPv4, or an IPv6-only network's IPv6. */
  gateway?: string;
  /** A dual-stack network's IPv6 gateway. */
  gateway6?: string;
}

/** A router's network, as the router names it (RouterInfo). */
type RouterNetwork = RouterInfo["networks"][number];

/** A route of the flow model (FlowRoute). */
export interface ModelRoute {
  from: number;
  to: number;
  dst: string;
  via?: string;
}

/** The networks (manager IDs) a router connects to one of `local`: the model must have them too. */
export function routedNetworks(routers: Iterable<RouterInfo>, local: Set<string>): Set<string> {
  const out = new Set<string>();
  for (const r of routers) {
    if (!r.networks.some((n) => local.has(n.id))) continue;
    for (const n of r.networks) if (!local.has(n.id)) out.add(n.id);
  }
  return out;
}

/** The gateway of a network of the model in one family, if it has one here. */
function gatewayOf(net: RoutedNetwork | undefined, v6: boolean): string | undefined {
  if (net?.gateway !== undefined && net.gateway.includes(":") === v6) return net.gateway;
  return v6 ? net?.gateway6 : undefined;
}

/** A router network's CIDR in one family: its `cidr`, or a dual-stack network's `cidr6`. */
function cidrOf(n: RouterNetwork, v6: boolean): string | undefined {
  return n.cidr.includes(":") === v6 ? n.cidr : v6 ? n.cidr6 : undefined;
}

/**
 * The routes leaving the networks with pods here (`local`), for IPv4 and IPv6 each: to each other
 * network of the same router (its CIDR of that family), and each static route of that family to
 * the network whose CIDR holds its next hop. Networks the model does not have (no port anywhere
 * yet) or without a gateway and a CIDR of the family are left out of that family's routes.
 */
export function flowRoutes(
  routers: Iterable<RouterInfo>,
  networks: Map<string, RoutedNetwork>,
  local: Set<string>,
): ModelRoute[] {
  const routes: ModelRoute[] = [];
  for (const r of routers) {
    for (const v6 of [false, true]) routes.push(...familyRoutes(r, networks, local, v6));
  }
  return routes;
}

/** The routes of one router in one family (flowRoutes). */
function familyRoutes(
  r: RouterInfo,
  networks: Map<string, RoutedNetwork>,
  local: Set<string>,
  v6: boolean,
): ModelRoute[] {
  const routes: ModelRoute[] = [];
  const connected = r.networks.flatMap((n) => {
    const cidr = cidrOf(n, v6);
    return cidr && gatewayOf(networks.get(n.id), v6) ? [{ id: n.id, cidr }] : [];
  });
  const hops = r.routes.flatMap((s) => {
    const via = parseIp(s.via);
    const on = via && connected.find((n) => {
      const cidr = parseCidr(n.cidr);
      return !("error" in cidr) && cidrContains(cidr, via);
    });
    return on ? [{ ...s, to: networks.get(on.id)!.id }] : [];
  });
  for (const from of connected) {
    if (!local.has(from.id)) continue;
    const id = networks.get(from.id)!.id;
    for (const to of connected) {
      if (to !== from) routes.push({ from: id, to: networks.get(to.id)!.id, dst: to.cidr });
    }
    for (const h of hops) routes.push({ from: id, to: h.to, dst: h.dst, via: h.via });
  }
  return routes;
}
