/**
 * The main job, `make demo`: brings up a manager and two simulated nodes with the stack launcher,
 * builds two tenants' networks (VXLAN overlays, a VLAN on a physnet, one CIDR in both tenants)
 * and pods through the real CNI plugin, then shows the networks, the pods and a connectivity
 * matrix measured with real traffic against what isolation promises. Exit 0 only when every
 * expectation held. The stack is left up to explore unless --down (or DEMO_DOWN=1) is given.
 *
 *   deno task demo [--dir .state/demo] [--down] [--json FILE]
 */
import { parseArgs } from "node:util";
import { ManagerClient, type Port, run } from "@knitter/common";
import type { Manifest, NodeRecord } from "./stack.ts";
import { type Cell, measure, tally } from "./demo_matrix.ts";
import {
  type DemoPod,
  type Endpoint,
  ifNameAt,
  NETWORKS,
  NODES,
  PHYSNET,
  PODS,
  ROUTERS,
  TENANTS,
} from "./demo_plan.ts";
import { checkPrerequisites } from "./demo_preflight.ts";
import {
  bold,
  dim,
  green,
  matrixGrid,
  mismatchLines,
  type Network,
  networksTable,
  podsTable,
  red,
} from "./demo_report.ts";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
const DEFAULT_DIR = ".state/demo";
const STEPS = 6;

const USAGE =
  `Usage: deno task demo [--dir DIR] [--down] [--json FILE]      (as root; or: make demo)

Brings up a manager and ${NODES.length} simulated nodes (netns + private Open vSwitch + agent) in DIR,
creates tenants, networks and pods through the API and the CNI plugin, and measures which pods
reach which with real traffic. Exits 0 only when every expectation held.

  --dir DIR     where the stack lives (default ${DEFAULT_DIR}); an earlier demo there is taken down
  --down        take the stack down at the end (also DEMO_DOWN=1); by default it stays up to explore
  --json FILE   also write the outcome (networks, pods, matrix, the stack's processes) as JSON
`;

interface Flags {
  dir: string;
  down: boolean;
  json?: string;
}

/** What the demo reports, also as JSON (tests/demo_test.ts reads it). */
export interface DemoSummary {
  ok: boolean;
  dir: string;
  /** Every netns of the stack is named PREFIX-... */
  prefix: string;
  down: boolean;
  processes: { role: string; pid: number; cmdline: string[] }[];
  networks: Network[];
  endpoints: Endpoint[];
  matrix: Cell[];
  mismatches: number;
}

class UsageError extends Error {}

function parse(args: string[]): Flags | "help" {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      dir: { type: "string", default: DEFAULT_DIR },
      down: { type: "boolean", default: false },
      json: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return "help";
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const env = Deno.env.get("DEMO_DOWN");
  return { dir: values.dir, down: values.down || env === "1" || env === "true", json: values.json };
}

function step(n: number, what: string): void {
  console.log(`\n${bold(`[${n}/${STEPS}]`)} ${what}`);
}

/** Relative to where the user ran `deno task`/`make` (INIT_CWD), as the stack launcher does. */
function absolute(dir: string): string {
  return dir.startsWith("/") ? dir : `${Deno.env.get("INIT_CWD") ?? Deno.cwd()}/${dir}`;
}

function stackTask(args: string[]) {
  return run([Deno.execPath(), "run", "--allow-all", `${ROOT}/scripts/stack.ts`, ...args], {
    check: false,
  });
}

async function readManifest(dir: string): Promise<Manifest | null> {
  try {
    return JSON.parse(await Deno.readTextFile(`${dir}/stack.json`));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

async function stackDown(dir: string): Promise<void> {
  const r = await stackTask(["down", "--dir", dir, "--quiet"]);
  if (r.code !== 0) throw new Error(`Cannot take the stack in ${dir} down: ${r.stderr}`);
}

async function stackUp(dir: string): Promise<Manifest> {
  if (await readManifest(dir)) {
    console.log(`  an earlier demo is recorded in ${dir}: taking it down first`);
    await stackDown(dir);
  }
  const r = await stackTask([
    "up",
    "--dir",
    dir,
    "--nodes",
    String(NODES.length),
    "--physnets",
    PHYSNET,
    "--no-demo",
    "--quiet",
  ]);
  if (r.code !== 0) throw new Error(`The stack launcher failed: ${r.stderr || r.stdout}`);
  const m = await readManifest(dir);
  if (!m || m.status !== "up") throw new Error(`The stack launcher left no manifest in ${dir}`);
  return m;
}

async function createNetworks(api: ManagerClient): Promise<void> {
  for (const name of TENANTS) {
    await api.request("POST", "/api/v1/tenants", { name });
    console.log(`  tenant ${name}`);
  }
  for (const n of NETWORKS) {
    const { tenant, role: _role, ...body } = n;
    const made = await api.request<Network>(
      "POST",
      `/api/v1/tenants/${tenant}/networks`,
      body,
    );
    const segment = made.type === "vlan" ? `VLAN ID ${made.segmentId}` : `VNI ${made.segmentId}`;
    console.log(`  network ${tenant}/${n.name}  ${n.type}  ${n.cidr}  ${segment}`);
  }
  for (const { tenant, name, networks, role } of ROUTERS) {
    await api.request("POST", `/api/v1/tenants/${tenant}/routers`, { name, networks });
    console.log(`  router ${tenant}/${name}  ${networks.join(" <-> ")}  ${role}`);
  }
}

/** Runs the node's cni script (the real plugin, as a runtime calls it); answers the endpoints. */
async function addPod(m: Manifest, pod: DemoPod): Promise<Endpoint[]> {
  const node = nodeOf(m, pod.node);
  const args = [
    `K8S_POD_NAMESPACE=${pod.tenant}`,
    `K8S_POD_NAME=${pod.name}`,
    `KNITTER_NETWORKS=${pod.networks.join(",")}`,
  ].join(";");
  const r = await run([node.cniScript, "ADD", pod.name], {
    env: { CNI_ARGS: args },
    check: false,
  });
  if (r.code !== 0) {
    throw new Error(`CNI ADD of pod ${pod.name} on ${pod.node} failed: ${r.stdout} ${r.stderr}`);
  }
  const result = JSON.parse(r.stdout);
  return pod.networks.map((network, i) => {
    const ifName = ifNameAt(i);
    const index = result.interfaces.findIndex((x: { name: string; sandbox?: string }) =>
      x.name === ifName && x.sandbox
    );
    const ip = result.ips.find((x: { interface: number }) => x.interface === index);
    if (!ip) throw new Error(`The CNI result of pod ${pod.name} has no address for ${ifName}`);
    return {
      pod: pod.name,
      node: pod.node,
      tenant: pod.tenant,
      network,
      ifName,
      address: ip.address.split("/")[0],
      netns: podNetns(node, pod.name),
    };
  });
}

function nodeOf(m: Manifest, name: string): NodeRecord {
  const node = m.nodes.find((n) => n.name === name);
  if (!node) throw new Error(`The stack has no node ${name}`);
  return node;
}

/** The cni script makes the pod's netns as NODE_NETNS-POD. */
function podNetns(node: NodeRecord, pod: string): string {
  return `${node.netns}-${pod}`;
}

async function listNetworks(api: ManagerClient): Promise<Network[]> {
  const out: Network[] = [];
  for (const t of TENANTS) {
    const r = await api.request<{ items: Network[] }>("GET", `/api/v1/tenants/${t}/networks`);
    out.push(...r.items.filter((n) => n.tenant === t));
  }
  return out;
}

async function listPorts(api: ManagerClient): Promise<Port[]> {
  return (await api.request<{ items: Port[] }>("GET", "/api/v1/ports")).items;
}

async function physnetUsage(api: ManagerClient): Promise<string> {
  const p = await api.request<{ usage: { used: number; total: number } }>(
    "GET",
    `/api/v1/physnets/${PHYSNET}`,
  );
  return `physnet ${PHYSNET}: VLAN IDs in use ${p.usage.used} of ${p.usage.total}`;
}

/** A file to source in a shell: knitctl on PATH, the stack for knitctl and curl, the netns prefix. */
async function writeEnvFile(m: Manifest): Promise<void> {
  await Deno.writeTextFile(
    `${m.dir}/env`,
    `# The demo's stack, for a shell: . ${m.dir}/env
export KNITCTL_STACK='${m.dir}'
# The manager, for curl: $KNITTER_URL/openapi.json, -H "Authorization: Bearer $KNITTER_TOKEN".
export KNITTER_URL='${m.manager.url}'
export KNITTER_TOKEN='${m.manager.adminToken}'
# Every netns of the demo starts with this: $STACK-n1 is node n1, $STACK-n1-edge the pod edge on it.
export STACK='${m.prefix}'
export PATH="${ROOT}/knitctl:$PATH"
`,
  );
}

/**
 * Commands to go on with, by what they show, for a stack in `dir`. The README shows the same
 * (tests/readme_test.ts runs them there).
 */
export function exploreCommands(dir: string): { why: string; commands: string[] }[] {
  return [
    {
      why: "knitctl pointed at this stack, the manager for curl, STACK: the prefix of its netns",
      commands: [
        `. ${dir}/env`,
        "knitctl -t tenant-a get networks -o wide",
        "knitctl -t tenant-a get ports --node n1",
        "knitctl usage physnets",
      ],
    },
    {
      why: "inside the pods: edge has two networks; b2 shares tenant-a's CIDR, not its network",
      commands: [
        "ip netns exec $STACK-n1-edge ip -br addr",
        "ip netns exec $STACK-n1-edge ping -c 2 10.20.0.3",
        `ip netns exec $STACK-n2-b2 ping -c 2 -W 1 10.10.0.3 || echo "no reply, as expected"`,
      ],
    },
    {
      why: "a third interface for edge, on the VLAN network; a new pod on n1, as kubelet adds one",
      commands: [
        "knitctl -t tenant-a attach --node n1 --pod tenant-a/edge --ifname net2 --network mgmt",
        `CNI_ARGS="K8S_POD_NAMESPACE=tenant-a;K8S_POD_NAME=p9;KNITTER_NETWORKS=data" ${dir}/n1/cni ADD p9`,
      ],
    },
    {
      why: "the OpenFlow rules and the agent's log (JSON lines) of node n1",
      commands: [
        `OVS_RUNDIR=${dir}/n1 ovs-ofctl -O OpenFlow13 dump-flows br-int`,
        `tail -n 3 ${dir}/n1/agent.log`,
      ],
    },
  ];
}

function exploreHints(dirFlag: string): string {
  const dir = dirFlag.replace(/\/$/, "");
  const groups = exploreCommands(dir).map(({ why, commands }) =>
    [dim(`  # ${why}`), ...commands.map((c) => `  ${c}`)].join("\n")
  );
  return `${bold("Explore")} (the stack stays up in ${dir}):
${groups.join("\n")}

${bold("Tear down")}:
  make stack-down STACK_DIR=${dir}      ${dim(`# or: deno task stack down --dir ${dir}`)}`;
}

async function demo(flags: Flags): Promise<number> {
  const dir = absolute(flags.dir);
  const started = performance.now();
  step(1, "Checking what the demo needs");
  await checkPrerequisites();
  console.log("  root, iproute2, Open vSwitch, ping, the WASM build: all there");

  step(2, `Starting a manager and ${NODES.length} simulated nodes, physnet ${PHYSNET}`);
  const m = await stackUp(dir);
  // ^C from here on takes the stack down (an earlier ^C leaves a manifest the next run clears).
  const onInterrupt = () => {
    interrupted = true;
    console.error(`\ndemo: interrupted; taking the stack in ${m.dir} down`);
    stopChildren()
      .then(() => stackDown(dir))
      .catch((e) => console.error(`demo: ${e.message}`))
      .finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onInterrupt);
  try {
    return await runDemo(m, flags, started);
  } finally {
    Deno.removeSignalListener("SIGINT", onInterrupt);
  }
}

/** Set on ^C once the stack is up. */
let interrupted = false;

/**
 * Ends the commands this process started and that still run (the pings of the matrix, a cni
 * script): a ^C from a terminal reaches them too, a SIGINT sent to this pid alone does not.
 */
async function stopChildren(): Promise<void> {
  const pids: number[] = [];
  for await (const task of Deno.readDir(`/proc/${Deno.pid}/task`)) {
    const text = await Deno.readTextFile(`/proc/${Deno.pid}/task/${task.name}/children`)
      .catch(() => "");
    pids.push(...text.split(" ").filter((p) => /^\d+$/.test(p)).map(Number));
  }
  for (const pid of pids) {
    try {
      Deno.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
}

/** Steps 3 to 6 on a stack that is up, and what is left of it at the end. */
async function runDemo(m: Manifest, flags: Flags, started: number): Promise<number> {
  const dir = m.dir;
  const summary: DemoSummary = {
    ok: false,
    dir: m.dir,
    prefix: m.prefix,
    down: flags.down,
    processes: m.processes.map(({ role, pid, cmdline }) => ({ role, pid, cmdline })),
    networks: [],
    endpoints: [],
    matrix: [],
    mismatches: 0,
  };
  try {
    await build(m, summary);
    step(6, "Connectivity, measured with ping, TCP and UDP between the pods");
    summary.matrix = await measureWithProgress(summary.endpoints);
  } catch (err) {
    // The interrupt handler takes the stack down and exits; its stopped children fail here.
    if (interrupted) return await new Promise<number>(() => {});
    // Half a demo proves nothing: take it all down and say what failed.
    console.error(red(`\ndemo: ${(err as Error).message}`));
    console.error(`demo: taking the stack down`);
    await stackDown(dir).catch((e) => console.error(`demo: ${e.message}`));
    return 1;
  }
  showMatrix(summary);

  if (flags.down) {
    console.log(`\nTaking the stack down (--down)`);
    await stackDown(dir);
    console.log(`  every process stopped, every netns ${m.prefix}-* and ${m.dir} removed`);
  } else {
    await writeEnvFile(m);
    console.log(`\n${exploreHints(flags.dir)}`);
  }
  if (flags.json) {
    await Deno.writeTextFile(absolute(flags.json), JSON.stringify(summary, null, 2) + "\n");
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    summary.ok
      ? green(`\ndemo: every expectation held (${seconds} s)`)
      : red(`\ndemo: ${summary.mismatches} expectation(s) did not hold (${seconds} s)`),
  );
  return summary.ok ? 0 : 1;
}

/** Steps 3 to 5: networks, pods, and what the manager says about them. */
async function build(m: Manifest, summary: DemoSummary): Promise<void> {
  const api = new ManagerClient(m.manager.url, m.manager.adminToken);
  try {
    console.log(`  manager ${m.manager.url}, netns ${m.prefix}-*, in ${m.dir}`);
    for (const n of m.nodes) {
      console.log(`  node ${n.name}: netns ${n.netns}, underlay ${n.underlayIp}, agent up`);
    }

    step(3, "Creating tenants, networks and a router through the manager's API");
    await createNetworks(api);

    step(4, `Starting ${PODS.length} pods through the CNI plugin`);
    for (const pod of PODS) {
      const eps = await addPod(m, pod);
      summary.endpoints.push(...eps);
      const ifs = eps.map((e) => `${e.ifName} ${e.address} (${e.network})`).join(", ");
      console.log(`  ${pod.name} on ${pod.node} (${pod.tenant}): ${ifs}`);
    }

    step(5, "Networks and pods, as the manager records them");
    summary.networks = await listNetworks(api);
    console.log(networksTable(summary.networks, NETWORKS));
    console.log(`  ${dim(await physnetUsage(api))}\n`);
    const netnsByPod = new Map(summary.endpoints.map((e) => [e.pod, e.netns]));
    const order = PODS.map((p) => p.name);
    console.log(podsTable(await listPorts(api), order, (pod) => netnsByPod.get(pod) ?? ""));
  } finally {
    api.close();
  }
}

async function measureWithProgress(endpoints: Endpoint[]): Promise<Cell[]> {
  const terminal = Deno.stdout.isTerminal();
  const encoder = new TextEncoder();
  let done = 0;
  const cells = await measure(endpoints, {
    onCell: () => {
      done++;
      if (terminal) Deno.stdout.writeSync(encoder.encode(`\r  ${done} pairs measured`));
    },
  });
  if (terminal) Deno.stdout.writeSync(encoder.encode("\r\x1b[K"));
  return cells;
}

function showMatrix(summary: DemoSummary): void {
  const t = tally(summary.matrix);
  summary.mismatches = t.mismatches.length;
  summary.ok = t.mismatches.length === 0;
  console.log(
    `  each row sends, from its interface, an ICMP echo, a TCP stream and a UDP datagram to every\n` +
      `  other pod's interface (columns), whose echo server sends them back`,
  );
  console.log(
    `  ${green("✓")} all three answered intact, ${dim("·")} none answered, ${
      red("✗")
    } not as expected\n`,
  );
  console.log(matrixGrid(summary.endpoints, summary.matrix));
  console.log("");
  for (const line of mismatchLines(summary.matrix)) console.log(red(`  ✗ ${line}`));
  const verdict = `${t.pairs} pairs: ${t.reachAsExpected} reached their own or a routed network, ` +
    `${t.isolatedAsExpected} isolated from other networks and tenants, ` +
    `${t.mismatches.length} not as expected`;
  console.log(summary.ok ? green(`  ${verdict}`) : red(`  ${verdict}`));
}

if (import.meta.main) {
  let code: number;
  try {
    const flags = parse(Deno.args);
    if (flags === "help") {
      console.log(USAGE);
      code = 0;
    } else code = await demo(flags);
  } catch (err) {
    const usage = err instanceof UsageError ||
      (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
    console.error(red(`demo: ${(err as Error).message}`) + (usage ? `\n\n${USAGE}` : ""));
    code = usage ? 2 : 1;
  }
  Deno.exit(code);
}
