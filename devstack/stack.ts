/**
 * A local Knitter stack on one machine: a manager process, and N simulated nodes (a netns each, with
 * a private Open vSwitch and an agent process), joined by an underlay and optionally by physnet
 * segments. Everything is registered with a Cleanup, so a failing test leaves nothing behind.
 */
import { sweepStaleOnce } from "./stale.ts";
import { run } from "@knitter/common";
import { type Cleanup, stopPid } from "./cleanup.ts";
import {
  createUnderlay,
  joinUnderlay,
  type SimNode,
  startSimNode,
  type Underlay,
} from "./sim_node.ts";

const ROOT = new URL("../", import.meta.url).pathname;

export interface StackOptions {
  cleanup: Cleanup;
  /** Node names, [a-z0-9] up to 12 characters. */
  nodes: string[];
  /** Physical networks every node is attached to (an L2 segment each, VLAN-transparent). */
  physnets?: string[];
  logLevel?: "debug" | "info" | "warn" | "error";
  /**
   * The stack's directory (made if missing, removed at cleanup), each node's state in `DIR/NODE`;
   * default: a new temporary directory.
   */
  dir?: string;
  /**
   * Daemons in a session of their own, writing straight to their log files: they outlive this
   * process (the stack launcher, scripts/stack.ts). Default: children whose output this process
   * copies to the logs.
   */
  detached?: boolean;
  /** More agent configuration (agent/config.ts keys), over the stack's own, on every node. */
  agent?: Record<string, unknown>;
  /** More manager configuration (manager/config.ts keys), over the stack's own. */
  manager?: Record<string, unknown>;
  /**
   * Clusters of the one manager (manager/service/clusters.ts), registered before the agents
   * start: their nodes' tokens name the cluster, and each gets a monitor token. Nodes in none are
   * the default cluster's.
   */
  clusters?: StackCluster[];
  /** More manager tokens (manager/auth.ts TokenConfig), besides the admin's and the nodes'. */
  tokens?: { token: string; scope: string; tenant?: string }[];
}

export interface StackCluster {
  name: string;
  /** Its nodes, of `nodes`. */
  nodes: string[];
  tenants?: string[];
  networks?: string[];
  physnets?: string[];
}

export interface StackNode {
  name: string;
  sim: SimNode;
  /** The agent's socket, which the plugin talks to. */
  agentSocket: string;
  /** The agent's state directory (its Deno KV: the journal of attachments). */
  agentStateDir: string;
  agentPid: number;
  /** The agent's configuration file (JSON); a test may change it before startAgent(). */
  agentConfig: string;
  /** Stops the agent only (SIGKILL when `hard`), leaving OVS and the pods as they are. */
  stopAgent(hard?: boolean): Promise<void>;
  startAgent(): Promise<void>;
}

/** A physnet's L2 segment: a Linux bridge in its own netns, one port per node. */
export interface PhysnetSegment {
  netns: string;
  bridge: string;
  /** The segment's port towards each node, by node name (capture there to see the wire). */
  ports: Record<string, string>;
}

export interface Stack {
  dir: string;
  managerUrl: string;
  adminToken: string;
  nodes: StackNode[];
  physnets: Record<string, PhysnetSegment>;
  /** A monitor token of each of the stack's clusters, by cluster name. */
  monitorTokens: Record<string, string>;
  /** Calls the manager's API with the admin token. */
  // deno-lint-ignore no-explicit-any
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  stopManager(): Promise<void>;
  startManager(): Promise<void>;
  /** The process id of the manager last started (to stall it with SIGSTOP, say). */
  managerPid(): number;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  await sweepStaleOnce();
  const { cleanup } = opts;
  let dir: string;
  if (opts.dir) {
    await Deno.mkdir(opts.dir, { recursive: true });
    dir = await Deno.realPath(opts.dir);
    cleanup.dir(dir);
  } else {
    dir = await cleanup.tempDir();
  }
  const detached = opts.detached ?? false;
  const adminToken = `admin-${crypto.randomUUID()}`;
  const nodeTokens = new Map(opts.nodes.map((n) => [n, `node-${n}-${crypto.randomUUID()}`]));
  const clusterOf = new Map(
    (opts.clusters ?? []).flatMap((c) => c.nodes.map((n) => [n, c.name] as const)),
  );
  const monitorTokens = Object.fromEntries(
    (opts.clusters ?? []).map((c) => [c.name, `monitor-${c.name}-${crypto.randomUUID()}`]),
  );
  const port = freePort();
  const managerUrl = `http://127.0.0.1:${port}`;
  const managerSocket = `${dir}/manager.sock`;
  const managerConfig = `${dir}/manager.json`;
  await Deno.writeTextFile(
    managerConfig,
    JSON.stringify({
      listen: { hostname: "127.0.0.1", port, socket: managerSocket },
      store: { path: `${dir}/manager.kv` },
      tokens: [
        { token: adminToken, scope: "admin" },
        ...[...nodeTokens].map(([node, token]) => ({
          token,
          scope: "node",
          node,
          ...(clusterOf.has(node) ? { cluster: clusterOf.get(node) } : {}),
        })),
        ...Object.entries(monitorTokens).map(([cluster, token]) => ({
          token,
          scope: "monitor",
          cluster,
        })),
        ...opts.tokens ?? [],
      ],
      vniRanges: ["5000-5999"],
      logLevel: opts.logLevel ?? "warn",
      ...opts.manager,
    }),
  );
  let managerPid = 0;
  const startManager = async () => {
    managerPid = spawn(
      ["manager/main.ts", "--config", managerConfig],
      `${dir}/manager.log`,
      undefined,
      detached,
    );
    cleanup.pid(managerPid);
    await waitFor(`manager at ${managerUrl}`, () => ok(`${managerUrl}/readyz`), 20_000);
  };
  await startManager();
  const api: Stack["api"] = async (method, path, body) => {
    const r = await fetch(`${managerUrl}/api/v1/${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : null };
  };
  for (const { nodes: _nodes, ...cluster } of opts.clusters ?? []) {
    const r = await api("POST", "clusters", cluster);
    if (r.status !== 201) throw new Error(`cluster ${cluster.name}: ${JSON.stringify(r.body)}`);
  }

  const underlay = await createUnderlay(cleanup, { name: "ul" });
  const segments = new Map<string, Underlay>();
  const physnets: Record<string, PhysnetSegment> = {};
  for (const p of opts.physnets ?? []) {
    const seg = await createUnderlay(cleanup, { name: `pn${segments.size}` });
    segments.set(p, seg);
    physnets[p] = { netns: seg.netns, bridge: seg.bridge, ports: {} };
  }

  const nodes: StackNode[] = [];
  for (const [i, name] of opts.nodes.entries()) {
    let stateDir: string | undefined;
    if (opts.dir) {
      stateDir = `${dir}/${name}`;
      await Deno.mkdir(stateDir, { recursive: true });
    }
    const sim = await startSimNode({ name, cleanup, stateDir });
    await joinUnderlay(sim, underlay, `192.0.2.${i + 1}`);
    const mappings = [];
    for (const [j, [physnet, seg]] of [...segments].entries()) {
      const uplink = `up${j}`;
      await run(["ip", "-n", seg.netns, "-batch", "-"], {
        stdin: `link add ${name}-p${j} type veth peer name ${uplink} netns ${sim.netnsPath}\n` +
          `link set ${name}-p${j} master ${seg.bridge} up\n`,
      });
      await run(["ip", "-n", sim.netns, "link", "set", uplink, "up"]);
      physnets[physnet].ports[name] = `${name}-p${j}`;
      mappings.push({ physnet, bridge: `brp${j}`, uplink });
    }
    const nodeDir = `${sim.stateDir}/agent`;
    const agentSocket = `${nodeDir}/run/agent.sock`;
    const agentConfig = `${sim.stateDir}/agent.json`;
    const agentStateDir = `${nodeDir}/state`;
    await Deno.writeTextFile(
      agentConfig,
      JSON.stringify({
        nodeName: name,
        ...(clusterOf.has(name) ? { cluster: clusterOf.get(name) } : {}),
        manager: { url: managerUrl, socket: managerSocket, token: nodeTokens.get(name) },
        socket: agentSocket,
        stateDir: agentStateDir,
        underlayIp: sim.underlayIp,
        ovs: sim.ovs,
        datapathType: "netdev",
        bridgeMappings: mappings,
        logLevel: opts.logLevel ?? "warn",
        ...opts.agent,
      }),
    );
    const node: StackNode = {
      name,
      sim,
      agentSocket,
      agentStateDir,
      agentConfig,
      agentPid: 0,
      async startAgent() {
        node.agentPid = spawn(
          ["agent/main.ts", "--config", agentConfig],
          `${nodeDir}.log`,
          sim.netns,
          detached,
        );
        cleanup.pid(node.agentPid);
        await waitFor(`agent of ${name}`, () => agentReady(agentSocket), 20_000);
      },
      async stopAgent(hard = false) {
        if (hard) {
          try {
            Deno.kill(node.agentPid, "SIGKILL");
          } catch { /* already gone */ }
        }
        await stopPid(node.agentPid);
      },
    };
    await node.startAgent();
    nodes.push(node);
  }

  return {
    dir,
    managerUrl,
    adminToken,
    nodes,
    physnets,
    monitorTokens,
    api,
    stopManager: () => stopPid(managerPid),
    startManager,
    managerPid: () => managerPid,
  };
}

/** Starts a deno program of this repository (inside `netns` if given), output to `log`. */
function spawn(args: string[], log: string, netns?: string, detached = false): number {
  const deno = ["run", "--allow-all", ...args];
  const cmd = netns
    ? ["ip", "netns", "exec", netns, Deno.execPath(), ...deno]
    : [Deno.execPath(), ...deno];
  if (detached) {
    // sh points the output at the log, then execs the daemon: the same pid, in a new session, with
    // no pipe back to this process.
    const child = new Deno.Command("sh", {
      args: ["-c", 'exec "$@" >>"$0" 2>&1', log, ...cmd],
      cwd: ROOT,
      detached: true,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    child.unref();
    return child.pid;
  }
  const out = Deno.openSync(log, { create: true, append: true });
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    cwd: ROOT,
    stdout: out.writable ? "piped" : "null",
    stderr: "piped",
  }).spawn();
  pipeTo(child.stdout, out);
  pipeTo(child.stderr, out);
  return child.pid;
}

function pipeTo(stream: ReadableStream<Uint8Array>, file: Deno.FsFile): void {
  (async () => {
    for await (const chunk of stream) await file.write(chunk);
  })().catch(() => {});
}

async function ok(url: string): Promise<boolean> {
  try {
    const r = await fetch(url);
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

/** Whether the agent on `socket` answers that it is ready. */
export async function agentReady(socket: string): Promise<boolean> {
  let client: Deno.HttpClient | undefined;
  try {
    client = Deno.createHttpClient({ proxy: { transport: "unix", path: socket } });
    const r = await fetch("http://agent/readyz", { client });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  } finally {
    client?.close();
  }
}

/** Polls `probe` until it holds; fails with `what` after `ms`. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean>,
  ms: number,
): Promise<void> {
  const deadline = performance.now() + ms;
  let delay = 5;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`${what} not ready after ${ms} ms`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 200);
  }
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}
