/**
 * Convergence at scale (issue 32): the clusters benchmark's world (clusters_bench.ts: C clusters of
 * N registered nodes, ports made one at a time, alternately on a network every cluster may use and
 * on one of the port's own cluster) with 5,000 followers, which run in a few child processes of
 * their own (feed_followers.ts) so that their HTTP answers and JSON parsing do not share an event
 * loop with the process that times them. Each follower is a node with its own token, and follows
 * the feed as the agents do first: over a WebSocket (`--ws`, the default), behind the guard on the
 * manager's feed socket port (feed_listener.ts), with `--no-guard` on its API port. `--stream`
 * follows the NDJSON stream instead (what agents fall back to), `--poll` long-polls (as agents did
 * before the stream).
 *
 * Timed: from the PUT leaving to each node that needs the port having it in a feed page (one
 * delivery), and to the last of them (the port converged), each by the follower's own receipt
 * time; also, to compare with figures before 2026-11-29 08:10 UTC, to when this process had read
 * the last delivery's line from its follower process. Clocks: both sides read
 * performance.timeOrigin + performance.now(), the same wall clock on one machine. Memory: the
 * manager's VmRSS set up, with every follower's long poll waiting (the manager's in-flight gauge
 * counts them all), and its peak (VmHWM) at the end; per waiting follower the difference of the
 * first two over the followers.
 *
 *   deno run --allow-all manager/bench/convergence_bench.ts [--clusters 5] [--nodes 1000]
 *     [--ports 100] [--procs 2] [--no-guard] [--ws | --stream | --poll] [--semi-space MiB]
 *     [--cursor-over-api]
 *
 * A stream or socket follower starts without a cursor (the feed follows from now, its first page
 * carrying the cursor): one connection a follower. `--cursor-over-api` has each first ask its
 * cursor on an API connection of its own, as agents do with their listing: 5,000 connections
 * through the guard at once, whose memory the manager keeps after them.
 *
 * `--semi-space N` starts the manager with V8's young generation bounded (DENO_V8_FLAGS
 * --max-semi-space-size=N): V8 grows it to 16 MiB a semi-space under the load of thousands of
 * connections, and keeps what it grew.
 */
import { parseArgs } from "node:util";
import {
  type Manager,
  managerOf,
  memoryMiB,
  setUp,
  tokenOf,
  tokenTable,
  waitUp,
} from "./clusters_bench.ts";
import { linesOf } from "./lines.ts";
import { ADMIN_TOKEN, freePort, percentile, spawnManager, withTempDir } from "./support.ts";
import type { Transport } from "./feed_followers.ts";

export interface ConvergenceFigures {
  followers: number;
  guard: boolean;
  transport: Transport;
  semiSpaceMiB?: number;
  cursorOverApi: boolean;
  clusters: number;
  procs: number;
  ports: number;
  /** Per port: until every node that needs it has it (ms). */
  convergedP50Ms: number;
  convergedP99Ms: number;
  /** The same, to when this process had read the last delivery's line (what it measured before). */
  readP99Ms: number;
  /** Per delivery: one node getting one port (ms). */
  deliveryP50Ms: number;
  deliveryP99Ms: number;
  missing: number;
  leaked: number;
  rssSetUpMiB: number;
  rssWaitingMiB: number;
  rssPeakMiB: number;
  /** (waiting − set up) / followers. */
  perFollowerKiB: number;
  /** CPU time while the ports were made and delivered (s): the manager's, the followers'. */
  managerCpuS: number;
  followersCpuS: number;
  load: number[];
}

const WAIT_MS = 30_000;
const now = () => performance.timeOrigin + performance.now();

/** A child process of followers; `heard` is called for each port one of them hears of. */
interface FollowerProcess {
  pid: number;
  ready: Promise<void>;
  stop(): Promise<void>;
}

function startFollowers(
  url: string,
  tokens: string[],
  transport: Transport,
  cursorOverApi: boolean,
  offset: number,
  heard: (follower: number, id: string, at: number) => void,
): FollowerProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", new URL("./feed_followers.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  writer.write(
    new TextEncoder().encode(JSON.stringify({ url, tokens, transport, cursorOverApi }) + "\n"),
  );
  let isReady!: () => void;
  const ready = new Promise<void>((r) => isReady = r);
  const reading = (async () => {
    for await (const line of linesOf(child.stdout)) {
      if (line === "ready") isReady();
      const [word, i, id, at] = line.split(" ");
      if (word === "heard") heard(offset + Number(i), id, Number(at));
    }
  })();
  return {
    pid: child.pid,
    ready: Promise.race([
      ready,
      child.status.then((s) => {
        throw new Error(`feed followers exited (${s.code}) before they were ready`);
      }),
    ]),
    async stop() {
      await writer.close();
      await child.status;
      await reading;
    },
  };
}

/** User and system CPU time a process has used (s; clock ticks of 1/100 s, as Linux counts them). */
function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Waits until the manager counts `n` node requests in progress: every long poll is waiting. */
async function allWaiting(m: Manager, n: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${m.url}/metrics`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const text = await r.text();
    const got = Number(text.match(/in_flight_requests\{principal="node"\} (\d+)/)?.[1] ?? 0);
    if (got >= n) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the manager never had ${n} long polls waiting`);
}

export async function convergenceFigures(
  opts: {
    clusters: number;
    nodes: number;
    ports: number;
    procs: number;
    guard: boolean;
    /** How the followers follow the feed; default: over WebSockets, as the agents do first. */
    transport?: Transport;
    /** The manager's V8 young generation, bounded (MiB a semi-space); default: V8's own. */
    semiSpaceMiB?: number;
    /** Followers ask their first cursor on the API, not on their stream or socket. */
    cursorOverApi?: boolean;
  },
): Promise<ConvergenceFigures> {
  const { clusters, nodes, ports, procs, guard } = opts;
  const transport = opts.transport ?? "ws";
  const followers = clusters * nodes;
  return await withTempDir(async (dir) => {
    // One address opens every follower's connection: its budget of new ones is lifted.
    const spawned = await withV8Flags(
      opts.semiSpaceMiB ? [`--max-semi-space-size=${opts.semiSpaceMiB}`] : [],
      () =>
        spawnManager(dir, `${dir}/manager.kv`, {
          tokens: tokenTable(clusters, nodes),
          // Without the connection guard (conn_guard.ts), requests go straight to Deno.serve.
          limits: guard ? { connectionsPerSecond: 0 } : { headerTimeoutMs: 0 },
          // Behind the guard, sockets live on the feed's socket port (feed_listener.ts).
          ...(transport === "ws" && guard ? { listen: { feedSocketPort: freePort() } } : {}),
        }),
    );
    const children: FollowerProcess[] = [];
    try {
      const m = managerOf(spawned.url);
      await waitUp(m);
      await setUp(m, clusters, nodes);
      const pid = spawned.child.pid;
      const rssSetUpMiB = memoryMiB(pid, "VmRSS");

      const clusterOf = (f: number) => Math.floor(f / nodes);
      const pending = new Map<
        string,
        { need: Set<number>; t0: number; last: number; done: () => void }
      >();
      const one: number[] = [];
      let leaked = 0;
      const heard = (f: number, id: string, at: number) => {
        const p = pending.get(id);
        if (!p) return;
        if (!p.need.delete(f)) {
          leaked++;
          return;
        }
        one.push(at - p.t0);
        p.last = Math.max(p.last, at);
        if (p.need.size === 0) p.done();
      };
      const tokens = Array.from({ length: followers }, (_, f) => tokenOf(clusterOf(f), f % nodes));
      const share = Math.ceil(followers / procs);
      for (let at = 0; at < followers; at += share) {
        children.push(startFollowers(
          m.url,
          tokens.slice(at, at + share),
          transport,
          opts.cursorOverApi ?? false,
          at,
          heard,
        ));
      }
      await Promise.all(children.map((c) => c.ready));
      await allWaiting(m, followers);
      const rssWaitingMiB = memoryMiB(pid, "VmRSS");

      const cpuOf = () => ({
        manager: cpuSeconds(pid),
        followers: children.reduce((sum, c) => sum + cpuSeconds(c.pid), 0),
      });
      const cpuBefore = cpuOf();
      const converged: number[] = [];
      const read: number[] = [];
      let missing = 0;
      for (let k = 0; k < ports; k++) {
        const c = k % clusters;
        const node = (k * 7) % nodes;
        const wide = k % 2 === 0;
        const id = `cp-${k}`;
        const need = new Set<number>();
        for (let f = 0; f < followers; f++) if (wide || clusterOf(f) === c) need.add(f);
        let done!: () => void;
        const arrived = new Promise<void>((r) => done = r);
        const t0 = now();
        const entry = { need, t0, last: t0, done };
        pending.set(id, entry);
        const path = wide ? `tenants/shared/networks/wide` : `tenants/t${c}/networks/local`;
        await m.call("PUT", `${path}/ports/${id}`, tokenOf(c, node), { node: `n${node}` });
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), WAIT_MS));
        if ((await Promise.race([arrived, late])) === "late") missing += need.size;
        else {
          // The last node's own receipt, not this process's reading of its line (pipes and
          // parsing of 300,000 lines that no cluster has).
          converged.push(entry.last - t0);
          read.push(now() - t0);
        }
        clearTimeout(timer);
        // Late deliveries of this port must still count as leaks if they go to the wrong node.
        await new Promise((r) => setTimeout(r, 20));
      }
      const rssPeakMiB = memoryMiB(pid, "VmHWM");
      const cpuAfter = cpuOf();
      converged.sort((a, b) => a - b);
      read.sort((a, b) => a - b);
      one.sort((a, b) => a - b);
      return {
        followers,
        guard,
        transport,
        semiSpaceMiB: opts.semiSpaceMiB,
        cursorOverApi: opts.cursorOverApi ?? false,
        clusters,
        procs: children.length,
        ports,
        convergedP50Ms: percentile(converged, 50),
        convergedP99Ms: percentile(converged, 99),
        readP99Ms: percentile(read, 99),
        deliveryP50Ms: percentile(one, 50),
        deliveryP99Ms: percentile(one, 99),
        missing,
        leaked,
        rssSetUpMiB,
        rssWaitingMiB,
        rssPeakMiB,
        perFollowerKiB: (rssWaitingMiB - rssSetUpMiB) * 1024 / followers,
        managerCpuS: cpuAfter.manager - cpuBefore.manager,
        followersCpuS: cpuAfter.followers - cpuBefore.followers,
        load: Deno.loadavg(),
      };
    } finally {
      await Promise.all(children.map((c) => c.stop()));
      await spawned.stop();
    }
  });
}

const TRANSPORT_NAMES: Record<Transport, string> = {
  poll: "long polls",
  stream: "streams",
  ws: "WebSockets",
};

/** The transport the flags name (at most one of --ws, --stream, --poll); WebSockets by default. */
function transportOf(flags: Record<Transport, boolean>): Transport {
  const named = (Object.keys(TRANSPORT_NAMES) as Transport[]).filter((t) => flags[t]);
  if (named.length > 1) {
    throw new Error(`name one transport, not ${named.map((t) => `--${t}`).join(" and ")}`);
  }
  return named[0] ?? "ws";
}

/** Runs `start` (which spawns a process) with DENO_V8_FLAGS set to `flags`, for that process only. */
async function withV8Flags<T>(flags: string[], start: () => Promise<T>): Promise<T> {
  if (flags.length === 0) return await start();
  const before = Deno.env.get("DENO_V8_FLAGS");
  Deno.env.set("DENO_V8_FLAGS", flags.join(","));
  try {
    return await start();
  } finally {
    if (before === undefined) Deno.env.delete("DENO_V8_FLAGS");
    else Deno.env.set("DENO_V8_FLAGS", before);
  }
}

/** About 2,500 followers a process, at least one. */
export function followerProcesses(followers: number): number {
  return Math.max(1, Math.ceil(followers / 2500));
}

export function convergenceTable(runs: ConvergenceFigures[]): string {
  const ms = (x: number) => x.toFixed(1);
  const mib = (x: number) => x.toFixed(0);
  const row = (what: string, cell: (f: ConvergenceFigures) => string) =>
    `| ${what} | ${runs.map(cell).join(" | ")} |`;
  return [
    row(
      "followers (clusters × nodes, follower processes)",
      (f) =>
        `${f.followers} (${f.clusters} × ${f.followers / f.clusters}, ${f.procs})${
          f.guard ? "" : ", no connection guard"
        }, ${TRANSPORT_NAMES[f.transport]}${
          f.semiSpaceMiB ? `, manager's semi-space ${f.semiSpaceMiB} MiB` : ""
        }${f.cursorOverApi ? ", first cursor over the API" : ""}`,
    ),
    `|---|${runs.map(() => "---").join("|")}|`,
    row("ports, one at a time, half every cluster's, half one cluster's", (f) => `${f.ports}`),
    row(
      "port made → every node that needs it has it: p50 / p99",
      (f) => `**${ms(f.convergedP50Ms)} / ${ms(f.convergedP99Ms)} ms**`,
    ),
    row(
      "the same, to this process reading the last one's line: p99",
      (f) => `${ms(f.readP99Ms)} ms`,
    ),
    row(
      "port made → one node has it: p50 / p99",
      (f) => `${ms(f.deliveryP50Ms)} / ${ms(f.deliveryP99Ms)} ms`,
    ),
    row(
      `deliveries missing after ${WAIT_MS / 1000} s / to a cluster that may not see it`,
      (f) => `${f.missing} / ${f.leaked}`,
    ),
    row(
      "manager VmRSS: set up / all followers waiting / peak (VmHWM)",
      (f) => `${mib(f.rssSetUpMiB)} / ${mib(f.rssWaitingMiB)} / ${mib(f.rssPeakMiB)} MiB`,
    ),
    row("per waiting follower", (f) => `**${f.perFollowerKiB.toFixed(1)} KiB**`),
    row(
      "CPU while the ports went out: manager / follower processes",
      (f) => `${f.managerCpuS.toFixed(1)} / ${f.followersCpuS.toFixed(1)} s`,
    ),
    row(
      "machine load (1, 5, 15 min) at the end",
      (f) => f.load.map((x) => x.toFixed(2)).join(", "),
    ),
  ].join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      clusters: { type: "string", default: "5" },
      nodes: { type: "string", multiple: true },
      ports: { type: "string", default: "100" },
      procs: { type: "string" },
      "no-guard": { type: "boolean", default: false },
      ws: { type: "boolean", default: false },
      stream: { type: "boolean", default: false },
      poll: { type: "boolean", default: false },
      "semi-space": { type: "string" },
      "cursor-over-api": { type: "boolean", default: false },
    },
  });
  const transport = transportOf(values);
  const runs: ConvergenceFigures[] = [];
  for (const nodes of (values.nodes ?? ["1000", "200"]).map(Number)) {
    const clusters = Number(values.clusters);
    const procs = Number(values.procs ?? followerProcesses(clusters * nodes));
    console.error(`convergence: ${clusters} × ${nodes} followers in ${procs} processes`);
    runs.push(
      await convergenceFigures({
        clusters,
        nodes,
        ports: Number(values.ports),
        procs,
        guard: !values["no-guard"],
        transport,
        semiSpaceMiB: values["semi-space"] ? Number(values["semi-space"]) : undefined,
        cursorOverApi: values["cursor-over-api"],
      }),
    );
  }
  console.log(convergenceTable(runs));
}
