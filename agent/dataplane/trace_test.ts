/**
 * Live and offline traces agree: the sample node's flows (agent/PIPELINE.md) go into a real Open
 * vSwitch (a simulated node: userspace datapath, private daemons), and each packet is traced by the
 * switch (`ofproto/trace`, as the agent does) and by the offline evaluator over the same lines.
 * Both must match the same flows and say the same. Needs root and openvswitch-switch; cleans up
 * by pid and by the names it made, also on failure.
 */
import assert from "node:assert/strict";
import {
  compileFlows,
  evalPacket,
  evaluate,
  explainHop,
  flowTables,
  ofprotoFlow,
  parseOfprotoTrace,
  type TraceIngress,
  type TracePacket,
  type TraceTarget,
  type TraceView,
} from "@knitter/wasm";
import { scenarios } from "../../wasm/testdata/scenarios.ts";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode } from "../../devstack/sim_node.ts";
import { Ovs } from "./ovs.ts";

const model = scenarios.sample_node;

const view: TraceView = {
  node: "n1",
  tunnelPort: 100,
  networks: [
    {
      id: 1,
      label: "acme/blue",
      type: "vxlan",
      segmentId: 1001,
      gateway: model.networks[0].gateway,
      gatewayMac: model.networks[0].gatewayMac,
    },
    { id: 2, label: "acme/red", type: "vlan", segmentId: 100, physnet: "phys1", physnetPort: 200 },
  ],
  localPorts: model.localPorts.map((p) => ({
    ofport: p.ofport,
    network: p.network,
    label: `acme/p${p.ofport}`,
    mac: p.mac,
    ips: p.ips,
  })),
  remotePorts: [{
    network: 1,
    mac: "02:00:0a:00:00:04",
    ips: ["10.0.0.4"],
    nodeIp: "192.168.0.12",
    node: "n2",
    label: "acme/far",
  }],
};

const P1 = { dlSrc: "02:00:0a:00:00:02", ipSrc: "10.0.0.2" };

interface Case {
  name: string;
  ingress: TraceIngress;
  packet: TracePacket;
  target?: TraceTarget;
  /** The outcome kinds (and drop code) both must give. */
  expect: string;
}

const cases: Case[] = [
  {
    name: "TCP to a remote port: the tunnel to its node",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "tcp", dlDst: "02:00:0a:00:00:04", ipDst: "10.0.0.4", dstPort: 80 },
    expect: "tunnel",
  },
  {
    name: "UDP to a local port of the same network",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "udp", dlDst: "02:00:0a:00:00:03", ipDst: "10.0.0.3", dstPort: 53 },
    expect: "local",
  },
  {
    name: "a spoofed source address",
    ingress: { kind: "port", ofport: 1 },
    packet: {
      ...P1,
      ipSrc: "10.0.0.9",
      proto: "udp",
      dlDst: "02:00:0a:00:00:03",
      ipDst: "10.0.0.3",
      dstPort: 53,
    },
    expect: "drop:spoofed_ip",
  },
  {
    name: "a spoofed source MAC",
    ingress: { kind: "port", ofport: 2 },
    packet: { ...P1, proto: "icmp", dlDst: "02:00:0a:00:00:02", ipDst: "10.0.0.2" },
    expect: "drop:spoofed_mac",
  },
  {
    name: "ICMP to the VLAN network's port from the VXLAN one (another network)",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "icmp", dlDst: "02:00:ac:10:00:02", ipDst: "172.16.0.2" },
    target: { ip: "172.16.0.2", owner: { label: "acme/p3", network: "acme/red" } },
    expect: "drop:other_network",
  },
  {
    name: "unknown unicast on the VLAN network: out to the physnet, tagged",
    ingress: { kind: "port", ofport: 3 },
    packet: {
      proto: "icmp",
      dlSrc: "02:00:ac:10:00:02",
      ipSrc: "172.16.0.2",
      dlDst: "02:00:ac:10:00:09",
      ipDst: "172.16.0.9",
    },
    expect: "physnet",
  },
  {
    name: "from the tunnel to a local port",
    ingress: { kind: "tunnel", vni: 1001 },
    packet: {
      proto: "icmp",
      dlSrc: "02:00:0a:00:00:04",
      ipSrc: "10.0.0.4",
      dlDst: "02:00:0a:00:00:02",
      ipDst: "10.0.0.2",
    },
    expect: "local",
  },
  {
    name: "from the tunnel, for nobody here: never sent back out",
    ingress: { kind: "tunnel", vni: 1001 },
    packet: {
      proto: "icmp",
      dlSrc: "02:00:0a:00:00:04",
      ipSrc: "10.0.0.4",
      dlDst: "02:00:0a:00:00:77",
      ipDst: "10.0.0.77",
    },
    expect: "drop:from_outside",
  },
  {
    name: "from an unknown VNI",
    ingress: { kind: "tunnel", vni: 4242 },
    packet: {
      proto: "icmp",
      dlSrc: "02:00:0a:00:00:04",
      ipSrc: "10.0.0.4",
      dlDst: "02:00:0a:00:00:02",
      ipDst: "10.0.0.2",
    },
    expect: "drop:unknown_ingress",
  },
  {
    name: "from the physnet with the network's VLAN",
    ingress: { kind: "physnet", physnet: "phys1", vlan: 100 },
    packet: {
      proto: "tcp",
      dlSrc: "02:00:ac:10:00:09",
      ipSrc: "172.16.0.9",
      dlDst: "02:00:ac:10:00:02",
      ipDst: "172.16.0.2",
      dstPort: 22,
    },
    expect: "local",
  },
  {
    name: "an ARP request for a remote address: answered in place",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "arp", dlDst: "ff:ff:ff:ff:ff:ff", ipDst: "10.0.0.4" },
    expect: "reply",
  },
  {
    name: "an ARP request for the gateway: answered in place by the gateway",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "arp", dlDst: "ff:ff:ff:ff:ff:ff", ipDst: "10.0.0.1" },
    expect: "reply",
  },
  {
    name: "a ping to the gateway: the echo reply back out of the port",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "icmp", dlDst: "0a:58:00:00:00:01", ipDst: "10.0.0.1" },
    expect: "reply",
  },
  {
    name: "TCP to the gateway MAC of a network on no router: dropped",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "tcp", dlDst: "0a:58:00:00:00:01", ipDst: "10.0.0.1", dstPort: 80 },
    expect: "drop:gateway",
  },
  {
    name: "an ARP request for an unknown address: flooded",
    ingress: { kind: "port", ofport: 1 },
    packet: { ...P1, proto: "arp", dlDst: "ff:ff:ff:ff:ff:ff", ipDst: "10.0.0.99" },
    expect: "local,tunnel",
  },
];

function summary(outcomes: { kind: string; code?: string }[]): string {
  return outcomes.map((o) => (o.kind === "drop" ? `drop:${o.code}` : o.kind)).join(",");
}

Deno.test("trace: live (ofproto/trace on a real switch) and offline (the evaluator) match the same flows and say the same, allowed and dropped", async () => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "tr", cleanup });
  const ovs = new Ovs(node.ovs);
  try {
    await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
    await ovs.ensureVxlanPort("br-int", "vxlan0", 100);
    await ovs.ensureBridge("brp0", { datapathType: "netdev", failMode: "standalone" });
    await ovs.ensurePatchPair("br-int", "pi-phys1", "brp0", "pp-phys1", 200);
    await ovs.addPorts(
      "br-int",
      model.localPorts.map((p) => ({
        name: `tr${p.ofport}`,
        type: "internal",
        ofportRequest: p.ofport,
      })),
    );
    await liveMatchesOffline(ovs, compileFlows(model), view, cases);
  } finally {
    await ovs.close();
  }
});

/** Loads `lines` into the switch and checks each case live against offline: flows, words, outcome. */
async function liveMatchesOffline(
  ovs: Ovs,
  lines: string[],
  view: TraceView,
  cases: Case[],
): Promise<void> {
  await ovs.bundle("br-int", lines, [], { replaceAll: true });
  const tables = flowTables(lines);
  for (const c of cases) {
    const packet = evalPacket(view, c.ingress, c.packet);
    const text = await ovs.ofprotoTrace("br-int", ofprotoFlow(packet));
    const live = parseOfprotoTrace(text, "br-int");
    const offline = evaluate(tables, packet).matched;
    assert.deepEqual(
      live.map((f) => f.line),
      offline.map((f) => f.line),
      `${c.name}: the same flows\n${text}`,
    );
    const target = c.target ? { target: c.target } : {};
    const a = explainHop(view, c.ingress, c.packet, live, { mode: "live", ...target });
    const b = explainHop(view, c.ingress, c.packet, offline, { mode: "offline", ...target });
    assert.deepEqual({ ...a, mode: "offline" }, b, `${c.name}: the same words`);
    assert.equal(summary(a.outcomes), c.expect, `${c.name}: ${JSON.stringify(a, null, 1)}`);
    for (const o of a.outcomes) {
      if (o.kind === "drop") assert.ok(o.reason.length > 20, `${c.name}: a reason in words`);
    }
  }
}

/** Pod 1 takes TCP 80 from 10.0.0.0/24, pod 2 opens TCP 443 only, pod 3 has no groups. */
const guarded = scenarios.security_groups;
const guardedView: TraceView = {
  node: "n1",
  tunnelPort: 100,
  networks: [{ id: 1, label: "acme/app", type: "vxlan", segmentId: 5001 }],
  localPorts: guarded.localPorts.map((p) => ({ ...p, label: `acme/g${p.ofport}` })),
  remotePorts: [],
};

/** TCP from pod `from` to pod `to` of the security_groups model. */
function tcpCase(name: string, from: number, to: number, dstPort: number, expect: string): Case {
  const [a, b] = [guarded.localPorts[from - 1], guarded.localPorts[to - 1]];
  return {
    name,
    ingress: { kind: "port", ofport: a.ofport },
    packet: {
      proto: "tcp",
      dlSrc: a.mac,
      ipSrc: a.ips[0],
      dlDst: b.mac,
      ipDst: b.ips[0],
      dstPort,
    },
    expect,
  };
}

Deno.test("trace: through security groups, live (ct followed as +trk+new) and offline say the same", async () => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "sg", cleanup });
  const ovs = new Ovs(node.ovs);
  try {
    await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
    await ovs.ensureVxlanPort("br-int", "vxlan0", 100);
    await ovs.addPorts(
      "br-int",
      guarded.localPorts.map((p) => ({
        name: `sg${p.ofport}`,
        type: "internal",
        ofportRequest: p.ofport,
      })),
    );
    await liveMatchesOffline(ovs, compileFlows(guarded), guardedView, [
      tcpCase("an ingress rule allows TCP 80 from the subnet", 3, 1, 80, "local"),
      tcpCase("no ingress rule for TCP 81", 3, 1, 81, "drop:security_group"),
      tcpCase("an egress rule allows TCP 443, committed on the way out", 2, 3, 443, "local"),
      tcpCase("no egress rule for TCP 80", 2, 1, 80, "drop:security_group"),
    ]);
  } finally {
    await ovs.close();
  }
});

/** IPv6 routing (golden model routing6): red (1, dual stack) and blue (2, IPv6 only) joined. */
const routed6 = scenarios.routing6;
const routed6View: TraceView = {
  node: "n1",
  tunnelPort: 100,
  networks: routed6.networks.map((n) => ({
    ...n,
    label: ["acme/red", "acme/blue", "acme/green"][n.id - 1],
    ...(n.physnetPort !== undefined ? { physnet: "phys1" } : {}),
  })),
  localPorts: routed6.localPorts.map((p) => ({ ...p, label: `acme/r${p.ofport}` })),
  remotePorts: [{ ...routed6.remotePorts[0], node: "n2", label: "acme/far" }],
};

/** From red's pod (fd00:1::2) to `ipDst` through red's gateway MAC (routed) or to `dlDst`. */
function v6Case(
  name: string,
  packet: Partial<TracePacket> & { ipDst: string },
  expect: string,
): Case {
  const red = routed6.localPorts[0];
  return {
    name,
    ingress: { kind: "port", ofport: red.ofport },
    packet: {
      proto: "tcp",
      dlSrc: red.mac,
      ipSrc: red.ips[1],
      dlDst: routed6.networks[0].gatewayMac!,
      dstPort: 80,
      ...packet,
    },
    expect,
  };
}

Deno.test("trace: routed IPv6, live (ofproto/trace) and offline say the same, allowed and dropped", async () => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "r6", cleanup });
  const ovs = new Ovs(node.ovs);
  try {
    await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
    await ovs.ensureVxlanPort("br-int", "vxlan0", 100);
    await ovs.ensureBridge("brp0", { datapathType: "netdev", failMode: "standalone" });
    await ovs.ensurePatchPair("br-int", "pi-phys1", "brp0", "pp-phys1", 200);
    await ovs.addPorts(
      "br-int",
      routed6.localPorts.map((p) => ({
        name: `r6${p.ofport}`,
        type: "internal",
        ofportRequest: p.ofport,
      })),
    );
    await liveMatchesOffline(ovs, compileFlows(routed6), routed6View, [
      v6Case("TCP routed into blue, to the CNF here", { ipDst: "fd00:2::9" }, "local"),
      v6Case("UDP through the static route's next hop", {
        proto: "udp",
        ipDst: "fd00:9::1",
        dstPort: 53,
      }, "local"),
      v6Case("ICMPv6 echo to red's IPv6 gateway: answered", {
        proto: "icmp",
        ipDst: "fd00:1::1",
        dstPort: undefined,
      }, "reply"),
      v6Case("TCP to red's remote port, not routed: the tunnel", {
        ipDst: "fd00:1::3",
        dlDst: "02:00:0a:01:00:03",
      }, "tunnel"),
      v6Case("TCP to green, on no router", { ipDst: "fd00:3::2" }, "drop:no_route"),
      v6Case("TCP to red's IPv6 gateway: port unreachable", { ipDst: "fd00:1::1" }, "drop:gateway"),
      v6Case("TCP routed into blue, where no port has the address", {
        ipDst: "fd00:2::77",
      }, "drop:no_port"),
      v6Case(
        "TCP from another address",
        { ipSrc: "fd00:1::99", ipDst: "fd00:2::9" },
        "drop:spoofed_ip",
      ),
    ]);
  } finally {
    await ovs.close();
  }
});
