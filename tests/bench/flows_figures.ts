/**
 * The flow compiler and a full flow resync on a real Open vSwitch.
 *
 * - compileFlows (WASM) against compileFlowsTs (its plain TypeScript twin): wasm/flows_bench.ts run
 *   under `deno bench --json` (a process of its own, so that V8 does not mix the two), read back.
 * - Full resync: a node model with N local ports (and as many remote ones) compiled and loaded into
 *   a private userspace OVS with the agent's own call, `Ovs.bundle(bridge, flows, [], {replaceAll})`
 *   (`ovs-ofctl --bundle replace-flows`): into an empty table (OVS restarted), onto the same table
 *   (agent restarted without its state) and onto a table 1 % of whose ports changed.
 */
import { run } from "@knitter/common";
import { compileFlows, type FlowInput, type FlowNetwork } from "@knitter/wasm";
import { Ovs } from "../../agent/ovs.ts";
import type { Cleanup } from "../support/cleanup.ts";
import { startSimNode } from "../support/sim_node.ts";
import { log, median, now, ROOT } from "./support.ts";

export interface CompileFigures {
  ports: number;
  flows: number;
  wasmMs: number;
  tsMs: number;
}

interface BenchJson {
  benches: { group: string; name: string; results: { ok?: { avg: number } }[] }[];
}

export async function compileFigures(): Promise<CompileFigures[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "--allow-read", "--json", "wasm/flows_bench.ts"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`deno bench failed: ${new TextDecoder().decode(out.stderr)}`);
  const json: BenchJson = JSON.parse(new TextDecoder().decode(out.stdout));
  const byGroup = new Map<string, CompileFigures>();
  for (const b of json.benches) {
    const avg = b.results[0]?.ok?.avg;
    if (avg === undefined) throw new Error(`bench "${b.name}" failed`);
    // Group: "1,000 local + 1,000 remote ports (12,345 flows)".
    const m = /^([\d,]+) local .*\(([\d,]+) flows\)/.exec(b.group);
    if (!m) throw new Error(`unexpected bench group "${b.group}"`);
    const num = (s: string) => Number(s.replaceAll(",", ""));
    const f = byGroup.get(b.group) ??
      { ports: num(m[1]), flows: num(m[2]), wasmMs: NaN, tsMs: NaN };
    if (b.name.startsWith("wasm")) f.wasmMs = avg / 1e6;
    else f.tsMs = avg / 1e6;
    byGroup.set(b.group, f);
  }
  return [...byGroup.values()].sort((a, b) => a.ports - b.ports);
}

/**
 * A node with `ports` local ports over 20 networks (14 VXLAN, 4 VLAN, 2 flat), an IPv4 address
 * each (and IPv6 on every fourth), and as many ports of the same networks on 50 other nodes.
 * `variant` changes the MACs of 1 % of the local ports.
 */
export function nodeModel(ports: number, variant = 0): FlowInput {
  const networks: FlowNetwork[] = [];
  for (let id = 1; id <= 20; id++) {
    if (id <= 14) networks.push({ id, type: "vxlan", segmentId: 20000 + id });
    else if (id <= 18) networks.push({ id, type: "vlan", segmentId: 300 + id, physnetPort: 200 });
    else networks.push({ id, type: "flat", physnetPort: 201 + (id - 19) });
  }
  const hex = (n: number) => (n & 255).toString(16).padStart(2, "0");
  const input: FlowInput = { tunnelPort: 100, networks, localPorts: [], remotePorts: [] };
  for (let i = 0; i < ports; i++) {
    const network = 1 + (i % 20);
    const k = 1 + Math.floor(i / 20);
    const changed = variant > 0 && i % 100 === 0 ? variant : 0;
    const ips = [`10.${network}.${k >> 8}.${k & 255}`];
    if (i % 4 === 0) ips.push(`fd00:${network.toString(16)}::${k.toString(16)}`);
    input.localPorts.push({
      // ofports 1..99 and 300.. : clear of the tunnel (100) and patch ports (200..).
      ofport: i < 99 ? 1 + i : 301 + i,
      network,
      mac: `02:${hex(0x10 + changed)}:00:${hex(i >> 16)}:${hex(i >> 8)}:${hex(i)}`,
      ips,
      cookie: 1 + i,
    });
    const node = (i * 7) % 50;
    input.remotePorts.push({
      network,
      mac: `02:20:00:${hex(i >> 16)}:${hex(i >> 8)}:${hex(i)}`,
      ips: [`10.${network}.${128 + (k >> 8)}.${k & 255}`],
      nodeIp: `192.168.${node >> 4}.${1 + (node & 15)}`,
    });
  }
  return input;
}

export interface ResyncCase {
  what: string;
  flows: number;
  compileMs: number;
  replaceMs: number;
  /** Flows in the table afterwards (dump-flows), as a check. */
  installed: number;
}

export interface ResyncFigures {
  ports: number;
  cases: ResyncCase[];
  /** Size of the flow text handed to ovs-ofctl. */
  textBytes: number;
  /** `ovs-ofctl parse-flows` of that text (no switch involved): the text parsing alone. */
  parseMs: number;
  /** `ovs-ofctl dump-flows` of the installed table (what replace-flows reads first). */
  dumpMs: number;
}

export async function resyncFigures(cleanup: Cleanup, ports: number): Promise<ResyncFigures> {
  log(`full resync: ${ports} local + ${ports} remote ports' flows into a private OVS`);
  const sim = await startSimNode({ name: "rs", cleanup });
  const ovs = new Ovs(sim.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  await ovs.ensureVxlanPort("br-int", "vxlan0", 100);

  // Warm the compiler (WASM instantiation happens on first use, as in a running agent).
  compileFlows(nodeModel(100));
  const compile = (input: FlowInput) => {
    const times: number[] = [];
    let flows: string[] = [];
    for (let k = 0; k < 3; k++) {
      const t0 = now();
      flows = compileFlows(input);
      times.push(now() - t0);
    }
    return { flows, ms: median(times) };
  };
  const base = compile(nodeModel(ports));
  const changed = compile(nodeModel(ports, 1));

  const cases: ResyncCase[] = [];
  const replace = async (what: string, c: { flows: string[]; ms: number }) => {
    const t0 = now();
    await ovs.bundle("br-int", c.flows, [], { replaceAll: true });
    const replaceMs = now() - t0;
    const installed = (await ovs.dumpFlows("br-int")).length;
    cases.push({ what, flows: c.flows.length, compileMs: c.ms, replaceMs, installed });
  };
  await replace("into an empty table (OVS restarted)", base);
  await replace("onto the same flows (agent restarted without its state)", base);
  await replace("onto a table where 1 % of the ports changed", changed);

  // Where replace-flows' time goes: parsing the text, and reading the installed table.
  const file = `${sim.stateDir}/flows.txt`;
  const text = changed.flows.join("\n") + "\n";
  await Deno.writeTextFile(file, text);
  const env = { OVS_RUNDIR: sim.ovs.rundir! };
  const parse = await run(
    ["sh", "-c", 'ovs-ofctl -O OpenFlow13 parse-flows "$0" >/dev/null', file],
    {
      env,
    },
  );
  const dump = await run(
    ["sh", "-c", "ovs-ofctl -O OpenFlow13 --no-stats dump-flows br-int >/dev/null"],
    { env },
  );
  return {
    ports,
    cases,
    textBytes: new TextEncoder().encode(text).length,
    parseMs: parse.ms,
    dumpMs: dump.ms,
  };
}
