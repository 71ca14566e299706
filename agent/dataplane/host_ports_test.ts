/** Which host ports the local ports' networks need, and the kernel commands of one. */
import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { gatewayMac } from "@knitter/wasm";
import { egressRouteCommands, hostPortSpecs, linkCommands } from "./host_ports.ts";

function port(networkId: string, more: Partial<Port> = {}): Port {
  return {
    id: `p-${networkId}`,
    tenant: "acme",
    network: networkId,
    networkTenant: "acme",
    networkId,
    type: "vxlan",
    ip: "10.1.0.5",
    address: "10.1.0.5/24",
    family: 4,
    gateway: "10.1.0.1",
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "2026-11-25T00:00:00Z",
    ...more,
  };
}

Deno.test("host ports: one per network with egress or hostAccess and an IPv4 gateway", () => {
  const specs = hostPortSpecs([
    { port: port("a", { networkEgress: true }), number: 3 },
    { port: port("a", { networkEgress: true, ip: "10.1.0.6", address: "10.1.0.6/24" }), number: 3 },
    { port: port("b"), number: 4 },
    { port: port("c", { networkHostAccess: true, address: "10.9.8.7/16" }), number: 2 },
    { port: port("d", { networkEgress: true, gateway: undefined }), number: 5 },
  ]);
  assert.deepEqual(specs, [
    {
      number: 2,
      port: "kh2",
      egress: false,
      hostAccess: true,
      networkId: "c",
      mac: gatewayMac("c"),
      gateway: "10.1.0.1",
      prefix: 16,
      cidr: "10.9.0.0/16",
      mtu: 1450,
    },
    {
      number: 3,
      port: "kh3",
      egress: true,
      hostAccess: false,
      networkId: "a",
      mac: gatewayMac("a"),
      gateway: "10.1.0.1",
      prefix: 24,
      cidr: "10.1.0.0/24",
      mtu: 1450,
    },
  ]);
});

Deno.test("host ports: egress alone keeps the subnet out of the main table, in the network's own", () => {
  const [egress] = hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]);
  assert.deepEqual(linkCommands(egress), [
    `link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "addr flush dev kh3",
    "addr add 10.1.0.1/24 dev kh3 noprefixroute",
  ]);
  assert.deepEqual(egressRouteCommands(egress), [
    "route replace 10.1.0.0/24 dev kh3 src 10.1.0.1 table 1802371075",
    "rule add pref 2000 fwmark 1802371075 lookup 1802371075",
  ]);
  const [access] = hostPortSpecs([{ port: port("a", { networkHostAccess: true }), number: 3 }]);
  assert.equal(linkCommands(access)[2], "addr add 10.1.0.1/24 dev kh3");
});
