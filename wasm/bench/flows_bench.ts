/**
 * WASM vs TS OpenFlow rule compiler on node-sized models.
 * Run: deno bench --allow-read wasm/bench/flows_bench.ts — the TS engine (the same AssemblyScript source
 * run as plain JavaScript) is the baseline, so each group's summary says how many times faster the
 * WASM compiler is.
 *
 * Model: N local ports spread over 20 networks (14 vxlan, 4 vlan on one physnet, 2 flat), one
 * IPv4 each and an IPv6 on every fourth; as many remote ports on 50 other nodes.
 */
import { compileFlows, compileFlowsTs } from "../flows.ts";
import type { FlowInput, FlowNetwork } from "../flow_input.ts";
import { mulberry32 } from "../mulberry32.ts";

const NETWORKS = 20;
const NODES = 50;

function model(ports: number): FlowInput {
  const rand = mulberry32(ports);
  const networks: FlowNetwork[] = [];
  for (let id = 1; id <= NETWORKS; id++) {
    if (id <= 14) networks.push({ id, type: "vxlan", segmentId: 10000 + id });
    else if (id <= 18) networks.push({ id, type: "vlan", segmentId: 100 + id, physnetPort: 65001 });
    else networks.push({ id, type: "flat", physnetPort: 65000 + id });
  }
  const h = (n: number) => (n & 255).toString(16).padStart(2, "0");
  const mac = (kind: number, i: number) => `02:${h(kind)}:00:${h(i >> 16)}:${h(i >> 8)}:${h(i)}`;
  const input: FlowInput = { tunnelPort: 65000, networks, localPorts: [], remotePorts: [] };
  for (let i = 0; i < ports; i++) {
    const net = 1 + (i % NETWORKS);
    const k = 1 + Math.floor(i / NETWORKS);
    const ips = [`10.${net}.${k >> 8}.${k & 255}`];
    if (i % 4 === 0) ips.push(`fd00:${net.toString(16)}::${k.toString(16)}`);
    input.localPorts.push({ ofport: 1 + i, network: net, mac: mac(1, i), ips, cookie: 1 + i });
    const node = Math.floor(rand() * NODES);
    input.remotePorts.push({
      network: net,
      mac: mac(2, i),
      ips: [`10.${net}.${128 + (k >> 8)}.${k & 255}`],
      nodeIp: `192.168.${node >> 4}.${1 + (node & 15)}`,
    });
  }
  return input;
}

// Results flow here so the optimizer cannot drop the work.
let sink = 0;
globalThis.addEventListener("unload", () => {
  if (sink === -1) console.log(sink);
});

for (const ports of [1_000, 10_000]) {
  const input = model(ports);
  const lines = compileFlows(input).length;
  const group = `${ports.toLocaleString("en")} local + ${
    ports.toLocaleString("en")
  } remote ports (${lines.toLocaleString("en")} flows)`;
  Deno.bench({
    name: `wasm: compileFlows, ${ports.toLocaleString("en")} ports`,
    group,
    fn() {
      sink += compileFlows(input).length;
    },
  });
  Deno.bench({
    name: `ts: compileFlowsTs, ${ports.toLocaleString("en")} ports`,
    group,
    baseline: true,
    fn() {
      sink += compileFlowsTs(input).length;
    },
  });
}
