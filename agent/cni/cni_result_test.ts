import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { cniResult, podRoutes } from "./cni_result.ts";

function port(over: Partial<Port>): Port {
  return {
    id: "p",
    tenant: "acme",
    network: "control",
    networkTenant: "acme",
    networkId: "n-1",
    type: "vxlan",
    segmentId: 5000,
    ip: "10.1.0.5",
    address: "10.1.0.5/24",
    family: 4,
    gateway: "10.1.0.1",
    mac: "02:00:00:00:00:05",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "",
    ...over,
  };
}

Deno.test("cni result: host and pod ends of each interface, ips pointing at the pod end, routes and dns", () => {
  const r = cniResult("/var/run/netns/p", [
    {
      ifName: "eth0",
      hostIfName: "kn1",
      defaultRoute: true,
      port: port({ dns: { nameservers: ["10.1.0.2"] } }),
    },
    {
      ifName: "net1",
      hostIfName: "kn2",
      defaultRoute: false,
      port: port({
        ip: "10.2.0.5",
        address: "10.2.0.5/24",
        gateway: undefined,
        mac: "02:00:00:00:01:05",
        routes: [{ dst: "192.168.0.0/16", via: "10.2.0.254" }, { dst: "10.9.0.0/16" }],
      }),
    },
  ]);
  assert.deepEqual(r.interfaces, [
    { name: "kn1" },
    { name: "eth0", mac: "02:00:00:00:00:05", mtu: 1450, sandbox: "/var/run/netns/p" },
    { name: "kn2" },
    { name: "net1", mac: "02:00:00:00:01:05", mtu: 1450, sandbox: "/var/run/netns/p" },
  ]);
  assert.deepEqual(r.ips, [
    { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 1 },
    { address: "10.2.0.5/24", interface: 3 },
  ]);
  assert.deepEqual(r.routes, [
    { dst: "0.0.0.0/0", gw: "10.1.0.1" },
    { dst: "192.168.0.0/16", gw: "10.2.0.254" },
    { dst: "10.9.0.0/16" },
  ]);
  assert.deepEqual(r.dns, { nameservers: ["10.1.0.2"] });
});

Deno.test("cni result: in a chain our interfaces follow the earlier plugins' and indexes shift", () => {
  const prev = {
    interfaces: [{ name: "lo0" }],
    ips: [{ address: "127.0.0.2/8", interface: 0 }],
    routes: [],
    dns: {},
  };
  const r = cniResult("/ns", [{
    ifName: "eth0",
    hostIfName: "kn1",
    defaultRoute: false,
    port: port({}),
  }], prev);
  assert.equal(r.interfaces[0].name, "lo0");
  assert.deepEqual(r.ips.map((i) => i.interface), [0, 2]);
});

Deno.test("pod routes: IPv6 default route, and no default route without a gateway", () => {
  const v6 = port({ family: 6, ip: "fd00::5", address: "fd00::5/64", gateway: "fd00::1" });
  assert.deepEqual(podRoutes({ ifName: "eth0", hostIfName: "kn", defaultRoute: true, port: v6 }), [
    { dst: "::/0", via: "fd00::1" },
  ]);
  assert.deepEqual(
    podRoutes({
      ifName: "eth0",
      hostIfName: "kn",
      defaultRoute: true,
      port: port({ gateway: undefined }),
    }),
    [],
  );
});

Deno.test("dual stack: the result lists both addresses with their gateways; both default routes are static", () => {
  const dual = port({
    ip6: "fd00:1::5",
    address6: "fd00:1::5/64",
    gateway6: "fd00:1::1",
    routes: [{ dst: "fd00:9::/64", via: "fd00:1::9" }],
  });
  const r = cniResult("/ns", [{
    ifName: "eth0",
    hostIfName: "kn1",
    defaultRoute: true,
    port: dual,
  }]);
  assert.deepEqual(r.ips, [
    { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 1 },
    { address: "fd00:1::5/64", gateway: "fd00:1::1", interface: 1 },
  ]);
  assert.deepEqual(r.routes, [
    { dst: "0.0.0.0/0", gw: "10.1.0.1" },
    { dst: "::/0", gw: "fd00:1::1" },
    { dst: "fd00:9::/64", gw: "fd00:1::9" },
  ]);
  // A network that routes ::/0 itself keeps its own next hop, once.
  const own = port({ ...dual, routes: [{ dst: "::/0", via: "fd00:1::fe" }] });
  assert.deepEqual(podRoutes({ ifName: "eth0", hostIfName: "kn", defaultRoute: true, port: own }), [
    { dst: "0.0.0.0/0", via: "10.1.0.1" },
    { dst: "::/0", via: "fd00:1::fe" },
  ]);
});
