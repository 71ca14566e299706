import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs } from "./flows.ts";
import type { FlowAclRule } from "./acl_input.ts";
import { mulberry32 } from "./mulberry32.ts";
import type { FlowInput } from "./flow_input.ts";
import { scenarios } from "./testdata/scenarios.ts";

const base = scenarios.security_groups;

function withRules(rules: unknown[]): FlowInput {
  return { ...base, acls: [{ cookie: 1, rules: rules as never }] };
}

/** The security group lines of a model: what its `acls` add to the lines it has without them. */
function compileAclFlows(input: FlowInput): string[] {
  const plain = new Set(compileFlows({ ...input, acls: undefined }));
  return compileFlows(input).filter((l) => !plain.has(l));
}

/** The rule flows of a model (its EGRESS_ACL and INGRESS_ACL lines of one port). */
function ruleLines(input: FlowInput): string[] {
  return compileAclFlows(input).filter((l) => /priority=100,ct_state=\+new/.test(l)).sort();
}

Deno.test("acl: without acls, or with none, a node keeps exactly the flows it had", () => {
  const plain = { ...base, acls: undefined };
  assert.deepEqual(compileFlows(plain), compileFlowsTs(plain));
  assert.deepEqual(compileFlows({ ...base, acls: [] }), compileFlowsTs(plain));
  assert.ok(!compileFlows(plain).some((l) => /table=5[01]|ct\(/.test(l)));
});

Deno.test("acl: a port range becomes the fewest tp_dst blocks that cover it exactly", () => {
  const lines = compileAclFlows(withRules([
    { direction: "ingress", protocol: "tcp", portMin: 1, portMax: 65535 },
  ]));
  const blocks = lines.filter((l) => l.includes(",tcp,tp_dst=")).map((l) =>
    l.match(/tp_dst=([^,]+)/)![1]
  );
  assert.equal(blocks.length, 16, blocks.join(" "));
  assert.equal(blocks.filter((b) => b === "1").length, 1);
  // Every port but 0 is covered once: count the ports the blocks stand for.
  const size = (b: string) => b.includes("/") ? 0x10000 - Number(b.split("/")[1]) : 1;
  assert.equal(blocks.reduce((n, b) => n + size(b), 0), 65535);
});

Deno.test("acl: peers by family; a group with no members (remote []) allows nobody", () => {
  const lines = ruleLines(withRules([
    { direction: "egress", protocol: "tcp", remote: ["10.0.0.0/24", "fd00::/64"] },
    { direction: "egress", protocol: "icmp", remote: ["fd00::/64"] },
    { direction: "ingress", protocol: "udp", remote: [] },
    { direction: "ingress", protocol: "any", remote: ["0.0.0.0/0"] },
  ]));
  assert.deepEqual(lines.map((l) => l.replace(/^.*ct_state=\+new\+trk,/, "")), [
    "tcp,reg1=0x1,nw_dst=10.0.0.0/24,actions=set_field:0x2->reg6,resubmit(,30)",
    "tcp6,reg1=0x1,ipv6_dst=fd00::/64,actions=set_field:0x2->reg6,resubmit(,30)",
    "ip,reg0=0x1,reg7=0x1,actions=ct(commit,zone=1),output:1",
  ]);
});

Deno.test("acl: the networks routes join share a conntrack zone; out, the port alone decides", () => {
  const model = scenarios.routed_security_groups;
  const lines = compileAclFlows(model);
  const zones = (net: number) =>
    new Set(
      lines.filter((l) => l.startsWith(`cookie=0x000000${net.toString(16).padStart(2, "0")}`))
        .flatMap((l) => /zone=(\d+)/.exec(l)?.[1] ?? []),
    );
  // red (3) and blue (2) are routed: zone 2, the smaller; green (1) is on no route.
  assert.deepEqual([zones(1), zones(2), zones(3)], [
    new Set(["1"]),
    new Set(["2"]),
    new Set(["2"]),
  ]);
  // blue has no port with groups here, yet a connection routed into it is committed.
  assert.ok(lines.some((l) => /priority=102,ip,reg0=0x2,.*ct\(commit,zone=2\)/.test(l)));
  // The egress hook and rules do not name the network: ROUTE has changed reg0 by FORWARD.
  for (const l of lines.filter((l) => /priority=104|table=50,priority=100/.test(l))) {
    assert.ok(!l.includes("reg0="), l);
  }
  // Without the routes, every network keeps its own zone.
  const apart = compileAclFlows({ ...model, routes: [] });
  assert.ok(apart.some((l) => l.includes("ct(table=50,zone=3)")));
  assert.ok(!apart.some((l) => /reg0=0x2,reg6=0x2/.test(l)), "no commit into blue");
});

Deno.test("acl: a malformed section throws naming the field", () => {
  const cases: [FlowInput, RegExp][] = [
    [withRules([{ direction: "out", protocol: "tcp" }]), /acls\[0\]\.rules\[0\]\.direction/],
    [withRules([{ direction: "ingress", protocol: "icmp", portMin: 1, portMax: 2 }]), /portMin/],
    [withRules([{ direction: "ingress", protocol: "tcp", portMin: 9, portMax: 8 }]), /portMax/],
    [withRules([{ direction: "ingress", protocol: "tcp", remote: ["10.0.0.1/24"] }]), /host bits/],
    [withRules([{ direction: "ingress", protocol: "tcp", remote: ["nope"] }]), /remote\[0\]/],
    [{ ...base, acls: [{ cookie: 99, rules: [] }] }, /acls\[0\]\.cookie: 99 is no local port/],
    [{ ...base, acls: [{ cookie: 1, rules: [] }, { cookie: 1, rules: [] }] }, /listed twice/],
  ];
  for (const [input, message] of cases) {
    assert.throws(() => compileFlows(input), message);
    assert.throws(() => compileFlowsTs(input), message);
  }
});

/**
 * A node of `n` local ports on 3 networks (every third dual stack), each with random rules, and
 * random routes between those and a fourth.
 */
function randomModel(seed: number, n: number): FlowInput {
  const rand = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const input: FlowInput = {
    tunnelPort: 100,
    networks: [1, 2, 3, 4].map((id) => ({
      id,
      type: "vxlan" as const,
      segmentId: 7000 + id,
      gateway: `10.${id}.0.1`,
      gatewayMac: `0a:58:0a:0${id}:00:01`,
    })),
    localPorts: [],
    remotePorts: [],
    // Some networks joined by routes (network 4 has no port here): their zones are one.
    routes: [],
    acls: [],
  };
  for (const from of [1, 2, 3, 4]) {
    for (const to of [1, 2, 3, 4]) {
      if (from !== to && rand() < 0.25) input.routes!.push({ from, to, dst: `10.${to}.0.0/24` });
    }
  }
  for (let i = 0; i < n; i++) {
    const network = 1 + (i % 3);
    const ips = [`10.${network}.0.${10 + i}`];
    if (i % 3 === 0) ips.push(`fd00:${network}::${(10 + i).toString(16)}`);
    const mac = `02:00:00:00:${network.toString(16).padStart(2, "0")}:${
      i.toString(16).padStart(2, "0")
    }`;
    input.localPorts.push({ ofport: 1 + i, network, mac, ips, cookie: 1 + i });
    if (rand() < 0.3) continue;
    const remotes = [
      "10.0.0.0/8",
      "10.1.0.7",
      "10.2.0.0/16",
      "0.0.0.0/0",
      "fd00::/16",
      "fd00:1::a",
      "::/0",
      "fd00:2::/64",
    ];
    const rules: FlowAclRule[] = [];
    for (let k = Math.floor(rand() * 5); k > 0; k--) {
      const protocol = pick(["tcp", "udp", "icmp", "icmpv6", "any"] as const);
      const rule: FlowAclRule = { direction: pick(["ingress", "egress"] as const), protocol };
      if ((protocol === "tcp" || protocol === "udp") && rand() < 0.7) {
        const a = Math.floor(rand() * 65536);
        const b = Math.min(65535, a + Math.floor(rand() * (rand() < 0.5 ? 10 : 5000)));
        [rule.portMin, rule.portMax] = [a, b];
      }
      if (rand() < 0.8) {
        rule.remote = Array.from({ length: Math.floor(rand() * 4) }, () => pick(remotes));
      }
      rules.push(rule);
    }
    input.acls!.push({ cookie: 1 + i, rules });
  }
  return input;
}

Deno.test("acl: both engines give the same lines for random models (WASM against TS)", () => {
  for (let seed = 1; seed <= 40; seed++) {
    const m = randomModel(seed, 1 + (seed % 12) * 3);
    assert.deepEqual(compileFlows(m), compileFlowsTs(m), `seed ${seed}`);
  }
});
