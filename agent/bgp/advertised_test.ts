/** What a node advertises: hosted advertised networks, its own pods' host routes, nothing else. */
import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { advertisedRoutes } from "./advertised.ts";

function port(networkId: string, ip: string, more: Partial<Port> = {}): Port {
  return {
    id: `p-${ip}`,
    tenant: "acme",
    network: networkId,
    networkTenant: "acme",
    networkId,
    type: "vxlan",
    ip,
    address: `${ip}/24`,
    family: 4,
    gateway: "10.1.0.1",
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "2026-11-28T00:00:00Z",
    networkAdvertise: true,
    ...more,
  };
}

const A5 = port("a", "10.1.0.5", { address6: "fd00:1::5/64" });
const A6 = port("a", "10.1.0.6");
const B = port("b", "10.2.0.5", { address: "10.2.0.5/24" });
const QUIET = port("q", "10.3.0.5", { networkAdvertise: undefined });
const ELSEWHERE = port("e", "10.4.0.9", { node: "n2" });

Deno.test("advertised: a hosted network's CIDRs and its local pods' host routes, both families", () => {
  const got = advertisedRoutes({
    local: [A5, A6, QUIET],
    ready: new Set(["a", "q"]),
    all: [A5, A6, QUIET, ELSEWHERE],
    from: "hosting",
  });
  assert.deepEqual(got, {
    v4: ["10.1.0.0/24", "10.1.0.5/32", "10.1.0.6/32"],
    v6: ["fd00:1::/64", "fd00:1::5/128"],
  });
});

Deno.test("advertised: not before the node's host port on the network is set up (it could not take the traffic in)", () => {
  const got = advertisedRoutes({ local: [A5, B], ready: new Set(["b"]), all: [], from: "hosting" });
  assert.deepEqual(got, { v4: ["10.2.0.0/24", "10.2.0.5/32"], v6: [] });
});

Deno.test("advertised: from every node, every advertised network's CIDR, host routes only for its own pods", () => {
  const got = advertisedRoutes({
    local: [A5],
    ready: new Set(["a"]),
    all: [A5, ELSEWHERE, QUIET],
    from: "all",
  });
  assert.deepEqual(got, {
    v4: ["10.1.0.0/24", "10.1.0.5/32", "10.4.0.0/24"],
    v6: ["fd00:1::/64", "fd00:1::5/128"],
  });
});

/** What a node with network q ready advertises for a port and a claim's inactive port. */
function routesOfActive(active: Port, inactive: Port) {
  return advertisedRoutes({
    local: [active, inactive],
    ready: new Set(["q"]),
    all: [active],
    from: "all",
  });
}

Deno.test("advertised: a local pod's floating address as a /32, on any network, once its host port is set up; never a claim's inactive port's", () => {
  const F = port("q", "10.3.0.7", { networkAdvertise: undefined, floating: "203.0.113.5" });
  const INACTIVE = port("q", "10.3.0.8", {
    networkAdvertise: undefined,
    floating: "203.0.113.6",
    active: false,
  });
  const got = routesOfActive(F, INACTIVE);
  assert.deepEqual(got, { v4: ["203.0.113.5/32"], v6: [] });
  const early = advertisedRoutes({ local: [F], ready: new Set(), all: [], from: "hosting" });
  assert.deepEqual(early, { v4: [], v6: [] });
});

Deno.test("advertised: a local pod's IPv6 floating address as a /128 beside its IPv4 one's /32; never a claim's inactive port's", () => {
  const F = port("q", "10.3.0.7", {
    networkAdvertise: undefined,
    address6: "fd00:3::7/64",
    floating: "203.0.113.5",
    floating6: "2001:db8:f::5",
  });
  const INACTIVE = port("q", "10.3.0.8", {
    networkAdvertise: undefined,
    address6: "fd00:3::8/64",
    floating6: "2001:db8:f::6",
    active: false,
  });
  const got = routesOfActive(F, INACTIVE);
  assert.deepEqual(got, { v4: ["203.0.113.5/32"], v6: ["2001:db8:f::5/128"] });
});
