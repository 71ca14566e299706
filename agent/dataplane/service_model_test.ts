/**
 * The services section of the agent's flow model: only services of networks this node has pods
 * on, and as backends only the named ports of the service's tenant and network that are bound.
 */
import assert from "node:assert/strict";
import type { Port, ServiceInfo } from "@knitter/common";
import type { FlowNetwork } from "@knitter/wasm";
import { backendIps, flowServices } from "./service_model.ts";

const port = (id: string, ip: string, more: Partial<Port> = {}) =>
  ({ id, ip, tenant: "acme", networkId: "n-data", family: 4, node: "n2", ...more }) as Port;

const front: ServiceInfo = {
  name: "front",
  tenant: "acme",
  network: "data",
  networkId: "n-data",
  vip: "10.20.0.50",
  ports: [{ protocol: "TCP", port: 80, targetPort: 8080 }, {
    protocol: "UDP",
    port: 53,
    targetPort: 53,
  }],
  backends: ["web-0", "web-1", "web-2", "gone"],
  sessionAffinity: "ClientIP",
  createdAt: "2026-11-28T00:00:00Z",
};

Deno.test("service model: a backend is a named, bound port of the service's tenant and network", () => {
  const ports = [
    port("web-1", "10.20.0.4"),
    port("web-0", "10.20.0.3", { node: "n1" }),
    port("web-2", "10.20.0.5", { node: undefined }), // unbound: no endpoint
    port("web-0", "10.20.0.9", { tenant: "globex" }), // the same ID, another tenant's
    port("web-1", "10.30.0.4", { networkId: "n-other" }), // the same ID, another network
    port("db-0", "10.20.0.6"), // not named
  ];
  assert.deepEqual(backendIps(front, ports), ["10.20.0.3", "10.20.0.4"]);
});

Deno.test("service model: services of the node's own networks only, numbered, with their ports", async () => {
  const networks = new Map<string, FlowNetwork>([
    ["n-data", { id: 3, type: "vxlan", segmentId: 5001 }],
    ["n-routed", { id: 4, type: "vxlan", segmentId: 5002 }],
  ]);
  const elsewhere = { ...front, name: "far", networkId: "n-routed" };
  const absent = { ...front, name: "absent", networkId: "n-none" };
  const numbers: string[] = [];
  const services = await flowServices(
    { services: [front, elsewhere, absent], ports: [port("web-1", "10.20.0.4")] },
    { all: networks, local: new Set(["n-data"]) },
    (key) => (numbers.push(key), Promise.resolve(7)),
  );
  assert.deepEqual(numbers, ["acme/front"]);
  assert.equal(services.length, 1);
  const [s] = services;
  assert.deepEqual(
    [s.id, s.network, s.vip, s.backends, s.affinity, s.ports],
    [7, 3, "10.20.0.50", ["10.20.0.4"], true, [
      { protocol: "tcp", port: 80, targetPort: 8080 },
      { protocol: "udp", port: 53, targetPort: 53 },
    ]],
  );
  assert.match(s.mac, /^0a:58:[0-9a-f]{2}(:[0-9a-f]{2}){3}$/);
});

Deno.test("service model: a selector adds the ports whose labels match, of the same tenant and network", () => {
  const selected = { ...front, backends: ["web-0"], selector: { app: "web" } };
  const ports = [
    port("web-0", "10.20.0.3"),
    port("a", "10.20.0.11", { labels: { app: "web", tier: "x" } }),
    port("b", "10.20.0.9", { labels: { app: "db" } }),
    port("c", "10.20.0.12", { labels: { app: "web" }, node: undefined }),
    port("d", "10.20.0.13", { labels: { app: "web" }, tenant: "globex" }),
  ];
  assert.deepEqual(backendIps(selected, ports), ["10.20.0.3", "10.20.0.11"]);
});

Deno.test("service model: a VIP per family, each over the backends' addresses of its family", async () => {
  const networks = new Map<string, FlowNetwork>([
    ["n-data", { id: 3, type: "vxlan", segmentId: 5001 }],
  ]);
  // A dual-stack service whose first family is IPv6, and one on IPv6 only.
  const dual: ServiceInfo = {
    ...front,
    name: "dual",
    vip: "fd00:20::50",
    vips: ["fd00:20::50", "10.20.0.50"],
    ipFamilies: ["IPv6", "IPv4"],
    ipFamilyPolicy: "RequireDualStack",
  };
  const six: ServiceInfo = {
    ...front,
    name: "six",
    vip: "fd00:20::60",
    vips: ["fd00:20::60"],
    ipFamilies: ["IPv6"],
  };
  const keys: string[] = [];
  const services = await flowServices(
    {
      services: [dual, six],
      ports: [
        port("web-1", "10.20.0.4", { ip6: "fd00:20::4" }),
        port("web-0", "10.20.0.3"), // no IPv6 address: a backend of the IPv4 VIP only
        port("web-2", "fd00:20::5", { family: 6 }),
      ],
    },
    { all: networks, local: new Set(["n-data"]) },
    (key) => Promise.resolve(keys.push(key)),
  );
  // The IPv4 VIP keeps the number of "tenant/name", as before services had IPv6.
  assert.deepEqual(keys, ["acme/dual/IPv6", "acme/dual", "acme/six/IPv6"]);
  assert.deepEqual(services.map((s) => [s.id, s.vip, s.backends]), [
    [1, "fd00:20::50", ["fd00:20::4", "fd00:20::5"]],
    [2, "10.20.0.50", ["10.20.0.3", "10.20.0.4"]],
    [3, "fd00:20::60", ["fd00:20::4", "fd00:20::5"]],
  ]);
  assert.equal(services[0].mac, services[1].mac);
});
