/**
 * What the slow path answers with, per pod port of the flow model: the port's MAC, and its
 * network's gateway MAC and addresses (the same the flows answer ARP, ND and ping with).
 * @module
 */
import type { FlowInput } from "@knitter/wasm";
import { ipBytes, macBytes } from "./frames.ts";
import type { PuntNetwork, PuntPort } from "./router_slow_path.ts";
import type { AdvertSettings } from "./router_advert.ts";

/** The networks of `model` that have a gateway, by node-local number, with their advertisements. */
function puntNetworks(
  model: FlowInput,
  adverts: Map<number, AdvertSettings>,
): Map<number, PuntNetwork> {
  const out = new Map<number, PuntNetwork>();
  for (const n of model.networks) {
    if (!n.gateway || !n.gatewayMac) continue;
    const gateways = [n.gateway, ...(n.gateway6 ? [n.gateway6] : [])];
    const v4 = gateways.find((g) => !g.includes(":"));
    const v6 = gateways.find((g) => g.includes(":"));
    out.set(n.id, {
      gatewayMac: macBytes(n.gatewayMac),
      ...(v4 ? { gateway4: ipBytes(v4) } : {}),
      ...(v6 ? { gateway6: ipBytes(v6) } : {}),
      ...(adverts.has(n.id) ? { advert: adverts.get(n.id) } : {}),
    });
  }
  return out;
}

/** The local ports of `model` on a network with a gateway, by ofport. */
export function puntPorts(
  model: FlowInput,
  adverts = new Map<number, AdvertSettings>(),
): Map<number, PuntPort> {
  const networks = puntNetworks(model, adverts);
  const out = new Map<number, PuntPort>();
  for (const p of model.localPorts) {
    const network = networks.get(p.network);
    if (network) out.set(p.ofport, { mac: macBytes(p.mac), network });
  }
  return out;
}
