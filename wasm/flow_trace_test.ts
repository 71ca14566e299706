/**
 * The trace's reading of flows: every flow the compiler makes is told as the builder that made it
 * (at that builder's table and priority), and ofproto/trace's printout becomes canonical lines.
 */
import assert from "node:assert/strict";
import { evaluate, flowGroups, flowTables, parseFlowLine } from "./flow_eval.ts";
import {
  evalPacket,
  explainHop,
  flowKind,
  ofprotoFlow,
  parseOfprotoTrace,
  type TraceView,
} from "./flow_trace.ts";
import { compileFlows } from "./flows.ts";
import { ACL_KINDS } from "./acl_pipeline.ts";
import { SERVICE_KINDS, splitGroups } from "./service_pipeline.ts";
import { isolateConflicts } from "./flow_conflicts.ts";
import { FLOW_KINDS, PRIORITY } from "./pipeline.ts";
import { scenarios } from "./testdata/scenarios.ts";
import type { FlowInput } from "./flow_input.ts";

/** The trace's view of a model, its networks and pods labelled as the agent labels them. */
function viewOf(
  model: FlowInput,
  network: (id: number) => string,
  pod = (ofport: number) => `pods/pod-${ofport}/eth0`,
): TraceView {
  return {
    node: "node-1",
    tunnelPort: model.tunnelPort,
    networks: model.networks.map((n) => ({ ...n, label: network(n.id) })),
    localPorts: model.localPorts.map((p) => ({ ...p, label: pod(p.ofport) })),
    remotePorts: model.remotePorts,
  };
}

Deno.test("flowKind names the builder of every compiled flow, at its table and priority", () => {
  const seen = new Set<string>();
  for (const [name, model] of Object.entries(scenarios)) {
    // The security group and service flows have tests of their own (below).
    const plain = { ...isolateConflicts(model).input, acls: undefined, services: undefined };
    for (const line of compileFlows(plain)) {
      const f = parseFlowLine(line);
      const kind = flowKind(f);
      seen.add(kind);
      if (kind === "default") {
        assert.equal(f.priority, PRIORITY.DEFAULT, `${name}: ${line}`);
        continue;
      }
      const k = FLOW_KINDS[kind as keyof typeof FLOW_KINDS];
      assert.ok(k, `${name}: ${line} is told as "${kind}"`);
      // A route's priority is the kind's plus twice its prefix length (plus one if static).
      const priority = kind === "routeTo" && f.priority - k.priority <= 2 * 128 + 1
        ? k.priority
        : f.priority;
      assert.deepEqual([f.table, priority], [k.table, k.priority], `${name}: ${line}`);
    }
  }
  // The scenarios make every kind of IPv4 and IPv6 flow there is.
  assert.deepEqual([...seen].sort(), [...Object.keys(FLOW_KINDS), "default"].sort());
});

Deno.test("parseOfprotoTrace reads br-int's flows only, as canonical lines", () => {
  const text = `Flow: icmp,in_port=3,vlan_tci=0x0000,dl_src=02:00:ac:10:00:02

bridge("br-int")
----------------
 0. in_port=3,vlan_tci=0x0000/0x1fff, priority 100, cookie 0x200000003
    set_field:0x2->reg0
    set_field:0x3->reg1
    goto_table:10
10. ip,in_port=3,dl_src=02:00:ac:10:00:02,nw_src=172.16.0.2, priority 100, cookie 0x200000003
    goto_table:20
20. priority 0
    goto_table:30
30. reg0=0x2, priority 10, cookie 0x200000000
    push_vlan:0x8100
    set_field:4196->vlan_vid
    output:200

bridge("brp0")
--------------
 0. priority 0
    NORMAL
     -> no learned MAC for destination, flooding

Final flow: icmp,reg0=0x2,reg1=0x3,in_port=3
Datapath actions: push_vlan(vid=100,pcp=0),3
`;
  assert.deepEqual(parseOfprotoTrace(text, "br-int").map((f) => f.line), [
    "cookie=0x0000000200000003,table=0,priority=100,in_port=3,vlan_tci=0x0000/0x1fff,actions=set_field:0x2->reg0,set_field:0x3->reg1,goto_table:10",
    "cookie=0x0000000200000003,table=10,priority=100,ip,in_port=3,dl_src=02:00:ac:10:00:02,nw_src=172.16.0.2,actions=goto_table:20",
    "cookie=0x0000000000000000,table=20,priority=0,actions=goto_table:30",
    "cookie=0x0000000200000000,table=30,priority=10,reg0=0x2,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:200",
  ]);
});

Deno.test("offline: an ARP for the gateway and a ping to it are answered by the gateway", () => {
  const model = scenarios.gateways;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `tenant-${id}/net-${id}`);
  // Networks 1 and 2 are two tenants' networks with the same CIDR and gateway address.
  // The trace follows IPv4 and ARP packets (flow_eval.ts): the IPv6 gateway's flows are told apart
  // by flowKind above and checked on a real switch by tests/e2e_gateway_test.ts.
  for (const p of model.localPorts.filter((p) => !p.ips[0].includes(":"))) {
    const net = model.networks.find((n) => n.id === p.network)!;
    const label = `tenant-${net.id}/net-${net.id}`;
    const ingress = { kind: "port", ofport: p.ofport } as const;
    const arp = {
      proto: "arp",
      dlSrc: p.mac,
      dlDst: "ff:ff:ff:ff:ff:ff",
      ipSrc: p.ips[0],
      ipDst: net.gateway!,
    } as const;
    const ping = { ...arp, proto: "icmp", dlDst: net.gatewayMac!.toLowerCase() } as const;
    for (const packet of [arp, ping]) {
      const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
      const hop = explainHop(view, ingress, packet, matched, { mode: "offline" });
      assert.deepEqual(hop.outcomes, [{ kind: "reply", ofport: p.ofport }], packet.proto);
      const answer = hop.steps.find((s) =>
        s.kind === (arp === packet ? "arpReply" : "gatewayPing")
      );
      assert.ok(answer, `${packet.proto}: ${hop.steps.map((s) => s.kind)}`);
      assert.match(
        answer.what,
        new RegExp(
          `the gateway of network ${label}: answered here by the gateway \\(MAC ${
            net.gatewayMac!.toLowerCase()
          }\\)`,
          "i",
        ),
      );
      // Only the network's own gateway flows answer (reg0): never the other tenant's.
      assert.ok(
        matched.every((f) =>
          f.cookie === "0x0000000000000000" || Number(BigInt(f.cookie) >> 32n) === net.id
        ),
      );
    }
    // Anything else to the gateway MAC is dropped, saying why.
    const tcp = { ...ping, proto: "tcp", dstPort: 80 } as const;
    const matched = evaluate(tables, evalPacket(view, ingress, tcp)).matched;
    const hop = explainHop(view, ingress, tcp, matched, { mode: "offline" });
    assert.equal(hop.steps.at(-1)?.kind, "gatewayDrop");
    assert.equal(hop.outcomes[0].kind === "drop" && hop.outcomes[0].code, "gateway");
  }
});

Deno.test("offline: routed traffic is told step by step; a network no router connects is not reached", () => {
  const model = scenarios.routing;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`);
  const [red, blue, green] = model.localPorts;
  const ingress = { kind: "port", ofport: red.ofport } as const;
  const trace = (ipDst: string) => {
    const packet = {
      proto: "tcp",
      dlSrc: red.mac,
      dlDst: model.networks[0].gatewayMac!,
      ipSrc: red.ips[0],
      ipDst,
      dstPort: 80,
    } as const;
    const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
    return explainHop(view, ingress, packet, matched, { mode: "offline" });
  };
  // red's pod to blue's pod on this node: into ROUTE, onto blue, to the port's MAC, out of its port.
  const routed = trace(blue.ips[0]);
  assert.deepEqual(routed.steps.map((s) => s.kind), [
    "classifyLocal",
    "spoofIpv4",
    "routeIn",
    "routeTo",
    "nextHop",
    "forwardLocal",
  ]);
  assert.match(routed.steps[3].what, /route 10\.2\.0\.0\/24 into network acme\/net-2/);
  assert.deepEqual(routed.outcomes.map((o) => o.kind === "local" && o.ofport), [blue.ofport]);
  // A static route goes straight to its next hop (blue's pod 10.2.0.9).
  const viaCnf = trace("10.9.1.1");
  assert.deepEqual(viaCnf.steps.map((s) => s.kind).slice(2), [
    "routeIn",
    "routeTo",
    "forwardLocal",
  ]);
  assert.match(viaCnf.steps[3].what, /through the next hop 02:00:0a:02:00:09/);
  // green is on no router: handed to the slow path in ROUTE (net unreachable), saying so.
  const isolated = trace(green.ips[0]);
  assert.equal(isolated.steps.at(-1)?.kind, "routeMiss");
  assert.equal(isolated.outcomes[0].kind === "drop" && isolated.outcomes[0].code, "no_route");
  assert.match(
    isolated.outcomes[0].kind === "drop" ? isolated.outcomes[0].reason : "",
    /the sender gets ICMP net unreachable/,
  );
});

Deno.test("offline: routed IPv6 is told step by step like IPv4 (the hop limit); a network no router connects is not reached", () => {
  const model = scenarios.routing6;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`);
  const [red, cnf, green] = model.localPorts;
  const ingress = { kind: "port", ofport: red.ofport } as const;
  const trace = (ipDst: string, proto: "tcp" | "udp" | "icmp" = "tcp") => {
    const packet = {
      proto,
      dlSrc: red.mac,
      dlDst: model.networks[0].gatewayMac!,
      // red's address of the destination's family.
      ipSrc: red.ips[ipDst.includes(":") ? 1 : 0],
      ipDst,
      ...(proto === "icmp" ? {} : { dstPort: 80 }),
    } as const;
    const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
    return explainHop(view, ingress, packet, matched, { mode: "offline" });
  };
  // red's pod to blue's CNF on this node: into ROUTE, onto blue, to the port's MAC, out of its port.
  for (const proto of ["tcp", "udp", "icmp"] as const) {
    const routed = trace(cnf.ips[0], proto);
    assert.deepEqual(routed.steps.map((s) => s.kind), [
      "classifyLocal",
      "spoofIpv6",
      "routeIn",
      "routeTo",
      "nextHop",
      "forwardLocal",
    ], proto);
    assert.match(routed.steps[2].what, /IPv6 to the gateway MAC of network acme\/net-1: routed/);
    assert.match(routed.steps[3].what, /route fd00:2::\/64 into network acme\/net-2.*hop limit/);
    assert.deepEqual(routed.outcomes.map((o) => o.kind === "local" && o.ofport), [cnf.ofport]);
  }
  // A static route goes straight to its next hop (the CNF), the /128 too.
  for (const dst of ["fd00:9:0:1::1", "fd00:9:1::5"]) {
    const viaCnf = trace(dst);
    assert.deepEqual(viaCnf.steps.map((s) => s.kind).slice(2), [
      "routeIn",
      "routeTo",
      "forwardLocal",
    ]);
    assert.match(viaCnf.steps[3].what, /through the next hop 02:00:0a:02:00:09/);
  }
  // green is on no router: red's ::/0 waits for its next hop, so nothing covers green's address:
  // handed to the slow path in ROUTE (ICMPv6 no route), saying so.
  const isolated = trace(green.ips[1]);
  assert.equal(isolated.steps.at(-1)?.kind, "routeMiss");
  assert.match(isolated.steps.at(-1)!.what, /answers ICMPv6 no route from the gateway/);
  assert.equal(isolated.outcomes[0].kind === "drop" && isolated.outcomes[0].code, "no_route");
  assert.match(
    isolated.outcomes[0].kind === "drop" ? isolated.outcomes[0].reason : "",
    /the sender gets ICMPv6 no route/,
  );
  // TCP to red's IPv6 gateway (its gateway6): port unreachable from the slow path.
  const self = trace(model.networks[0].gateway6!);
  assert.equal(self.steps.at(-1)?.kind, "gatewaySelf");
  assert.equal(self.outcomes[0].kind === "drop" && self.outcomes[0].code, "gateway");
  assert.match(
    self.outcomes[0].kind === "drop" ? self.outcomes[0].reason : "",
    /answers only ND and ping: the sender gets ICMPv6 port unreachable/,
  );
  // Nobody's IPv4 is routed: red's IPv4 to the gateway MAC is dropped there.
  const v4 = trace("10.3.0.2");
  assert.equal(v4.outcomes[0].kind === "drop" && v4.outcomes[0].code, "gateway");
});

Deno.test("ofprotoFlow: an IPv6 packet is tcp6/udp6/icmp6 with ipv6 addresses and a hop limit", () => {
  const base = { inPort: 1, dlSrc: "02:00:00:00:00:01", dlDst: "0a:58:00:00:00:01" };
  assert.equal(
    ofprotoFlow({ ...base, proto: "tcp", ipSrc: "fd00:1::2", ipDst: "fd00:2::9", dstPort: 80 }),
    "tcp6,in_port=1,vlan_tci=0,dl_src=02:00:00:00:00:01,dl_dst=0a:58:00:00:00:01," +
      "ipv6_src=fd00:1::2,ipv6_dst=fd00:2::9,nw_ttl=64,tcp_dst=80",
  );
  assert.match(
    ofprotoFlow({ ...base, proto: "icmp", ipSrc: "fd00:1::2", ipDst: "fd00:2::9" }),
    /^icmp6,.*,icmpv6_type=128,icmpv6_code=0$/,
  );
  assert.match(
    ofprotoFlow({ ...base, proto: "icmp", ipSrc: "10.0.0.2", ipDst: "10.0.1.2" }),
    /^icmp,.*nw_src=10\.0\.0\.2,nw_dst=10\.0\.1\.2,nw_ttl=64,icmp_type=8,icmp_code=0$/,
  );
});

Deno.test("offline: a pod's IPv4 out goes to the node's host port; the node's ARP and IPv4 reach local pods only", () => {
  const model = scenarios.host_ports;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`);
  // green (3): flat, host port 51, no route, no groups.
  const green = model.networks[2];
  const pod = model.localPorts[2];
  const trace = (
    ingress: { kind: "port"; ofport: number },
    packet: Parameters<typeof evalPacket>[2],
  ) =>
    explainHop(view, ingress, packet, evaluate(tables, evalPacket(view, ingress, packet)).matched, {
      mode: "offline",
    });
  const out = trace({ kind: "port", ofport: pod.ofport }, {
    proto: "tcp",
    dlSrc: pod.mac,
    dlDst: green.gatewayMac!,
    ipSrc: pod.ips[0],
    ipDst: "192.0.2.250",
    dstPort: 80,
  });
  assert.deepEqual(out.steps.map((s) => s.kind), [
    "classifyLocal",
    "spoofIpv4",
    "routeIn",
    "hostExit",
    "forwardHost",
  ]);
  assert.match(out.steps[4].what, /to the node through the host port of network acme\/net-3/);
  assert.deepEqual(out.outcomes, [{ kind: "local", ofport: green.hostPort }]);
  // From the node: to the local pod, not back out.
  const node = { kind: "port", ofport: green.hostPort! } as const;
  const probe = trace(node, {
    proto: "tcp",
    dlSrc: green.gatewayMac!,
    dlDst: pod.mac,
    ipSrc: green.gateway!,
    ipDst: pod.ips[0],
    dstPort: 80,
  });
  assert.deepEqual(probe.steps.map((s) => s.kind), ["classifyHost", "forwardLocal"]);
  assert.deepEqual(probe.outcomes.map((o) => o.kind === "local" && o.ofport), [pod.ofport]);
  // Anything else from the node is dropped: it reaches no other port, network or node.
  const away = trace(node, {
    proto: "tcp",
    dlSrc: green.gatewayMac!,
    dlDst: "02:00:0a:03:00:99",
    ipSrc: green.gateway!,
    ipDst: "10.3.0.99",
    dstPort: 80,
  });
  assert.equal(away.outcomes[0].kind === "drop" && away.outcomes[0].code, "from_outside");
});

Deno.test("flowKind names every security group flow as its builder, at that builder's table and priority", () => {
  // The host port's commit (hostCommit) is in host_ports.
  const acl = [scenarios.security_groups, scenarios.host_ports].flatMap((model) => {
    const plain = new Set(compileFlows({ ...model, acls: undefined }));
    return compileFlows(model).filter((l) => !plain.has(l));
  });
  const seen = new Set<string>();
  for (const line of acl) {
    const f = parseFlowLine(line);
    const kind = flowKind(f);
    seen.add(kind);
    if (kind === "default") continue;
    const k = ACL_KINDS[kind as keyof typeof ACL_KINDS];
    assert.ok(k, `${line} is told as "${kind}"`);
    assert.deepEqual([f.table, f.priority], [k.table, k.priority], line);
  }
  assert.deepEqual([...seen].sort(), [...Object.keys(ACL_KINDS), "default"].sort());
});

Deno.test("flowKind names every service flow as its builder, at that builder's table and priority", () => {
  const seen = new Set<string>();
  // The routed model has the flows of a VIP a router reaches; services6 an IPv6 VIP's.
  const models = [scenarios.services, scenarios.services_routed, scenarios.services6];
  const added = models.flatMap((model) => {
    const plain = new Set(compileFlows({ ...model, services: undefined }));
    return splitGroups(compileFlows(model)).flows.filter((l) => !plain.has(l));
  });
  for (const line of added) {
    const f = parseFlowLine(line);
    const kind = flowKind(f);
    seen.add(kind);
    if (kind === "default" || kind === "arpReply" || kind === "nextHop") continue;
    const k = SERVICE_KINDS[kind as keyof typeof SERVICE_KINDS];
    assert.ok(k, `${line} is told as "${kind}"`);
    assert.deepEqual([f.table, f.priority], [k.table, k.priority], line);
  }
  // The VIP's ARP answer and the backends' next hops are the builders of any address.
  assert.deepEqual(
    [...seen].sort(),
    [...Object.keys(SERVICE_KINDS), "default", "arpReply", "nextHop"].sort(),
  );
});

Deno.test("offline: the first packet of a TCP connection through security groups, allowed and dropped", () => {
  // Pod 1 takes TCP 80 from 10.0.0.0/24; pod 2 opens TCP 443 only; pod 3 has no groups.
  const model = scenarios.security_groups;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, () => "acme/app", (ofport) => `acme/pod-${ofport}/eth0`);
  const trace = (from: number, to: number, dstPort: number) => {
    const [a, b] = [model.localPorts[from - 1], model.localPorts[to - 1]];
    const ingress = { kind: "port", ofport: a.ofport } as const;
    const packet = {
      proto: "tcp",
      dlSrc: a.mac,
      dlDst: b.mac,
      ipSrc: a.ips[0],
      ipDst: b.ips[0],
      dstPort,
    } as const;
    const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
    return explainHop(view, ingress, packet, matched, { mode: "offline" });
  };
  const kinds = (hop: ReturnType<typeof trace>) => hop.steps.map((s) => s.kind);

  const allowed = trace(3, 1, 80);
  assert.deepEqual(allowed.outcomes, [{ kind: "local", ofport: 1, port: "acme/pod-1/eth0" }]);
  assert.deepEqual(kinds(allowed).slice(-2), ["ingressHook", "ingressRule"]);

  const refused = trace(3, 1, 81);
  assert.equal(refused.outcomes[0].kind === "drop" && refused.outcomes[0].code, "security_group");
  assert.match(refused.steps.at(-1)!.tableName, /INGRESS_ACL/);

  const out = trace(2, 3, 443);
  assert.deepEqual(out.outcomes, [{ kind: "local", ofport: 3, port: "acme/pod-3/eth0" }]);
  assert.deepEqual(kinds(out).slice(-4), ["egressHook", "egressRule", "aclCommit", "forwardLocal"]);

  const notOut = trace(2, 1, 80);
  const drop = notOut.outcomes[0];
  assert.equal(drop.kind === "drop" && drop.code, "security_group");
  assert.ok(drop.kind === "drop" && /egress rule of the sending port/.test(drop.reason));
});

Deno.test("offline: only a static route's next hop may send from the route's destination; any other pod doing so is dropped as spoofed", () => {
  const model = scenarios.routing;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`);
  const [red, cnf, green] = model.localPorts;
  const send = (from: typeof red, ipSrc: string, ipDst: string) => {
    const ingress = { kind: "port", ofport: from.ofport } as const;
    const gateway = model.networks.find((n) => n.id === from.network)!.gatewayMac!;
    const packet = {
      proto: "tcp",
      dlSrc: from.mac,
      dlDst: gateway,
      ipSrc,
      ipDst,
      dstPort: 80,
    } as const;
    const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
    return explainHop(view, ingress, packet, matched, { mode: "offline" });
  };
  const spoofed = (hop: ReturnType<typeof send>) =>
    hop.outcomes.length === 1 && hop.outcomes[0].kind === "drop" &&
    hop.outcomes[0].code === "spoofed_ip";
  // The CNF (10.2.0.9, next hop of 10.9.0.0/16) forwards a host of 10.9/16 back to red: it passes.
  const forwarded = send(cnf, "10.9.1.1", red.ips[0]);
  assert.equal(forwarded.steps[1].kind, "spoofRouted");
  assert.deepEqual(forwarded.outcomes.map((o) => o.kind), ["local"]);
  // The same source from a pod that is no next hop, on the CNF's network or another: spoofed.
  assert.ok(spoofed(send(red, "10.9.1.1", cnf.ips[0])), "red may not send from 10.9.1.1");
  assert.ok(spoofed(send(green, "10.9.1.1", cnf.ips[0])), "green may not send from 10.9.1.1");
  // The CNF itself only for its route's destination: not from another network's addresses.
  assert.ok(spoofed(send(cnf, "10.1.0.3", red.ips[0])), "the CNF may not send as red's peer");
  assert.ok(spoofed(send(cnf, "10.50.0.1", red.ips[0])), "nor from outside its routes");
});

Deno.test("offline: routed traffic meets the sending port's egress rules (the network changed on the way)", () => {
  // Port 2 (red, 3) may open TCP to blue (2); port 1 (green) takes TCP from green only.
  const model = scenarios.routed_security_groups;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`, (ofport) => `acme/pod-${ofport}/eth0`);
  const red = model.localPorts[1];
  const gateway = model.networks[2].gatewayMac!;
  const trace = (proto: "tcp" | "udp", ipDst: string) => {
    const ingress = { kind: "port", ofport: red.ofport } as const;
    const packet = { proto, dlSrc: red.mac, dlDst: gateway, ipSrc: red.ips[0], ipDst, dstPort: 80 };
    const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
    return explainHop(view, ingress, packet, matched, { mode: "offline" });
  };
  // Blue's port on this node (no groups) and blue's on another node: routed, allowed, committed.
  for (const [ip, last] of [["10.2.0.2", "forwardLocal"], ["10.2.0.3", "forwardRemote"]]) {
    const tcp = trace("tcp", ip);
    const kinds = tcp.steps.map((s) => s.kind);
    assert.deepEqual(kinds.slice(2, 5), ["routeIn", "routeTo", "nextHop"], `${kinds}`);
    assert.deepEqual(kinds.slice(5), ["egressHook", "egressRule", "aclCommit", last], `${kinds}`);
    // UDP no egress rule allows: dropped by the sending port's rules, after the route.
    const udp = trace("udp", ip);
    assert.equal(udp.outcomes[0].kind === "drop" && udp.outcomes[0].code, "security_group");
    assert.match(udp.steps.at(-1)!.tableName, /EGRESS_ACL/);
  }
});

Deno.test("offline: a marked network's packet is said to be marked, and goes on as unmarked ones do", () => {
  const model = scenarios.dscp;
  const tables = flowTables(compileFlows(model));
  const view = viewOf(model, (id) => `acme/net-${id}`);
  const [red, blue] = model.localPorts;
  const ingress = { kind: "port", ofport: red.ofport } as const;
  const packet = {
    proto: "tcp",
    dlSrc: red.mac,
    dlDst: model.networks[0].gatewayMac!,
    ipSrc: red.ips[0],
    ipDst: blue.ips[0],
    dstPort: 80,
  } as const;
  const matched = evaluate(tables, evalPacket(view, ingress, packet)).matched;
  const hop = explainHop(view, ingress, packet, matched, { mode: "offline" });
  assert.equal(hop.steps[1].kind, "spoofIpv4");
  assert.match(hop.steps[1].what, /are the port's own; marked with DSCP 46$/);
  assert.deepEqual(hop.outcomes.map((o) => o.kind === "local" && o.ofport), [blue.ofport]);
});

/**
 * The offline walk of a TCP packet local port `from` (1-based) of `model` sends from `ports[0]` to
 * `ipDst:ports[1]` (MAC `dlDst`), through the services' groups, and the hop told of it.
 */
function walkTcp(
  model: FlowInput,
  from: number,
  dlDst: string,
  ipDst: string,
  ports: [number, number],
) {
  const lines = compileFlows(model);
  const view = viewOf(model, () => "acme/app", (ofport) => `acme/pod-${ofport}/eth0`);
  const port = model.localPorts[from - 1];
  const ingress = { kind: "port", ofport: port.ofport } as const;
  const packet = {
    proto: "tcp",
    dlSrc: port.mac,
    dlDst,
    ipSrc: port.ips[0],
    ipDst,
    srcPort: ports[0],
    dstPort: ports[1],
  } as const;
  const walked = evaluate(flowTables(lines), evalPacket(view, ingress, packet), flowGroups(lines));
  const hop = explainHop(view, ingress, packet, walked.matched, {
    mode: "offline",
    ...(walked.balanced ? { balanced: walked.balanced } : {}),
  });
  return { walked, hop };
}

Deno.test("offline: a new connection to a service's VIP names every candidate backend and goes to one", () => {
  const trace = (ipDst: string, dstPort: number) =>
    walkTcp(scenarios.services, 1, "0a:58:0a:00:00:64", ipDst, [40000, dstPort]);
  const { walked, hop } = trace("10.0.0.100", 80);
  // web: a local backend and a remote one; the address no port has gets no bucket.
  assert.deepEqual(walked.balanced, { group: 16, candidates: ["10.0.0.3:8080", "10.0.0.4:8080"] });
  assert.deepEqual(
    hop.steps.map((s) => s.kind),
    ["classifyLocal", "spoofIpv4", "serviceVip", "serviceNew", "nextHop", "forwardLocal"],
  );
  assert.match(hop.steps[3].what, /select group 16 over 10\.0\.0\.3:8080, 10\.0\.0\.4:8080/);
  assert.deepEqual(hop.outcomes, [{ kind: "local", ofport: 2, port: "acme/pod-2/eth0" }]);
  // Another port of the VIP: dropped; a service without endpoints: dropped at its NEW flow.
  assert.equal(trace("10.0.0.100", 81).hop.steps.at(-1)!.kind, "serviceVipGuard");
  const idle = trace("10.0.0.102", 80);
  assert.equal(idle.hop.steps.at(-1)!.kind, "serviceNew");
  assert.equal(idle.hop.outcomes[0].kind, "drop");
});

Deno.test("parseOfprotoTrace reads a filtered mirror's clone as its one action, not the copy's output too", () => {
  // As Open vSwitch 3 prints it: the clone, then what it does inside, then the flow's other actions.
  const text = `Flow: tcp,in_port=1,vlan_tci=0x0000,nw_src=10.0.0.2,nw_dst=10.0.0.3,tp_dst=5001

bridge("br-int")
----------------
 0. tcp,in_port=1,vlan_tci=0x0000/0x1fff,tp_dst=5001, priority 101, cookie 0x100000001
    clone(output:3)
    output:3
    set_field:0x1->reg0
    set_field:0x1->reg1
    goto_table:10
10. priority 100
    output:2

Final flow: unchanged
Datapath actions: 4,3`;
  const [mirror] = parseOfprotoTrace(text, "br-int");
  assert.equal(
    mirror.line,
    "cookie=0x0000000100000001,table=0,priority=101,tcp,in_port=1,vlan_tci=0x0000/0x1fff,tp_dst=5001,actions=clone(output:3),set_field:0x1->reg0,set_field:0x1->reg1,goto_table:10",
  );
  assert.equal(flowKind(mirror), "mirrorOut");
});

Deno.test("parseOfprotoTrace follows a route's size check as a packet that fits, not the larger branch", () => {
  // As Open vSwitch 3 prints it: check_pkt_larger's larger branch nested below it (its flows'
  // table lines at the action's own indentation), then the flow's other actions.
  const text = `bridge("br-int")
----------------
25. ipv6,reg0=0x1,ipv6_dst=fd00:2::/64, priority 1128, cookie 0x100000000
    dec_ttl
    check_pkt_larger(1414)->NXM_NX_REG5[0]
    set_field:0x2->reg0
    goto_table:26
    26. ipv6,reg0=0x2,ipv6_dst=fd00:2::9, priority 100, cookie 0x200000002
            set_field:02:00:0a:02:00:09->eth_dst
            goto_table:30
        30. ipv6,reg0=0x2,reg5=0x1/0x1, priority 140, cookie 0x200000000
            set_field:0x5780003->reg5
            CONTROLLER:65535
    set_field:0x2->reg0
    goto_table:26
26. ipv6,reg0=0x2,ipv6_dst=fd00:2::9, priority 100, cookie 0x200000002
    set_field:02:00:0a:02:00:09->eth_dst
    goto_table:30

Final flow: unchanged`;
  assert.deepEqual(parseOfprotoTrace(text, "br-int").map((f) => f.line), [
    "cookie=0x0000000100000000,table=25,priority=1128,ipv6,reg0=0x1,ipv6_dst=fd00:2::/64,actions=dec_ttl,check_pkt_larger(1414)->NXM_NX_REG5[0],set_field:0x2->reg0,goto_table:26",
    "cookie=0x0000000200000002,table=26,priority=100,ipv6,reg0=0x2,ipv6_dst=fd00:2::9,actions=set_field:02:00:0a:02:00:09->eth_dst,goto_table:30",
  ]);
});

Deno.test("offline: a pod routed to a service's VIP on another network is balanced there, and the reply is routed back", () => {
  const walk = (from: number, dlDst: string, ipDst: string, ports: [number, number]) =>
    walkTcp(scenarios.services_routed, from, dlDst, ipDst, ports);
  // The client on red sends to its gateway; the router takes it onto blue, where the VIP balances.
  const { walked, hop } = walk(1, "0a:58:0a:01:00:01", "10.2.0.100", [40000, 80]);
  assert.deepEqual(walked.balanced, { group: 16, candidates: ["10.2.0.3:8080", "10.2.0.4:8080"] });
  assert.deepEqual(
    hop.steps.map((s) => s.kind),
    [
      "classifyLocal",
      "spoofIpv4",
      "routeIn",
      "routeTo",
      "serviceVipRouted",
      "serviceNew",
      "nextHop",
      "forwardLocal",
    ],
  );
  assert.match(hop.steps[5].what, /select group 16 over 10\.2\.0\.3:8080, 10\.2\.0\.4:8080/);
  assert.deepEqual(hop.outcomes, [{ kind: "local", ofport: 2, port: "acme/pod-2/eth0" }]);
  // Another port of the VIP finds no next hop: dropped.
  const other = walk(1, "0a:58:0a:01:00:01", "10.2.0.100", [40000, 81]);
  assert.equal(other.walked.balanced, undefined);
  assert.equal(other.hop.outcomes[0].kind, "drop");
  // The local backend's reply to its gateway is un-NATed, then routed back onto red.
  const reply = walk(2, "0a:58:0a:02:00:01", "10.1.0.2", [8080, 40000]);
  assert.deepEqual(
    reply.hop.steps.map((s) => s.kind),
    ["classifyLocal", "spoofIpv4", "serviceReplyRouted", "routeTo", "nextHop", "forwardLocal"],
  );
  assert.deepEqual(reply.hop.outcomes, [{ kind: "local", ofport: 1, port: "acme/pod-1/eth0" }]);
  // Green is on no router: its pod never reaches the VIP's balancing.
  const green = walk(3, "0a:58:0a:03:00:01", "10.2.0.100", [40000, 80]);
  assert.equal(green.walked.balanced, undefined);
  assert.ok(!green.hop.outcomes.some((o) => o.kind === "local"));
});

Deno.test("offline: a backend's connection to its own VIP (hairpin) is source-NATed to the VIP and sent back out of its port", () => {
  // pod-2 (10.0.0.3, ofport 2) is the first backend of web: the walk follows that bucket.
  const { walked, hop } = walkTcp(
    scenarios.services,
    2,
    "0a:58:0a:00:00:64",
    "10.0.0.100",
    [40000, 80],
  );
  assert.equal(walked.balanced?.candidates[0], "10.0.0.3:8080");
  assert.deepEqual(
    hop.steps.map((s) => s.kind),
    [
      "classifyLocal",
      "spoofIpv4",
      "hairpinReply",
      "hairpinAgain",
      "serviceVip",
      "serviceNew",
      "hairpinSnat",
      "hairpinDeliver",
    ],
  );
  assert.deepEqual(hop.outcomes, [{ kind: "local", ofport: 2, port: "acme/pod-2/eth0" }]);
});

Deno.test("offline: a new IPv6 connection to a service's IPv6 VIP names every candidate backend and goes to one", () => {
  const model = structuredClone(scenarios.services6);
  // Pod 1 speaks from its IPv6 address.
  model.localPorts[0].ips = ["fd00::2", "10.0.0.2"];
  const trace = (ipDst: string, dstPort: number) =>
    walkTcp(model, 1, "0a:58:0a:00:00:64", ipDst, [40000, dstPort]);
  const { walked, hop } = trace("fd00::100", 80);
  assert.deepEqual(walked.balanced, {
    group: 32,
    candidates: ["[fd00::3]:8080", "[fd00::4]:8080"],
  });
  assert.deepEqual(
    hop.steps.map((s) => s.kind).filter((k) => k.startsWith("service") || k === "nextHop"),
    ["serviceVip", "serviceNew", "nextHop"],
  );
  assert.match(hop.steps.find((s) => s.kind === "serviceNew")!.what, /\[fd00::3\]:8080/);
  assert.deepEqual(hop.outcomes, [{ kind: "local", ofport: 2, port: "acme/pod-2/eth0" }]);
  // Another port of the IPv6 VIP: dropped by its guard.
  assert.equal(trace("fd00::100", 81).hop.steps.at(-1)!.kind, "serviceVipGuard");
});

Deno.test("offline: a backend's IPv6 connection to its own IPv6 VIP (hairpin) is source-NATed to the VIP and sent back out of its port", () => {
  const model = structuredClone(scenarios.services6);
  // pod-2 (fd00::3, ofport 2) speaks IPv6; it is the first backend of web's IPv6 VIP.
  model.localPorts[1].ips = ["fd00::3", "10.0.0.3"];
  const { walked, hop } = walkTcp(model, 2, "0a:58:0a:00:00:64", "fd00::100", [40000, 80]);
  assert.equal(walked.balanced?.candidates[0], "[fd00::3]:8080");
  assert.deepEqual(
    hop.steps.map((s) => s.kind).filter((k) => k.startsWith("hairpin") || k.startsWith("service")),
    ["hairpinReply", "hairpinAgain", "serviceVip", "serviceNew", "hairpinSnat", "hairpinDeliver"],
  );
  assert.deepEqual(hop.outcomes, [{ kind: "local", ofport: 2, port: "acme/pod-2/eth0" }]);
});
