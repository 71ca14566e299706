import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs } from "./flows.ts";
import type { FlowInput } from "./flow_input.ts";
import type { FlowMirrorFilter } from "./mirror_input.ts";
import { type EvalPacket, evaluate, flowTables } from "./flow_eval.ts";
import { flowKind } from "./flow_trace.ts";
import { scenarios } from "./testdata/scenarios.ts";

const impls: [string, (input: FlowInput) => string[]][] = [
  ["wasm", compileFlows],
  ["ts", compileFlowsTs],
];

/** Pod 1 (10.0.0.2, ofport 1) sends TCP to pod 2 (10.0.0.3) at `port`. */
const tcpFromPod1 = (port: number): EvalPacket => ({
  proto: "tcp",
  inPort: 1,
  dlSrc: "02:00:0a:00:00:02",
  dlDst: "02:00:0a:00:00:03",
  ipSrc: "10.0.0.2",
  ipDst: "10.0.0.3",
  srcPort: 40000,
  dstPort: port,
});

Deno.test("mirror filters: only the matching packets are copied, and every packet goes on as before", () => {
  const model = scenarios.mirror_filters;
  const plain = flowTables(compileFlows({ ...model, mirrorFilters: undefined }));
  const mirrored = flowTables(compileFlows(model));
  for (const port of [5001, 5002]) {
    const before = evaluate(plain, tcpFromPod1(port)).matched;
    const after = evaluate(mirrored, tcpFromPod1(port)).matched;
    const copies = after.filter((f) => flowKind(f) === "mirrorOut");
    if (port === 5001) {
      assert.equal(copies.length, 1, "TCP to 5001 is copied");
      assert.ok(copies[0].actions.includes("clone(output:3)"), "to the collector's ofport");
    } else {
      assert.equal(copies.length, 0, "TCP to 5002 is not copied");
    }
    // But for the copy, the walk is the one without mirrors: same tables, same actions, same outcome.
    assert.deepEqual(after.map((f) => f.table), before.map((f) => f.table));
    const rest = after[0].actions.filter((a) => !a.startsWith("clone("));
    assert.deepEqual(rest, before[0].actions, "classified as before");
    assert.deepEqual(
      after.at(-1)!.actions,
      before.at(-1)!.actions,
      `port ${port}: delivered alike`,
    );
  }
});

Deno.test("mirror filters: a remote CIDR narrows the copies to what the source sends there", () => {
  const tables = flowTables(compileFlows(scenarios.mirror_filters));
  const udp = (ipDst: string, dstPort: number): EvalPacket => ({
    proto: "udp",
    inPort: 2,
    dlSrc: "02:00:0a:00:00:03",
    dlDst: "02:00:0a:00:00:04",
    ipSrc: "10.0.0.3",
    ipDst,
    srcPort: 40000,
    dstPort,
  });
  const copied = (p: EvalPacket) =>
    evaluate(tables, p).matched.some((f) => flowKind(f) === "mirrorOut");
  assert.ok(copied(udp("10.0.0.4", 5003)), "in the CIDR and the range");
  assert.ok(!copied(udp("10.0.0.4", 5004)), "past the range");
  assert.ok(!copied(udp("10.9.0.4", 5000)), "outside the CIDR");
  // Packets from another port than the source are never copied, whatever they match.
  assert.ok(!copied({ ...udp("10.0.0.4", 5000), inPort: 1, dlSrc: "02:00:0a:00:00:02" }));
});

Deno.test("mirror filters: bad rules throw the same error naming the rule in both engines; none compiles as before", () => {
  const base = scenarios.mirror_filters;
  const bad: [string, (f: FlowMirrorFilter) => void, RegExp][] = [
    [
      "unknown source",
      (f) => f.source = 7,
      /mirrorFilters\[0\]\.source: 7 is the ofport of no local port/,
    ],
    [
      "source 0",
      (f) => f.source = 0,
      /mirrorFilters\[0\]\.source: expected an integer in 1\.\.65279/,
    ],
    ["output = source", (f) => f.output = 1, /mirrorFilters\[0\]\.output: expected another ofport/],
    ["sctp", (f) => (f as { protocol: string }).protocol = "sctp", /protocol: expected tcp, udp/],
    [
      "ports on icmp",
      (f) => f.protocol = "icmp",
      /portMin: expected no port range but for tcp, udp/,
    ],
    ["range reversed", (f) => f.portMax = 5000, /portMax: expected an integer in portMin\.\.65535/],
    [
      "host bits",
      (f) => f.remote = "10.0.0.1/24",
      /remote: expected an IPv4 CIDR without host bits/,
    ],
    ["IPv6", (f) => f.remote = "fd00::/64", /remote: expected an IPv4 CIDR/],
  ];
  for (const [what, spoil, message] of bad) {
    const model = structuredClone(base);
    spoil(model.mirrorFilters![0]);
    for (const [engine, compile] of impls) {
      assert.throws(() => compile(model), message, `${engine}: ${what}`);
    }
  }
  const without = { ...base, mirrorFilters: undefined };
  assert.deepEqual(compileFlows({ ...base, mirrorFilters: [] }), compileFlows(without));
  assert.deepEqual(compileFlows(without), compileFlows(scenarios.vxlan_one_node));
});
