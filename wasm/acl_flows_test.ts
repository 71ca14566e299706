import assert from "node:assert/strict";
import { compileFlows } from "./flows.ts";
import { compileFlowsTs } from "./flows_ts.ts";
import { compileAclFlows } from "./acl_flows.ts";
import type { FlowInput } from "./flow_input.ts";
import { scenarios } from "./testdata/scenarios.ts";

const base = scenarios.security_groups;

function withRules(rules: unknown[]): FlowInput {
  return { ...base, acls: [{ cookie: 1, rules: rules as never }] };
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
  const lines = ruleLines(withRules([
    { direction: "ingress", protocol: "tcp", portMin: 1, portMax: 65535 },
  ]));
  const blocks = lines.filter((l) => l.includes(",tcp,")).map((l) => l.match(/tp_dst=([^,]+)/)![1]);
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
    "tcp,reg0=0x1,reg1=0x1,nw_dst=10.0.0.0/24,actions=set_field:0x2->reg6,resubmit(,30)",
    "tcp6,reg0=0x1,reg1=0x1,ipv6_dst=fd00::/64,actions=set_field:0x2->reg6,resubmit(,30)",
    "ip,reg0=0x1,reg7=0x1,actions=ct(commit,zone=NXM_NX_REG0[0..15]),output:1",
  ]);
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
  for (const [input, message] of cases) assert.throws(() => compileFlows(input), message);
});
