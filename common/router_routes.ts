/**
 * The routes of a node's flow model from the tenants' routers (agent/PIPELINE.md, "Routing"), for
 * the agent's flows and knitctl's offline trace alike. Routing happens on the sending node, so a
 * node needs the routes that leave the networks it has pods on, and the networks they lead to
 * (with their ports, wherever those are). The shapes are the flow compiler's (`FlowNetwork`,
 * `FlowRoute` of @knitter/wasm), which common does not import.
 */
import type { RouterInfo } from "./api_types.ts";
import { cidrContains, parseCidr, parseIp } from "./address.ts";

/** What routing needs of a network of the model: its node-local number and gateway. */
export interface RoutedNetwork {
  id: number;
  gateway?: string;
}

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

/** Whether a network of the model can be routed: it has an IPv4 gateway here. */
function routable(net: RoutedNetwork | undefined): net is RoutedNetwork {
  return net?.gateway !== undefined && !net.gateway.includes(":");
}

/**
 * The routes leaving the networks with pods here (`local`): to each other network of the same
 * router (its CIDR), and each static route to the network whose CIDR holds its next hop. Networks
 * the model does not have (no port anywhere yet) or without an IPv4 gateway are left out.
 */
export function flowRoutes(
  routers: Iterable<RouterInfo>,
  networks: Map<string, RoutedNetwork>,
  local: Set<string>,
): ModelRoute[] {
  const routes: ModelRoute[] = [];
  for (const r of routers) {
    const connected = r.networks.filter((n) => routable(networks.get(n.id)));
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
  }
  return routes;
}
