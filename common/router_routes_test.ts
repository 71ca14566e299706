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

Deno.test("flowRoutes: IPv6 routes between the networks' IPv6 subnets (dual stack's cidr6, IPv6-only's cidr), static ones by their next hop's family", () => {
  const r: RouterInfo = {
    name: "r",
    tenant: "acme",
    networks: [
      {
        name: "red",
        id: "red",
        cidr: "10.1.0.0/24",
        gateway: "10.1.0.1",
        cidr6: "fd00:1::/64",
        gateway6: "fd00:1::1",
      },
      { name: "blue", id: "blue", cidr: "fd00:2::/64", gateway: "fd00:2::1" },
      { name: "green", id: "green", cidr: "10.3.0.0/24", gateway: "10.3.0.1" },
    ],
    routes: [
      { dst: "fd00:9::/48", via: "fd00:2::9" },
      { dst: "10.9.0.0/16", via: "10.3.0.9" },
    ],
    createdAt: "2026-01-01T00:00:00Z",
  };
  const networks = new Map<string, RoutedNetwork>([
    ["red", { id: 1, gateway: "10.1.0.1", gateway6: "fd00:1::1" }],
    ["blue", net(2, "fd00:2::1")],
    ["green", net(3, "10.3.0.1")],
  ]);
  assert.deepEqual(flowRoutes([r], networks, new Set(["red"])), [
    { from: 1, to: 3, dst: "10.3.0.0/24" },
    { from: 1, to: 3, dst: "10.9.0.0/16", via: "10.3.0.9" },
    { from: 1, to: 2, dst: "fd00:2::/64" },
    { from: 1, to: 2, dst: "fd00:9::/48", via: "fd00:2::9" },
  ]);
  // IPv6-only blue reaches red's IPv6 side only; green (IPv4 only) is not an IPv6 network.
  assert.deepEqual(flowRoutes([r], networks, new Set(["blue"])), [
    { from: 2, to: 1, dst: "fd00:1::/64" },
    { from: 2, to: 2, dst: "fd00:9::/48", via: "fd00:2::9" },
  ]);
  // Without its IPv6 gateway here, red is not routed to over IPv6 (blue's static route stays).
  networks.set("red", net(1, "10.1.0.1"));
  assert.deepEqual(flowRoutes([r], networks, new Set(["blue"])), [
    { from: 2, to: 2, dst: "fd00:9::/48", via: "fd00:2::9" },
  ]);
});
