/** The flows of inactive ports (a live migration's other end): their checks in both engines. */
import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs } from "./flows.ts";
import { scenarios } from "./testdata/scenarios.ts";
import type { FlowInput } from "./flow_input.ts";
import { flowKind } from "./flow_trace.ts";
import { parseFlowLine } from "./flow_eval.ts";

const base = scenarios.migration_target;

function withInactive(port: Record<string, unknown>): FlowInput {
  return { ...base, inactivePorts: [port as never] };
}

function bothThrow(input: FlowInput, message: string): void {
  assert.throws(() => compileFlows(input), { message });
  assert.throws(() => compileFlowsTs(input), { message });
}

Deno.test("inactive ports: an inactive port gets counting drops in CLASSIFY of what a running guest sends, and nothing else", () => {
  const lines = compileFlows(base);
  const own = lines.filter((l) => l.includes("in_port=2") || l.includes("output:2"));
  const head = "cookie=0x0000000100000002,table=0,priority=100,";
  const mac = "in_port=2,dl_src=02:00:0a:00:00:09";
  assert.deepEqual(own, [
    `${head}arp,${mac},actions=drop`,
    `${head}icmp6,${mac},icmp_type=136,actions=drop`,
    `${head}ip,${mac},actions=drop`,
    `${head}rarp,${mac},actions=drop`,
    `${head}tcp6,${mac},actions=drop`,
    `${head}udp6,${mac},actions=drop`,
  ]);
  for (const l of own) assert.equal(flowKind(parseFlowLine(l)), "inactivePort");
  // Without the inactive port the rest of the set is the same.
  const without = compileFlows({ ...base, inactivePorts: [] });
  assert.deepEqual(lines.filter((l) => !own.includes(l)), without);
});

Deno.test("inactive ports: a malformed MAC, an ofport or cookie of another port, an unknown network are refused by name", () => {
  const port = { ofport: 2, network: 1, mac: "02:00:0a:00:00:09", cookie: 2 };
  bothThrow(
    withInactive({ ...port, mac: "01:00:0a:00:00:09" }),
    'inactivePorts[0].mac: "01:00:0a:00:00:09" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  );
  bothThrow(
    withInactive({ ...port, ofport: 1 }),
    "inactivePorts[0].ofport: expected an ofport no other port of the model has, got 1",
  );
  bothThrow(
    withInactive({ ...port, cookie: 1 }),
    "inactivePorts[0].cookie: expected a port number no other port of the model has, got 1",
  );
  bothThrow(
    withInactive({ ...port, network: 7 }),
    "inactivePorts[0].network: expected the id of one of networks, got 7",
  );
});
