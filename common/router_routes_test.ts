import assert from "node:assert/strict";
import type { RouterInfo } from "./api_types.ts";
import { flowRoutes, type RoutedNetwork, routedNetworks } from "./router_routes.ts";

const router = (networks: [string, string][], routes: RouterInfo["routes"] = []): RouterInfo => ({
  name: "r",
  tenant: "acme",
  networks: networks.map(([id, cidr]) => ({
    name: id,
    id,
    cidr,
    gateway: cidr.replace(/0\/\d+$/, "1"),
  })),
  routes,
  createdAt: "2026-01-01T00:00:00Z",
});

const net = (id: number, gateway?: string): RoutedNetwork => ({
  id,
  ...(gateway ? { gateway } : {}),
});

Deno.test("routedNetworks: the other networks of a router that connects one of ours, only those", () => {
  const routers = [
    router([["red", "10.1.0.0/24"], ["blue", "10.2.0.0/24"], ["green", "10.3.0.0/24"]]),
    router([["pink", "10.4.0.0/24"], ["gray", "10.5.0.0/24"]]),
  ];
  assert.deepEqual([...routedNetworks(routers, new Set(["red"]))].sort(), ["blue", "green"]);
  assert.deepEqual([...routedNetworks(routers, new Set(["other"]))], []);
});

Deno.test("flowRoutes: routes leave only our networks; static routes go to the next hop's network", () => {
  const routers = [
    router([["red", "10.1.0.0/24"], ["blue", "10.2.0.0/24"], ["v6", "fd00::/64"]], [
      { dst: "10.9.0.0/16", via: "10.2.0.9" },
      // A next hop in no connected network here: no route.
      { dst: "10.8.0.0/16", via: "10.7.0.9" },
    ]),
  ];
  const networks = new Map([
    ["red", net(1, "10.1.0.1")],
    ["blue", net(2, "10.2.0.1")],
    ["v6", net(3, "fd00::1")],
  ]);
  assert.deepEqual(flowRoutes(routers, networks, new Set(["red"])), [
    { from: 1, to: 2, dst: "10.2.0.0/24" },
    { from: 1, to: 2, dst: "10.9.0.0/16", via: "10.2.0.9" },
  ]);
  // A connected network this node does not have (no port anywhere yet) is not routed to.
  networks.delete("blue");
  assert.deepEqual(flowRoutes(routers, networks, new Set(["red"])), []);
});
