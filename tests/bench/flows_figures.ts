/**
 * The flow compiler and a full flow resync on a real Open vSwitch.
 *
 * - compileFlows (WASM) against compileFlowsTs (the same source as plain JavaScript):
 *   wasm/bench/flows_bench.ts run under `deno bench --json` (a process of its own, so that V8 does not
 *   mix the two), read back.
 * - Full resync: a node model with N local ports (and as many remote ones), the first flow sync of
 *   a freshly started agent (the agent's Dataplane, from compile to bundle, on a private userspace
 *   OVS): into an empty table (OVS restarted), onto the same table and onto a table 1 % of whose
 *   ports changed (agent restarted). Each case also without the flow journal (the table replaced
 *   with `ovs-ofctl --bundle replace-flows`, as before the journal), and the yardsticks of the same
 *   run: `ovs-ofctl parse-flows` of the text, `--bundle add-flows` of it into an empty table, and
 *   `dump-flows` of the installed table.
 */
import { type Logger, run } from "@knitter/common";
import { compileFlows, type FlowInput, type FlowNetwork } from "@knitter/wasm";
import { Dataplane } from "../../agent/dataplane/dataplane.ts";
import { FlowJournal } from "../../agent/dataplane/flow_journal.ts";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode } from "../../devstack/sim_node.ts";
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
    args: ["bench", "--allow-read", "--json", "wasm/bench/flows_bench.ts"],
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
 * `variant` changes the MACs of 1 % of the local ports. Every network has a gateway (answered by
 * the distributed gateway) unless `gateways` is false.
 */
export function nodeModel(ports: number, variant = 0, gateways = true): FlowInput {
  const networks: FlowNetwork[] = [];
  for (let id = 1; id <= 20; id++) {
    if (id <= 14) networks.push({ id, type: "vxlan", segmentId: 20000 + id });
    else if (id <= 18) networks.push({ id, type: "vlan", segmentId: 300 + id, physnetPort: 200 });
    else networks.push({ id, type: "flat", physnetPort: 201 + (id - 19) });
    if (gateways) {
      Object.assign(networks[id - 1], {
        gateway: `10.${id}.255.254`,
        gatewayMac: `0a:58:00:00:00:${hex(id)}`,
      });
    }
  }
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

const hex = (n: number) => (n & 255).toString(16).padStart(2, "0");

export interface FlowsPerPort {
  ports: number;
  networks: number;
  /** Flows of the node model without gateways (before the distributed gateway) and with one each. */
  before: number;
  after: number;
  /** With the 20 networks on 5 routers of 4, each with one static route (routedModel). */
  routed: number;
  /** And the node on every network through a host port (egress or hostAccess: hostedModel). */
  hosted: number;
}

/**
 * The node model with its networks on routers (issue 16): 5 routers of 4 networks each, every
 * ordered pair of them routed (the network's /16), and one static route per router through a
 * local port of its first network.
 */
export function routedModel(ports: number): FlowInput {
  const input = nodeModel(ports);
  input.routes = [];
  for (let first = 1; first <= 20; first += 4) {
    const members = [first, first + 1, first + 2, first + 3];
    const hop = input.localPorts.find((p) => p.network === first);
    for (const from of members) {
      for (const to of members) {
        if (to !== from) input.routes.push({ from, to, dst: `10.${to}.0.0/16` });
      }
      if (hop) {
        input.routes.push({ from, to: first, dst: `10.${100 + first}.0.0/16`, via: hop.ips[0] });
      }
    }
  }
  return input;
}

/**
 * The routed model with the node on every network (egress or hostAccess, issue 16): a host port
 * each, on ofports clear of the pods', the tunnel and the patch ports.
 */
export function hostedModel(ports: number): FlowInput {
  const input = routedModel(ports);
  for (const n of input.networks) n.hostPort = 60_000 + n.id;
  return input;
}

/**
 * Flows per local port, before and after the distributed gateway (issue 16): the node model of
 * nodeModel (20 networks, as many remote ports as local ones) at several sizes, compiled without
 * and with a gateway on every network.
 */
export function flowsPerPort(sizes = [20, 100, 1000, 10000]): FlowsPerPort[] {
  return sizes.map((ports) => ({
    ports,
    networks: nodeModel(ports).networks.length,
    before: compileFlows(nodeModel(ports, 0, false)).length,
    after: compileFlows(nodeModel(ports)).length,
    routed: compileFlows(routedModel(ports)).length,
    hosted: compileFlows(hostedModel(ports)).length,
  }));
}

export interface ResyncCase {
  what: string;
  flows: number;
  /** The agent's first sync after a start (agent/dataplane/dataplane.ts): compile, journal, OVS. */
  agentMs: number;
  /** What it did: "replaced" (ovs-ofctl --bundle replace-flows) or "resumed" (journal + diff). */
  how: string;
  /** The same case without a journal (the table replaced, as before the journal). */
  noJournalMs: number;
  /** Flows in the table afterwards (dump-aggregate), as a check. */
  installed: number;
}

export interface ResyncFigures {
  ports: number;
  cases: ResyncCase[];
  /** The compile alone (WASM, median of 3). */
  compileMs: number;
  /** Size of the flow text handed to ovs-ofctl. */
  textBytes: number;
  /** Yardstick: `ovs-ofctl parse-flows` of that text (no switch involved): the text parsing alone. */
  parseMs: number;
  /** Yardstick: `ovs-ofctl --bundle add-flows` of that text into an empty table: the least any loader takes. */
  addFlowsMs: number;
  /** Yardstick: `ovs-ofctl dump-flows` of the installed table (what replace-flows reads first). */
  dumpMs: number;
}

const BRIDGE = "br-int";

/**
 * The first flow sync of a freshly started agent: a new Dataplane (agent/dataplane/dataplane.ts, the agent's
 * own code from compile to bundle) whose model is `input`, with the flow journal in `journalDir`
 * or none. Answers the time and how it went ("resumed" from the journal, or "replaced").
 */
async function firstSync(
  ovs: Ovs,
  input: FlowInput,
  journalDir: string | null,
): Promise<{ ms: number; how: string }> {
  const said: string[] = [];
  const log: Logger = {
    debug() {},
    info: (msg) => void said.push(msg),
    warn: (msg) => void said.push(msg),
    error: (msg) => void said.push(msg),
  };
  const config = {
    nodeName: "rs",
    bridge: BRIDGE,
    datapathType: "netdev" as const,
    tunnel: { port: "vxlan0", ofport: 100 },
    bridgeMappings: [],
  };
  // The model comes from the bench, not from agent state and the manager's feed.
  const dp = new Dataplane(ovs, config, null as never, null as never, log);
  Object.defineProperty(dp, "model", { value: () => Promise.resolve(input) });
  if (journalDir) dp.journal = new FlowJournal(journalDir, log);
  const t0 = now();
  await dp.sync();
  const ms = now() - t0;
  // The journal's snapshot is written after the flows are in; the next start reads it.
  await dp.journal?.settled();
  return { ms, how: said.includes("flows resumed from the journal") ? "resumed" : "replaced" };
}

export async function resyncFigures(cleanup: Cleanup, ports: number): Promise<ResyncFigures> {
  log(`full resync: ${ports} local + ${ports} remote ports' flows into a private OVS`);
  const sim = await startSimNode({ name: "rs", cleanup });
  const ovs = new Ovs(sim.ovs);
  await ovs.ensureBridge(BRIDGE, { datapathType: "netdev", failMode: "secure" });
  await ovs.ensureVxlanPort(BRIDGE, "vxlan0", 100);
  const env = { OVS_RUNDIR: sim.ovs.rundir! };
  const ofctl = (cmd: string, ...args: string[]) =>
    run(["sh", "-c", `ovs-ofctl -O OpenFlow13 --no-names ${cmd}`, ...args], { env });
  const journal = `${sim.stateDir}/journal`;
  await Deno.mkdir(journal);

  // Warm the compiler (WASM instantiation happens on first use, as in a running agent).
  compileFlows(nodeModel(100));
  const base = nodeModel(ports);
  const changed = nodeModel(ports, 1);
  const times: number[] = [];
  let flows: string[] = [];
  for (let k = 0; k < 3; k++) {
    const t0 = now();
    flows = compileFlows(base);
    times.push(now() - t0);
  }

  // Yardsticks, on the same text: parsing alone, and loading it into an empty table.
  const file = `${sim.stateDir}/flows.txt`;
  const text = flows.join("\n") + "\n";
  await Deno.writeTextFile(file, text);
  const parse = await ofctl('parse-flows "$0" >/dev/null', file);
  await ofctl(`del-flows ${BRIDGE}`);
  const addFlows = await ofctl(`--bundle add-flows ${BRIDGE} "$0"`, file);
  const dump = await ofctl(`--no-stats dump-flows ${BRIDGE} >/dev/null`);

  const cases: ResyncCase[] = [];
  const measure = async (what: string, input: FlowInput, before: () => Promise<void>) => {
    // Without a journal first (the table as before: replace-flows), then the agent as it is.
    await before();
    await Deno.remove(journal, { recursive: true });
    await Deno.mkdir(journal);
    const old = await firstSync(ovs, input, null);
    await firstSync(ovs, base, journal); // back to the base table, and a journal of it
    await before();
    const agent = await firstSync(ovs, input, journal);
    cases.push({
      what,
      flows: flows.length,
      agentMs: agent.ms,
      how: agent.how,
      noJournalMs: old.ms,
      installed: await ovs.flowCount(BRIDGE),
    });
  };
  const emptyTable = async () => void await ofctl(`del-flows ${BRIDGE}`);
  const nothing = () => Promise.resolve();
  await measure("into an empty table (OVS restarted)", base, emptyTable);
  await measure("onto the same flows (agent restarted)", base, nothing);
  await measure("onto a table where 1 % of the ports changed (agent restarted)", changed, nothing);
  return {
    ports,
    cases,
    compileMs: median(times),
    textBytes: new TextEncoder().encode(text).length,
    parseMs: parse.ms,
    addFlowsMs: addFlows.ms,
    dumpMs: dump.ms,
  };
}
