/**
 * Pod ADD and DEL latency and burst throughput on one node, three ways, in the same run:
 *
 * - knitter: the real plugin (plugin/build/knitter, the native forwarder), as a runtime execs it, against a one-node
 *   stack (manager process, agent process, private userspace OVS);
 * - shell: the bare command sequence per pod on a private userspace OVS (veth made into the pod's
 *   netns, `ip -n POD -batch`, `ovs-vsctl add-port ... tag`, `ovs-ofctl --no-names add-flows` of
 *   3 flows: --no-names spares the port and table lookups, as the agent does);
 * - reference: Debian's `bridge` plugin with `host-local` IPAM (a Linux bridge, no OVS).
 *
 * Every command is exec'd by tests/bench/driver.ts from inside the subject's node netns, as kubelet
 * execs plugins on its host. Sequential ADDs run in rounds that alternate the subjects, so that
 * the machine's drift hits all three alike.
 */
import { run } from "@knitter/common";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode } from "../../devstack/sim_node.ts";
import { type Stack, startStack } from "../../devstack/stack.ts";
import type { DriverJob, DriverResult, DriverRun } from "./driver.ts";
import { drive, log, percentile, podNetns } from "./support.ts";
import { buildPlugin } from "../../plugin/build.ts";

const PLUGIN = await buildPlugin();
const PLUGIN_DIR = PLUGIN.slice(0, PLUGIN.lastIndexOf("/"));

export type SubjectName = "knitter" | "shell" | "reference";

export interface Subject {
  name: SubjectName;
  /** Where the driver runs: the subject's node netns. */
  netns: string;
  pods: string[];
  add(phase: string, i: number): DriverJob;
  del(phase: string, i: number, added: DriverRun): DriverJob;
}

export interface LatencyFigures {
  p50: number;
  p99: number;
  mean: number;
  n: number;
}

export interface BurstFigures {
  pods: number;
  wallMs: number;
  podsPerSecond: number;
  /** Per-pod latency inside the burst. */
  latency: LatencyFigures;
}

export interface SubjectFigures {
  add: LatencyFigures;
  del: LatencyFigures;
  burstAdd: BurstFigures;
  burstDel: BurstFigures;
}

export interface CniFigures {
  pods: number;
  subjects: Record<SubjectName, SubjectFigures>;
  /** The plugin answering VERSION (no agent call), and `deno run` of an empty file. */
  pluginVersionP50: number;
  /** The same VERSION execs, `burst` of them at once: the ceiling the plugin itself puts on a burst. */
  pluginVersionBurst: BurstFigures;
  denoEmptyP50: number;
  stack: Stack;
}

export function latency(ms: number[]): LatencyFigures {
  return {
    p50: percentile(ms, 50),
    p99: percentile(ms, 99),
    mean: ms.reduce((a, b) => a + b, 0) / ms.length,
    n: ms.length,
  };
}

const BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Jobs that exec the real plugin wrapper for pod `i` (tenant "bench", network "net"), as a runtime
 * does: CNI_* variables, the network config on stdin (with prevResult for DEL).
 */
export function knitterJobs(
  agentSocket: string,
  netnsPaths: string[],
  extra: Record<string, unknown> = {},
) {
  const conf = {
    cniVersion: "1.1.0",
    name: "knitter",
    type: "knitter",
    networks: ["net"],
    ...extra,
  };
  const uids = new Map<string, string>();
  return (command: string, phase: string, i: number, prev?: unknown): DriverJob => {
    const id = `${phase}${i}`;
    if (!uids.has(id)) uids.set(id, crypto.randomUUID());
    return {
      argv: [PLUGIN],
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: `knitter${id}`,
        CNI_NETNS: netnsPaths[i],
        CNI_IFNAME: "eth0",
        CNI_ARGS: `K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-${id};K8S_POD_UID=${uids.get(id)}`,
        CNI_PATH: `${PLUGIN_DIR}:/usr/lib/cni`,
        KNITTER_AGENT_SOCKET: agentSocket,
        PATH: BASE_PATH,
      },
      stdin: JSON.stringify(prev === undefined ? conf : { ...conf, prevResult: prev }),
    };
  };
}

/** The one-node knitter stack, its tenant "bench" and network "net" (10.200.0.0/16, VXLAN). */
export async function knitterSubject(cleanup: Cleanup, pods: number): Promise<[Subject, Stack]> {
  const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "warn" });
  const node = stack.nodes[0];
  for (
    const [path, body] of [
      ["tenants", { name: "bench" }],
      ["tenants/bench/networks", { name: "net", cidr: "10.200.0.0/16", gateway: "10.200.0.1" }],
    ] as const
  ) {
    const r = await stack.api("POST", path, body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  const netnsPaths: string[] = [];
  for (let i = 0; i < pods; i++) netnsPaths.push(await podNetns(cleanup, `kp${i}`));
  const job = knitterJobs(node.agentSocket, netnsPaths);
  return [{
    name: "knitter",
    netns: node.sim.netns,
    pods: netnsPaths,
    add: (phase, i) => job("ADD", phase, i),
    del: (phase, i, added) => job("DEL", phase, i, JSON.parse(added.stdout)),
  }, stack];
}

/** A private userspace OVS with br-int; each pod is four commands in one `sh`. */
async function shellSubject(cleanup: Cleanup, pods: number): Promise<Subject> {
  const sim = await startSimNode({ name: "sh", cleanup });
  const ovs = new Ovs(sim.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  const netnsNames: string[] = [];
  for (let i = 0; i < pods; i++) {
    await podNetns(cleanup, `sp${i}`);
    netnsNames.push(cleanup.name(`sp${i}`));
  }
  const env = { PATH: BASE_PATH, OVS_RUNDIR: sim.ovs.rundir! };
  const db = `--db=unix:${sim.ovs.dbSock}`;
  const hex = (n: number) => (n & 255).toString(16).padStart(2, "0");
  const pod = (phase: string, i: number) => ({
    host: `sb${phase}${i}`,
    netns: netnsNames[i],
    mac: `02:bb:00:00:${hex(i >> 8)}:${hex(i)}`,
    ip: `10.201.${i >> 8}.${(i & 255) + 2}`,
    ofport: i + 1,
    cookie: `0x${(i + 1).toString(16)}`,
  });
  return {
    name: "shell",
    netns: sim.netns,
    pods: netnsNames.map((n) => `/var/run/netns/${n}`),
    add(phase, i) {
      const p = pod(phase, i);
      const script = `set -e
ip link add ${p.host} mtu 1450 up type veth peer name eth0 address ${p.mac} mtu 1450 netns ${p.netns}
ip -n ${p.netns} -batch - <<EOF
addr add ${p.ip}/16 dev eth0
link set eth0 up
route add default via 10.201.0.1
EOF
ovs-vsctl ${db} add-port br-int ${p.host} tag=100 -- set Interface ${p.host} ofport_request=${p.ofport}
ovs-ofctl -O OpenFlow13 --no-names add-flows br-int - <<EOF
cookie=${p.cookie},table=0,priority=100,in_port=${p.ofport},dl_src=${p.mac},actions=goto_table:10
cookie=${p.cookie},table=10,priority=100,ip,nw_dst=${p.ip},actions=output:${p.ofport}
cookie=${p.cookie},table=10,priority=100,arp,arp_tpa=${p.ip},actions=output:${p.ofport}
EOF
`;
      return { argv: ["sh", "-c", script], env };
    },
    del(phase, i) {
      const p = pod(phase, i);
      const script = `set -e
ovs-vsctl ${db} --if-exists del-port br-int ${p.host}
ovs-ofctl -O OpenFlow13 --no-names del-flows br-int cookie=${p.cookie}/-1
ip link del ${p.host}
`;
      return { argv: ["sh", "-c", script], env };
    },
  };
}

/** The reference plugins in a netns of their own: `bridge` (isGateway) with `host-local`. */
async function referenceSubject(cleanup: Cleanup, pods: number): Promise<Subject> {
  const netns = cleanup.name("ref");
  cleanup.netns(netns);
  await run(["ip", "netns", "add", netns]);
  await run(["ip", "-n", netns, "link", "set", "lo", "up"]);
  const dataDir = await cleanup.tempDir();
  const netnsPaths: string[] = [];
  for (let i = 0; i < pods; i++) netnsPaths.push(await podNetns(cleanup, `rp${i}`));
  const conf = {
    cniVersion: "1.0.0",
    name: "refnet",
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ipMasq: false,
    ipam: { type: "host-local", subnet: "10.202.0.0/16", dataDir },
  };
  const job = (command: string, phase: string, i: number, prev?: unknown): DriverJob => ({
    argv: ["/usr/lib/cni/bridge"],
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: `reference${phase}${i}`,
      CNI_NETNS: netnsPaths[i],
      CNI_IFNAME: "eth0",
      CNI_PATH: "/usr/lib/cni",
      PATH: BASE_PATH,
    },
    stdin: JSON.stringify(prev === undefined ? conf : { ...conf, prevResult: prev }),
  });
  return {
    name: "reference",
    netns,
    pods: netnsPaths,
    add: (phase, i) => job("ADD", phase, i),
    del: (phase, i, added) => job("DEL", phase, i, JSON.parse(added.stdout)),
  };
}

/** `burst` concurrent ADDs, then as many concurrent DELs, one subject after another. */
async function runBursts(
  subjects: Subject[],
  burst: number,
  phase: string,
): Promise<Map<SubjectName, [DriverResult, DriverResult]>> {
  log(`${burst} concurrent ADDs, then DELs, per subject`);
  const bursts = new Map<SubjectName, [DriverResult, DriverResult]>();
  for (const s of subjects) {
    const idx = Array.from({ length: burst }, (_, i) => i);
    const added = await drive(s.netns, {
      mode: "concurrent",
      jobs: idx.map((i) => s.add(phase, i)),
    }, `${s.name} burst ADD`);
    const failed = added.runs.filter((r) => r.code !== 0);
    if (failed.length) {
      throw new Error(`${s.name} burst ADD: ${failed.length} failed: ${failed[0].stdout}`);
    }
    const deleted = await drive(s.netns, {
      mode: "concurrent",
      jobs: idx.map((i) => s.del(phase, i, added.runs[i])),
    }, `${s.name} burst DEL`);
    bursts.set(s.name, [added, deleted]);
  }
  return bursts;
}

/** `n` plugin processes answering VERSION at once: the plugin's own ceiling in a burst. */
function pluginVersionBurst(netns: string, n: number): Promise<DriverResult> {
  return drive(netns, {
    mode: "concurrent",
    jobs: Array.from({ length: n }, () => ({
      argv: [PLUGIN],
      env: { CNI_COMMAND: "VERSION", PATH: BASE_PATH },
      stdin: JSON.stringify({ cniVersion: "1.1.0" }),
    })),
  }, "plugin floor, concurrent");
}

function burst(res: DriverResult): BurstFigures {
  return {
    pods: res.runs.length,
    wallMs: res.wallMs,
    podsPerSecond: res.runs.length / (res.wallMs / 1000),
    latency: latency(res.runs.map((x) => x.ms)),
  };
}

/**
 * Only the bursts, `rounds` times (a fresh phase each), for working on them: pods/s per subject
 * and round.
 */
export async function burstFigures(
  cleanup: Cleanup,
  opts: { burst: number; rounds: number },
): Promise<
  Record<SubjectName, { add: BurstFigures; del: BurstFigures }[]> & { floor: BurstFigures[] }
> {
  const [knitter] = await knitterSubject(cleanup, opts.burst);
  const subjects = [
    knitter,
    await shellSubject(cleanup, opts.burst),
    await referenceSubject(cleanup, opts.burst),
  ];
  const out = { knitter: [], shell: [], reference: [], floor: [] as BurstFigures[] } as
    & Record<SubjectName, { add: BurstFigures; del: BurstFigures }[]>
    & { floor: BurstFigures[] };
  for (let r = 0; r < opts.rounds; r++) {
    for (const [name, [a, d]] of await runBursts(subjects, opts.burst, `b${r}`)) {
      out[name].push({ add: burst(a), del: burst(d) });
    }
    out.floor.push(burst(await pluginVersionBurst(knitter.netns, opts.burst)));
  }
  return out;
}

export async function cniFigures(
  cleanup: Cleanup,
  opts: { pods: number; rounds: number; burst: number },
): Promise<CniFigures> {
  const slots = Math.max(opts.pods, opts.burst);
  log(`setting up: a one-node knitter stack, a private OVS, a reference netns, ${slots} pods each`);
  const [knitter, stack] = await knitterSubject(cleanup, slots);
  const subjects = [
    knitter,
    await shellSubject(cleanup, slots),
    await referenceSubject(cleanup, slots),
  ];

  // Warm-up (not measured): caches, the plugin's first compile, OVS's first ports.
  for (const s of subjects) {
    const idx = [0, 1, 2];
    const added = await drive(s.netns, {
      mode: "sequential",
      jobs: idx.map((i) => s.add("w", i)),
    }, `${s.name} warm-up ADD`);
    await drive(s.netns, {
      mode: "sequential",
      jobs: idx.map((i) => s.del("w", i, added.runs[i])),
    }, `${s.name} warm-up DEL`);
  }

  // Sequential: rounds of pods/rounds pods per subject, the subjects' order rotating per round.
  const per = Math.ceil(opts.pods / opts.rounds);
  const addRuns = new Map<SubjectName, DriverRun[]>(subjects.map((s) => [s.name, []]));
  log(`sequential ADD: ${opts.rounds} rounds of ${per} pods per subject, alternating`);
  for (let r = 0; r < opts.rounds; r++) {
    const order = subjects.map((_, k) => subjects[(k + r) % subjects.length]);
    for (const s of order) {
      const idx = Array.from({ length: per }, (_, k) => r * per + k);
      const res = await drive(s.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.add("s", i)),
      }, `${s.name} ADD`);
      addRuns.get(s.name)!.push(...res.runs);
    }
  }
  log("sequential DEL, same rounds");
  const delRuns = new Map<SubjectName, DriverRun[]>(subjects.map((s) => [s.name, []]));
  for (let r = 0; r < opts.rounds; r++) {
    const order = subjects.map((_, k) => subjects[(k + r) % subjects.length]);
    for (const s of order) {
      const idx = Array.from({ length: per }, (_, k) => r * per + k);
      const res = await drive(s.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.del("s", i, addRuns.get(s.name)![i])),
      }, `${s.name} DEL`);
      delRuns.get(s.name)!.push(...res.runs);
    }
  }

  const bursts = await runBursts(subjects, opts.burst, "c");

  // The plugin's own floor, VERSION, next to what any Deno plugin would cost: an empty program.
  const empty = `${await cleanup.tempDir()}/empty.js`;
  await Deno.writeTextFile(empty, "\n");
  const floor = await drive(knitter.netns, {
    mode: "sequential",
    jobs: [
      ...Array.from({ length: 10 }, () => ({
        argv: [PLUGIN],
        env: { CNI_COMMAND: "VERSION", PATH: BASE_PATH },
        stdin: JSON.stringify({ cniVersion: "1.1.0" }),
      })),
      ...Array.from({ length: 10 }, () => ({
        argv: [Deno.execPath(), "run", "--quiet", "--no-prompt", "--no-config", empty],
        env: { PATH: BASE_PATH },
      })),
    ],
  }, "plugin floor");
  const versionBurst = await pluginVersionBurst(knitter.netns, opts.burst);

  const figures = {} as Record<SubjectName, SubjectFigures>;
  for (const s of subjects) {
    const [a, d] = bursts.get(s.name)!;
    figures[s.name] = {
      add: latency(addRuns.get(s.name)!.map((x) => x.ms)),
      del: latency(delRuns.get(s.name)!.map((x) => x.ms)),
      burstAdd: burst(a),
      burstDel: burst(d),
    };
  }
  return {
    pods: per * opts.rounds,
    subjects: figures,
    pluginVersionP50: percentile(floor.runs.slice(0, 10).map((x) => x.ms), 50),
    pluginVersionBurst: burst(versionBurst),
    denoEmptyP50: percentile(floor.runs.slice(10).map((x) => x.ms), 50),
    stack,
  };
}

/**
 * Only the sequential ADDs, in `rounds` rounds of `per` pods per subject (knitter and the bare
 * shell, their order rotating per round, as in cniFigures), each pod deleted after its round: p50
 * per round and subject, for working on the sequential ADD against its yardstick in the same run.
 */
export async function sequentialFigures(
  cleanup: Cleanup,
  opts: { per: number; rounds: number },
): Promise<{
  stack: Stack;
  rounds: Record<"knitter" | "shell", LatencyFigures>[];
  /** Every counted ADD of the run, per subject. */
  all: Record<"knitter" | "shell", LatencyFigures>;
}> {
  const [knitter, stack] = await knitterSubject(cleanup, opts.per);
  const subjects = [knitter, await shellSubject(cleanup, opts.per)];
  const out: Record<"knitter" | "shell", LatencyFigures>[] = [];
  const pooled = { knitter: [] as number[], shell: [] as number[] };
  // Round 0 warms caches, the plugin and OVS up; it is not counted.
  for (let r = 0; r <= opts.rounds; r++) {
    const figures = {} as Record<"knitter" | "shell", LatencyFigures>;
    for (const s of subjects.map((_, k) => subjects[(k + r) % subjects.length])) {
      const idx = Array.from({ length: opts.per }, (_, k) => k);
      const added = await drive(s.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.add(`q${r}`, i)),
      }, `${s.name} ADD`);
      const failed = added.runs.find((x) => x.code !== 0);
      if (failed) throw new Error(`${s.name} ADD failed: ${failed.stdout}`);
      await drive(s.netns, {
        mode: "sequential",
        jobs: idx.map((i) => s.del(`q${r}`, i, added.runs[i])),
      }, `${s.name} DEL`);
      const name = s.name as "knitter" | "shell";
      figures[name] = latency(added.runs.map((x) => x.ms));
      if (r > 0) pooled[name].push(...added.runs.map((x) => x.ms));
    }
    if (r > 0) out.push(figures);
  }
  return {
    stack,
    rounds: out,
    all: { knitter: latency(pooled.knitter), shell: latency(pooled.shell) },
  };
}
