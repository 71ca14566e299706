/**
 * The local stack launcher: one command brings up a manager and N simulated nodes (a netns each,
 * with a private Open vSwitch and an agent) and returns, leaving them running; one command takes
 * all of it down again. What `up` made is recorded in DIR/stack.json (the manifest), which is all
 * `down` needs.
 *
 *   deno task stack up [--nodes 2] [--physnets phys1,phys2] [--dir .state/stack] [--log-level info]
 *   deno task stack status [--dir .state/stack]
 *   deno task stack down [--dir .state/stack]
 *
 * Needs root (network namespaces, OVS). Built on devstack/stack.ts, the stack the end-to-end
 * tests use too, with its daemons detached so that they outlive this command.
 */
import { parseArgs } from "node:util";
import { run } from "@knitter/common";
import { Cleanup, pidAlive, randomHex, startStack, stopPid } from "@knitter/devstack";
import { buildPlugin } from "@knitter/plugin/build";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
const MANIFEST = "stack.json";
const DEFAULT_DIR = ".state/stack";
/** What `up` makes at the manager, so that a pod can be attached at once. */
const DEMO = { tenant: "default", network: "demo", cidr: "10.88.0.0/24", gateway: "10.88.0.1" };
const PHYSNET_VLANS = { start: 100, end: 199 };

export interface ProcessRecord {
  role: string;
  pid: number;
  /** /proc/PID/cmdline when recorded, split at NUL; `down` signals only a process that still has it. */
  cmdline: string[];
  /** The netns it runs in (absent: the launcher's own). */
  netns?: string;
}

export interface NodeRecord {
  name: string;
  netns: string;
  netnsPath: string;
  underlayIp: string;
  stateDir: string;
  agentSocket: string;
  agentLog: string;
  ovs: { dbSock: string; rundir: string };
  /** The conflist a runtime reads (from /etc/cni/net.d on a real node). */
  cniConflist: string;
  /** The same network as one plugin config, what a runtime writes to the plugin's stdin. */
  cniConfig: string;
  /** `DIR/NODE/cni ADD|DEL|CHECK POD [IFNAME]`: runs the plugin for a pod, as a runtime would. */
  cniScript: string;
}

export interface Manifest {
  version: 1;
  /** "starting" while `up` runs (a crash leaves it so; `down` still works from it). */
  status: "starting" | "up";
  createdAt: string;
  dir: string;
  repo: string;
  /** Every netns of the stack is named PREFIX-...; pods made with the cni scripts too. */
  prefix: string;
  manager: { url: string; adminToken: string; socket: string; log: string };
  nodes: NodeRecord[];
  physnets: { name: string; netns: string; bridge: string }[];
  demo: typeof DEMO | null;
  /** In the order `down` stops them: agents, OVS daemons, the manager. */
  processes: ProcessRecord[];
  netns: string[];
  dirs: string[];
}

/** A Cleanup (undoes everything if `up` fails) that also tells what it was given. */
class RecordingCleanup extends Cleanup {
  readonly recordedPids: number[] = [];
  readonly recordedNetns: string[] = [];
  readonly recordedDirs: string[] = [];

  constructor(prefix: string, private readonly changed: () => void) {
    super(prefix);
  }

  override pid(pid: number): void {
    super.pid(pid);
    this.recordedPids.push(pid);
    this.changed();
  }

  override netns(name: string): void {
    super.netns(name);
    this.recordedNetns.push(name);
    this.changed();
  }

  override dir(path: string): void {
    super.dir(path);
    this.recordedDirs.push(path);
    this.changed();
  }
}

const USAGE = `Usage: deno task stack <up|down|status> [options]

  up       start a manager and N simulated nodes (netns + private OVS + agent), then return
  down     stop and remove everything the manifest in DIR records; harmless when nothing is up
  status   say what the manifest records and what of it is running

Options:
  --dir DIR          where the stack lives (default ${DEFAULT_DIR}; the manifest is DIR/${MANIFEST})
  --nodes N          up: number of nodes, named n1..nN (default 2)
  --physnets A,B     up: physical networks every node is attached to (a VLAN-transparent L2
                     segment each; registered at the manager with VLAN IDs ${PHYSNET_VLANS.start}-${PHYSNET_VLANS.end})
  --log-level LEVEL  up: debug | info | warn | error for the manager and agents (default info)
  --no-demo          up: do not create the tenant "${DEMO.tenant}" with network "${DEMO.network}" (${DEMO.cidr})
  --quiet            print only errors (and, for up, the manifest's path)
`;

interface Flags {
  dir: string;
  nodes: number;
  physnets: string[];
  logLevel: "debug" | "info" | "warn" | "error";
  demo: boolean;
  quiet: boolean;
}

function parse(args: string[]): { command: string; flags: Flags } {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      dir: { type: "string", default: DEFAULT_DIR },
      nodes: { type: "string", default: "2" },
      physnets: { type: "string", multiple: true, default: [] },
      "log-level": { type: "string", default: "info" },
      "no-demo": { type: "boolean", default: false },
      quiet: { type: "boolean", short: "q", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return { command: "help", flags: undefined as unknown as Flags };
  if (positionals.length !== 1) throw new UsageError("say one of up, down, status");
  const nodes = Number(values.nodes);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 20) {
    throw new UsageError(`--nodes must be 1 to 20, not "${values.nodes}"`);
  }
  const physnets = values.physnets.flatMap((p) => p.split(",")).filter((p) => p !== "");
  for (const p of physnets) {
    if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(p)) {
      throw new UsageError(`--physnets: "${p}" is not a lowercase DNS label`);
    }
  }
  const logLevel = values["log-level"];
  if (!["debug", "info", "warn", "error"].includes(logLevel)) {
    throw new UsageError(`--log-level must be debug, info, warn or error, not "${logLevel}"`);
  }
  return {
    command: positionals[0],
    flags: {
      dir: values.dir,
      nodes,
      physnets,
      logLevel: logLevel as Flags["logLevel"],
      demo: !values["no-demo"],
      quiet: values.quiet,
    },
  };
}

class UsageError extends Error {}

// ---------------------------------------------------------------------------------------- up

async function up(flags: Flags): Promise<number> {
  requireRoot();
  if (!(await exists(`${ROOT}/wasm/build/flows.wasm`))) {
    throw new Error(`${ROOT}/wasm/build is missing: run "deno task build:wasm" (or "make build")`);
  }
  // The nodes' CNI plugin, the native forwarder (a no-op when it is up to date).
  await buildPlugin();
  const dir = absolute(flags.dir);
  const existing = await readManifest(dir);
  if (existing) {
    throw new Error(
      `A stack is already recorded in ${dir} (netns ${existing.prefix}-*, ${existing.status}): ` +
        `run "deno task stack down --dir ${flags.dir}" first`,
    );
  }
  if (await exists(dir)) {
    let empty = true;
    for await (const _ of Deno.readDir(dir)) empty = false;
    if (!empty) throw new Error(`${dir} exists and is not empty (and holds no ${MANIFEST})`);
  }
  await Deno.mkdir(dir, { recursive: true });
  const realDir = await Deno.realPath(dir);
  // Unix socket paths are limited to 107 bytes; the agent's is the longest the stack makes.
  const longest = `${realDir}/n${flags.nodes}/agent/run/agent.sock`;
  if (new TextEncoder().encode(longest).length > 107) {
    await Deno.remove(realDir).catch(() => {});
    throw new Error(
      `--dir ${dir} is too long for unix sockets under it (${longest}): use a shorter one`,
    );
  }

  const prefix = await unusedPrefix();
  const manifest: Manifest = {
    version: 1,
    status: "starting",
    createdAt: new Date().toISOString(),
    dir: realDir,
    repo: ROOT,
    prefix,
    manager: { url: "", adminToken: "", socket: "", log: "" },
    nodes: [],
    physnets: [],
    demo: null,
    processes: [],
    netns: [],
    dirs: [realDir],
  };
  // Until `up` is done, every registration is written down at once: a crash mid-way (or ^C) still
  // leaves a manifest that `down` can work from.
  const cleanup: RecordingCleanup = new RecordingCleanup(prefix, () => {
    manifest.processes = cleanup.recordedPids.map((pid) => ({ role: "?", pid, cmdline: [] }));
    manifest.netns = [...cleanup.recordedNetns];
    writeManifestSync(realDir, manifest);
  });
  writeManifestSync(realDir, manifest);
  // Cleaning up here would race with startStack, which goes on starting things: leave it all to
  // `down`, which works from the manifest written so far (and the netns prefix).
  const interrupted = () => {
    console.error(
      `stack: interrupted; remove what was started with "deno task stack down --dir ${flags.dir}"`,
    );
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", interrupted);
  Deno.addSignalListener("SIGTERM", interrupted);

  const nodeNames = Array.from({ length: flags.nodes }, (_, i) => `n${i + 1}`);
  log(flags, `starting a manager and ${flags.nodes} node(s) in ${realDir} (netns ${prefix}-*)`);
  try {
    const stack = await startStack({
      cleanup,
      nodes: nodeNames,
      physnets: flags.physnets,
      logLevel: flags.logLevel,
      dir: realDir,
      detached: true,
    });
    for (const physnet of flags.physnets) {
      await must(stack.api("POST", "physnets", { name: physnet, vlanRanges: [PHYSNET_VLANS] }));
      const seg = stack.physnets?.[physnet];
      if (seg) manifest.physnets.push({ name: physnet, netns: seg.netns, bridge: seg.bridge });
    }
    if (flags.demo) {
      await must(stack.api("POST", "tenants", { name: DEMO.tenant }));
      await must(stack.api("POST", `tenants/${DEMO.tenant}/networks`, {
        name: DEMO.network,
        cidr: DEMO.cidr,
        gateway: DEMO.gateway,
      }));
      manifest.demo = DEMO;
    }

    manifest.manager = {
      url: stack.managerUrl,
      adminToken: stack.adminToken,
      socket: `${stack.dir}/manager.sock`,
      log: `${stack.dir}/manager.log`,
    };
    const agents: ProcessRecord[] = [];
    const ovs: ProcessRecord[] = [];
    for (const node of stack.nodes) {
      const record = await writeNodeFiles(manifest, node.name, {
        netns: node.sim.netns,
        netnsPath: node.sim.netnsPath,
        underlayIp: node.sim.underlayIp,
        stateDir: node.sim.stateDir,
        agentSocket: node.agentSocket,
        ovs: {
          dbSock: node.sim.ovs.dbSock ?? "",
          rundir: node.sim.ovs.rundir ?? node.sim.stateDir,
        },
      });
      manifest.nodes.push(record);
      for (const pid of await netnsPids(node.sim.netns)) {
        const cmdline = await readCmdline(pid);
        if (!cmdline) continue;
        const rec = { role: roleOf(cmdline), pid, cmdline, netns: node.sim.netns };
        if (rec.role === "agent") agents.push(rec);
        else if (rec.role.startsWith("ovs")) ovs.push(rec);
        // Anything else is a passing command of the agent's (ovs-vsctl, ip), not a daemon.
      }
    }
    const others: ProcessRecord[] = [];
    for (const pid of cleanup.recordedPids) {
      if ([...agents, ...ovs].some((p) => p.pid === pid)) continue;
      const cmdline = await readCmdline(pid);
      if (cmdline) others.push({ role: roleOf(cmdline), pid, cmdline });
    }
    // OVS: vswitchd before ovsdb-server, as the init scripts stop them.
    ovs.sort((a, b) => (a.role === "ovs-vswitchd" ? 0 : 1) - (b.role === "ovs-vswitchd" ? 0 : 1));
    manifest.processes = [...agents, ...ovs, ...others];
    manifest.netns = [...new Set(await stackNetns(prefix))];
    manifest.status = "up";
    writeManifestSync(realDir, manifest);
  } catch (err) {
    console.error(`stack: up failed, taking down what was started: ${(err as Error).message}`);
    await cleanup.cleanup().catch((e) => console.error(`stack: cleanup: ${e}`));
    return 1;
  } finally {
    Deno.removeSignalListener("SIGINT", interrupted);
    Deno.removeSignalListener("SIGTERM", interrupted);
  }
  if (flags.quiet) console.log(`${realDir}/${MANIFEST}`);
  else console.log(howTo(manifest, flags.dir));
  return 0;
}

/** Writes a node's CNI configs and its `cni` helper script; returns its record. */
async function writeNodeFiles(
  m: Manifest,
  name: string,
  n: Omit<NodeRecord, "name" | "agentLog" | "cniConflist" | "cniConfig" | "cniScript">,
): Promise<NodeRecord> {
  const netD = `${n.stateDir}/net.d`;
  await Deno.mkdir(netD, { recursive: true });
  const networks = m.demo ? [m.demo.network] : [];
  const plugin = { type: "knitter", agentSocket: n.agentSocket, networks };
  const conflist = { cniVersion: "1.1.0", name: "knitter", plugins: [plugin] };
  const config = { cniVersion: "1.1.0", name: "knitter", ...plugin };
  const record: NodeRecord = {
    name,
    ...n,
    agentLog: `${n.stateDir}/agent.log`,
    cniConflist: `${netD}/10-knitter.conflist`,
    cniConfig: `${n.stateDir}/knitter.conf`,
    cniScript: `${n.stateDir}/cni`,
  };
  await Deno.writeTextFile(record.cniConflist, JSON.stringify(conflist, null, 2) + "\n");
  await Deno.writeTextFile(record.cniConfig, JSON.stringify(config, null, 2) + "\n");
  await Deno.writeTextFile(record.cniScript, cniScript(m, record), { mode: 0o755 });
  await Deno.chmod(record.cniScript, 0o755);
  return record;
}

/** A shell script that runs the plugin for one pod on one node, as a container runtime would. */
function cniScript(m: Manifest, n: NodeRecord): string {
  const q = (s: string) => `'${s.replaceAll("'", `'"'"'`)}'`;
  return `#!/bin/sh
# Runs the knitter CNI plugin on node ${n.name} of the stack in ${m.dir}, as a runtime would.
#   ${n.cniScript} ADD|CHECK|DEL POD [IFNAME]
# The pod is the netns ${n.netns}-POD: ADD makes it if missing, DEL deletes it afterwards.
# CNI_ARGS from the environment is passed on (e.g. K8S_POD_NAMESPACE=acme;K8S_POD_NAME=web-0;
# K8S_POD_UID=...; without K8S_POD_NAMESPACE the agent uses the tenant "default").
set -eu
[ $# -ge 2 ] || { echo "usage: $0 ADD|CHECK|DEL POD [IFNAME]" >&2; exit 2; }
command=$1 pod=$2 ifname=\${3:-eth0}
netns=${q(n.netns)}-$pod
if [ "$command" = ADD ] && [ ! -e "/var/run/netns/$netns" ]; then
  ip netns add "$netns"
  ip -n "$netns" link set lo up
fi
set -- CNI_COMMAND="$command" CNI_CONTAINERID="$pod" CNI_NETNS="/var/run/netns/$netns" \\
  CNI_IFNAME="$ifname" CNI_PATH=${q(`${m.repo}/plugin/build:/usr/lib/cni`)} PATH="$PATH"
[ -n "\${CNI_ARGS:-}" ] && set -- "$@" CNI_ARGS="$CNI_ARGS"
code=0
ip netns exec ${q(n.netns)} env -i "$@" ${q(`${m.repo}/plugin/build/knitter`)} <${
    q(n.cniConfig)
  } || code=$?
if [ "$command" = DEL ] && [ -e "/var/run/netns/$netns" ]; then ip netns del "$netns"; fi
exit $code
`;
}

function howTo(m: Manifest, dirFlag: string): string {
  const n1 = m.nodes[0];
  const dirArg = dirFlag === DEFAULT_DIR ? "" : ` --dir ${dirFlag}`;
  const nodes = m.nodes.map((n) => {
    const agent = m.processes.find((p) => p.role === "agent" && p.netns === n.netns);
    return `  ${n.name}  netns ${n.netns}  underlay ${n.underlayIp}  agent pid ${
      agent?.pid ?? "?"
    }\n      socket ${n.agentSocket}\n      conflist ${n.cniConflist}`;
  });
  const physnets = m.physnets.length
    ? `\nPhysnets (VLAN IDs ${PHYSNET_VLANS.start}-${PHYSNET_VLANS.end} at the manager; bridge brpN on each node):\n` +
      m.physnets.map((p) => `  ${p.name}  segment: bridge ${p.bridge} in netns ${p.netns}`).join(
        "\n",
      ) + "\n"
    : "";
  const demo = m.demo
    ? `Tenant "${m.demo.tenant}" has the VXLAN network "${m.demo.network}" (${m.demo.cidr}); the CNI configs ask for it.`
    : `No network was made (--no-demo): create one, then name it in the nodes' CNI configs.`;
  return `Knitter stack up: a manager and ${m.nodes.length} node(s) in ${m.dir}

Manager  ${m.manager.url}   admin token ${m.manager.adminToken}
  export KNITTER_URL=${m.manager.url} KNITTER_TOKEN=${m.manager.adminToken}
  curl -s -H "Authorization: Bearer $KNITTER_TOKEN" $KNITTER_URL/api/v1/tenants/${
    m.demo?.tenant ?? "default"
  }/networks

Nodes:
${nodes.join("\n")}
${physnets}
${demo}
A pod on ${n1.name} (netns ${n1.netns}-pod1), through the real plugin:
  ${n1.cniScript} ADD pod1        # prints the CNI result
  ip netns exec ${n1.netns}-pod1 ip addr show eth0
  ${n1.cniScript} DEL pod1
The same by hand, as a runtime runs it (the plugin runs in the node's netns, config on stdin):
  ip netns add ${n1.netns}-pod2
  ip netns exec ${n1.netns} env CNI_COMMAND=ADD CNI_CONTAINERID=pod2 \\
    CNI_NETNS=/var/run/netns/${n1.netns}-pod2 CNI_IFNAME=eth0 CNI_PATH=${m.repo}/plugin/build \\
    ${m.repo}/plugin/build/knitter < ${n1.cniConfig}
Inside a node, and its OVS:
  ip netns exec ${n1.netns} ip -br link
  OVS_RUNDIR=${n1.ovs.rundir} ovs-ofctl -O OpenFlow13 dump-flows br-int
  ovs-vsctl --db=unix:${n1.ovs.dbSock} show
Logs: ${m.manager.log}, ${n1.agentLog}, ${n1.stateDir}/vswitchd.log (and the other nodes')
Manifest: ${m.dir}/${MANIFEST}

Down (stops every process, deletes every netns ${m.prefix}-*, including pods, and ${m.dir}):
  deno task stack down${dirArg}      # or: make stack-down${dirArg ? ` STACK_DIR=${dirFlag}` : ""}
`;
}

// -------------------------------------------------------------------------------------- down

async function down(flags: Flags): Promise<number> {
  const dir = absolute(flags.dir);
  const m = await readManifest(dir);
  if (!m) {
    log(flags, `no stack in ${dir} (no ${MANIFEST}): nothing to do`);
    return 0;
  }
  requireRoot();
  const problems: string[] = [];
  let stopped = 0;
  // 1. The recorded processes, each only if its command line is still the recorded one.
  for (const p of m.processes) {
    const now = await readCmdline(p.pid);
    if (!now || !(await pidAlive(p.pid))) continue;
    const same = p.cmdline.length ? sameArgs(now, p.cmdline) : now.some((a) => a.includes(m.dir));
    if (!same) {
      log(flags, `pid ${p.pid} (${p.role}) is now "${now.join(" ")}": left alone`);
      continue;
    }
    await stopPid(p.pid).then(
      () => stopped++,
      (e) => problems.push(`pid ${p.pid} (${p.role}): ${e}`),
    );
  }
  // 2. Every netns of the stack: the recorded ones and any other PREFIX-* (pods). Processes in them
  //    that belong to the stack (their command line names its dir) go first; others are named.
  const names = [...new Set([...m.netns, ...(await stackNetns(m.prefix))])];
  for (const name of names) {
    for (const pid of await netnsPids(name)) {
      const cmdline = await readCmdline(pid);
      if (!cmdline) continue;
      if (cmdline.some((a) => a.includes(m.dir))) {
        await stopPid(pid).then(
          () => stopped++,
          (e) => problems.push(`pid ${pid} in ${name}: ${e}`),
        );
      } else {
        problems.push(`pid ${pid} ("${cmdline.join(" ")}") still runs in netns ${name}: not ours`);
      }
    }
    const r = await run(["ip", "netns", "del", name], { check: false });
    if (r.code !== 0 && (await exists(`/var/run/netns/${name}`))) {
      problems.push(`netns ${name}: ${r.stderr}`);
    }
  }
  // 3. The directories (the manifest last, inside them).
  for (const d of m.dirs.toReversed()) {
    await Deno.remove(d, { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) problems.push(`${d}: ${e}`);
    });
  }
  const left = (await stackNetns(m.prefix)).length;
  if (left) problems.push(`${left} netns ${m.prefix}-* remain`);
  if (problems.length) {
    console.error(`stack: down finished with problems:\n  ${problems.join("\n  ")}`);
    return 1;
  }
  log(
    flags,
    `stack in ${m.dir} is down: ${stopped} processes stopped, ${names.length} netns and the directory removed`,
  );
  return 0;
}

// ------------------------------------------------------------------------------------ status

async function status(flags: Flags): Promise<number> {
  const dir = absolute(flags.dir);
  const m = await readManifest(dir);
  if (!m) {
    console.log(`no stack in ${dir}`);
    return 0;
  }
  const netns = new Set(await stackNetns(m.prefix));
  console.log(`stack in ${m.dir} (${m.status}, since ${m.createdAt}), netns ${m.prefix}-*`);
  console.log(`manager ${m.manager.url} (admin token ${m.manager.adminToken})`);
  for (const p of m.processes) {
    const now = await readCmdline(p.pid);
    const alive = now !== null && (await pidAlive(p.pid)) && sameArgs(now, p.cmdline);
    console.log(
      `  ${alive ? "running" : "GONE   "}  pid ${p.pid}  ${p.role}${
        p.netns ? ` in ${p.netns}` : ""
      }`,
    );
  }
  for (const name of m.netns) {
    console.log(`  ${netns.has(name) ? "present" : "GONE   "}  netns ${name}`);
  }
  const pods = [...netns].filter((n) => !m.netns.includes(n));
  if (pods.length) console.log(`  pods' netns: ${pods.join(", ")}`);
  return 0;
}

// ----------------------------------------------------------------------------------- helpers

function requireRoot(): void {
  if (Deno.uid() !== 0) throw new Error("the stack needs root (network namespaces, Open vSwitch)");
}

/** Relative to where the user ran `deno task` (INIT_CWD), not the project root it runs in. */
function absolute(dir: string): string {
  return dir.startsWith("/") ? dir : `${Deno.env.get("INIT_CWD") ?? Deno.cwd()}/${dir}`;
}

async function readManifest(dir: string): Promise<Manifest | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(`${dir}/${MANIFEST}`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  const m = JSON.parse(text) as Manifest;
  if (m.version !== 1 || !m.prefix || !m.dir) {
    throw new Error(`${dir}/${MANIFEST} is not a manifest`);
  }
  return m;
}

/** Written to a temporary file, then renamed: a reader never sees half a manifest. */
function writeManifestSync(dir: string, m: Manifest): void {
  const tmp = `${dir}/.${MANIFEST}.tmp`;
  Deno.writeTextFileSync(tmp, JSON.stringify(m, null, 2) + "\n");
  Deno.renameSync(tmp, `${dir}/${MANIFEST}`);
}

/** A netns prefix no existing netns uses: "ks-" + 4 hex digits. */
async function unusedPrefix(): Promise<string> {
  const taken = await netnsList();
  for (;;) {
    const prefix = `ks-${randomHex(4)}`;
    if (!taken.some((n) => n.startsWith(`${prefix}-`))) return prefix;
  }
}

async function netnsList(): Promise<string[]> {
  const r = await run(["ip", "netns", "list"], { check: false });
  // "name" or "name (id: 3)".
  return r.stdout.split("\n").map((l) => l.split(" ")[0]).filter((n) => n !== "");
}

async function stackNetns(prefix: string): Promise<string[]> {
  return (await netnsList()).filter((n) => n.startsWith(`${prefix}-`));
}

async function netnsPids(name: string): Promise<number[]> {
  const r = await run(["ip", "netns", "pids", name], { check: false });
  return r.stdout.split("\n").filter((l) => /^\d+$/.test(l.trim())).map(Number);
}

async function readCmdline(pid: number): Promise<string[] | null> {
  try {
    const raw = await Deno.readTextFile(`/proc/${pid}/cmdline`);
    return raw ? raw.replace(/\0$/, "").split("\0") : null;
  } catch {
    return null;
  }
}

function roleOf(cmdline: string[]): string {
  const joined = cmdline.join(" ");
  if (joined.includes("manager/main.ts")) return "manager";
  if (joined.includes("agent/main.ts")) return "agent";
  const bin = cmdline[0].split("/").pop() ?? "";
  if (bin === "ovsdb-server" || bin === "ovs-vswitchd") return bin;
  return `other (${bin})`;
}

function sameArgs(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function must(call: Promise<{ status: number; body: unknown }>): Promise<void> {
  const r = await call;
  if (r.status >= 300) throw new Error(`manager answered ${r.status}: ${JSON.stringify(r.body)}`);
}

function log(flags: Flags, msg: string): void {
  if (!flags.quiet) console.error(`stack: ${msg}`);
}

if (import.meta.main) {
  let code: number;
  try {
    const { command, flags } = parse(Deno.args);
    if (command === "help") {
      console.log(USAGE);
      code = 0;
    } else if (command === "up") code = await up(flags);
    else if (command === "down") code = await down(flags);
    else if (command === "status") code = await status(flags);
    else throw new UsageError(`unknown command "${command}"`);
  } catch (err) {
    const usage = err instanceof UsageError ||
      (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
    console.error(`stack: ${(err as Error).message}${usage ? `\n\n${USAGE}` : ""}`);
    code = usage ? 2 : 1;
  }
  Deno.exit(code);
}
