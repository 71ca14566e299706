import assert from "node:assert/strict";
import type { NodeInfo, Port, ServiceInfo } from "@knitter/common";
import { offlineNode, portKey } from "./trace_model.ts";
import { offlineTrace } from "./trace_offline.ts";

function port(over: Partial<Port>): Port {
  return {
    tenant: "acme",
    networkTenant: "acme",
    type: "vxlan",
    segmentId: 5000,
    ...over,
  } as Port;
}

const nodes = [{ name: "n1", underlayIp: "192.0.2.1" }, {
  name: "n2",
  underlayIp: "192.0.2.2",
}] as NodeInfo[];

/** A router of acme joining red (nr, 10.1.0.0/24) and blue (nb, 10.2.0.0/24). */
const router = {
  name: "r",
  tenant: "acme",
  networks: [
    { name: "red", id: "nr", cidr: "10.1.0.0/24", gateway: "10.1.0.1" },
    { name: "blue", id: "nb", cidr: "10.2.0.0/24", gateway: "10.2.0.1" },
  ],
  routes: [],
  createdAt: "2026-01-01T00:00:00Z",
};

Deno.test("offline model: the node's ports are local, same-network ports elsewhere remote", () => {
  const ports = [
    port({
      id: "a",
      network: "blue",
      networkId: "nb",
      ip: "10.0.0.2",
      mac: "02:00:00:00:00:02",
      node: "n1",
    }),
    port({
      id: "b",
      network: "blue",
      networkId: "nb",
      ip: "10.0.0.3",
      mac: "02:00:00:00:00:03",
      node: "n2",
    }),
    // Another network, only on n2: not in n1's model.
    port({
      id: "c",
      network: "red",
      networkId: "nr",
      ip: "10.9.0.3",
      mac: "02:00:00:00:00:04",
      node: "n2",
      segmentId: 5001,
    }),
    // A VLAN network on n1: its physnet port is numbered.
    port({
      id: "d",
      network: "st",
      networkId: "ns",
      ip: "10.4.0.2",
      mac: "02:00:00:00:00:05",
      node: "n1",
      type: "vlan",
      segmentId: 100,
      physnet: "phys1",
    }),
    // Unbound: nowhere.
    port({ id: "e", network: "blue", networkId: "nb", ip: "10.0.0.9", mac: "02:00:00:00:00:09" }),
  ];
  const m = offlineNode("n1", ports, nodes);
  assert.deepEqual(m.view.localPorts.map((p) => [p.label, p.ofport]), [["acme/a", 1], [
    "acme/d",
    2,
  ]]);
  assert.deepEqual(m.view.networks.map((n) => [n.label, n.id, n.physnetPort]), [
    ["acme/blue", 1, undefined],
    ["acme/st", 2, 200],
  ]);
  assert.deepEqual(m.view.remotePorts.map((r) => [r.label, r.node, r.nodeIp]), [
    ["acme/b", "n2", "192.0.2.2"],
  ]);
  assert.equal(m.ofports.get(portKey(ports[0])), 1);
  assert.ok(m.lines.some((l) => l.includes("set_field:192.0.2.2->tun_dst")), "b behind the tunnel");
  assert.ok(
    m.lines.some((l) => l.includes("in_port=200,dl_vlan=100")),
    "VLAN 100 from the physnet",
  );
  assert.ok(!m.lines.some((l) => l.includes("02:00:00:00:00:04")), "red is not on n1");
});

Deno.test("offline model: a router brings its other networks in, and the routes leave the local ones", () => {
  const net = (id: string, name: string, third: number, segmentId: number) => ({
    network: name,
    networkId: id,
    gateway: `10.${third}.0.1`,
    segmentId,
  });
  const ports = [
    port({ id: "a", ...net("nr", "red", 1, 5001), ip: "10.1.0.2", mac: "02:00:00:00:01:02" }),
    port({ id: "b", ...net("nb", "blue", 2, 5002), ip: "10.2.0.2", mac: "02:00:00:00:02:02" }),
    port({ id: "g", ...net("ng", "green", 3, 5003), ip: "10.3.0.2", mac: "02:00:00:00:03:02" }),
  ].map((p, i) => ({ ...p, address: `${p.ip}/24`, node: i === 0 ? "n1" : "n2" }));
  const m = offlineNode("n1", ports, nodes, [router]);
  // blue (on the router) is modelled here, green (on none) is not.
  assert.deepEqual(m.view.networks.map((n) => n.label), ["acme/red", "acme/blue"]);
  assert.ok(m.lines.some((l) => /table=25,.*nw_dst=10\.2\.0\.0\/24,actions=.*dec_ttl/.test(l)));
  assert.ok(
    m.lines.some((l) =>
      /table=26,.*nw_dst=10\.2\.0\.2,actions=set_field:02:00:00:00:02:02->eth_dst/.test(l)
    ),
  );
  // Without the router, blue is not this node's business.
  assert.deepEqual(offlineNode("n1", ports, nodes).view.networks.map((n) => n.label), ["acme/red"]);
});

Deno.test("offline model: a port's security groups become its flows, group peers their members' addresses", () => {
  const ports = [
    port({
      id: "web",
      network: "blue",
      networkId: "nb",
      ip: "10.0.0.2",
      mac: "02:00:00:00:00:02",
      node: "n1",
      securityGroups: ["web"],
    }),
    port({
      id: "client",
      network: "blue",
      networkId: "nb",
      ip: "10.0.0.3",
      mac: "02:00:00:00:00:03",
      node: "n2",
      securityGroups: ["client"],
    }),
  ];
  const groups = [
    {
      name: "web",
      tenant: "acme",
      rules: [{
        direction: "ingress" as const,
        protocol: "tcp" as const,
        ports: "80",
        peer: { group: "client" },
      }],
      createdAt: "",
      updatedAt: "",
    },
  ];
  const n1 = offlineNode("n1", ports, nodes, [], groups);
  assert.ok(
    n1.lines.some((l) => l.includes("table=51") && l.includes("nw_src=10.0.0.3,tp_dst=80")),
    "web's ingress rule names the client's address",
  );
  // A group nobody knows allows nothing: web keeps its hooks, and no rule lets the client in.
  const unknown = offlineNode("n1", ports, nodes).lines;
  assert.ok(unknown.some((l) => l.includes("table=30,priority=103")));
  assert.ok(!unknown.some((l) => l.includes("nw_src=10.0.0.3")));
});

Deno.test("offline model: two tenants' ports of one ID on a public network are two local ports, each with its own ofport", () => {
  const shared = { network: "pub", networkId: "np", networkTenant: "ops", node: "n1" };
  const ports = [
    port({ ...shared, tenant: "acme", id: "web", ip: "10.7.0.2", mac: "02:00:00:00:07:02" }),
    port({ ...shared, tenant: "globex", id: "web", ip: "10.7.0.3", mac: "02:00:00:00:07:03" }),
  ];
  const m = offlineNode("n1", ports, nodes);
  assert.equal(m.view.localPorts.length, 2);
  const [acme, globex] = ports.map((p) => m.ofports.get(portKey(p)));
  assert.ok(acme !== undefined && globex !== undefined && acme !== globex, `${acme} ${globex}`);
});

Deno.test("offline trace: a pod routed to a service's VIP on another network names its group and every candidate", async () => {
  const blue = {
    network: "blue",
    networkId: "nb",
    segmentId: 5002,
    gateway: "10.2.0.1",
    node: "n2",
  };
  const ports = [
    port({
      id: "c",
      network: "red",
      networkId: "nr",
      gateway: "10.1.0.1",
      node: "n1",
      ip: "10.1.0.2",
    }),
    port({ id: "b1", ...blue, ip: "10.2.0.3" }),
    port({ id: "b2", ...blue, ip: "10.2.0.4" }),
  ].map((p, i) => ({
    ...p,
    family: 4,
    address: `${p.ip}/24`,
    mac: `02:00:00:00:00:0${i + 2}`,
  })) as Port[];
  const service = {
    tenant: "acme",
    name: "front",
    networkId: "nb",
    vip: "10.2.0.100",
    ports: [{ protocol: "TCP", port: 80, targetPort: 8080 }],
    backends: ["b1", "b2"],
  } as unknown as ServiceInfo;
  const ask = { src: ports[0], dst: "10.2.0.100", proto: "tcp", dport: 80 } as const;
  const model = { ports, nodes, routers: [router], groups: [], services: [service] };
  const r = await offlineTrace(model, ask);
  const first = r.hops[0];
  assert.deepEqual(first.node, "n1");
  const kinds = first.steps.map((s) => s.kind);
  assert.deepEqual(kinds.slice(2, 5), ["routeIn", "routeTo", "serviceVipRouted"]);
  const balanced = first.steps.find((s) => s.kind === "serviceNew")!;
  assert.match(balanced.what, /select group \d+ over 10\.2\.0\.3:8080, 10\.2\.0\.4:8080/);
  // Without the service (as before), nothing on n1 takes the VIP.
  const without = await offlineTrace({ ...model, services: [] }, ask);
  assert.ok(!without.hops[0].steps.some((s) => s.kind === "serviceNew"), JSON.stringify(without));
  assert.equal(without.delivered, false);
});
