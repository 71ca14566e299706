/**
 * One manager, many clusters (issue 18): a manager process with C clusters of N nodes each, every
 * node a light feed follower in this process (its own node token, a long poll of GET /api/v1/feed,
 * as the agent's RemoteView does; no Open vSwitch). Ports are made one at a time, each by a node of
 * one cluster, alternately on a network every cluster may use and on one only its own cluster may
 * use. What is timed: from the PUT leaving to the last node that needs the port having it in its
 * feed; the nodes of other clusters must not get a port of a network their cluster may not use.
 * Also the manager's resident memory (VmRSS, and VmHWM at the end).
 *
 *   deno run --allow-all manager/bench/clusters_bench.ts [--clusters C] [--nodes N] [--ports P]
 */
import { parseArgs } from "node:util";
import { ADMIN_TOKEN, percentile, spawnManager, withTempDir } from "./support.ts";

export interface ClusterFeedFigures {
  clusters: number;
  nodesPerCluster: number;
  ports: number;
  /** Per port: until every node that needs it has it (ms); all ports, then by network. */
  allP50Ms: number;
  allP99Ms: number;
  /** Ports of the network of every cluster (every node needs them). */
  wideP50Ms: number;
  wideP99Ms: number;
  /** Ports of a network of one cluster (its nodes need them). */
  localP50Ms: number;
  localP99Ms: number;
  /** Per delivery: one node getting one port (ms). */
  oneP50Ms: number;
  oneP99Ms: number;
  /** Deliveries that never came within the wait, and deliveries to nodes that must not see it. */
  missing: number;
  leaked: number;
  /** Manager resident memory, MiB: started and set up; with every follower polling; peak. */
  rssIdleMiB: number;
  rssFollowedMiB: number;
  rssPeakMiB: number;
  load: number[];
}

const WAIT_MS = 30_000;

export interface Manager {
  url: string;
  call(method: string, path: string, token?: string, body?: unknown): Promise<unknown>;
}

/** A node following the feed: reports each port it hears of, by the port's bare ID. */
class Follower {
  private readonly stop = new AbortController();

  constructor(
    private readonly manager: Manager,
    readonly token: string,
    readonly cluster: number,
    private readonly heard: (id: string, at: number, f: Follower) => void,
  ) {}

  async start(): Promise<() => Promise<void>> {
    const first = await this.manager.call("GET", "feed", this.token) as { cursor: string };
    const done = this.follow(first.cursor);
    return async () => {
      this.stop.abort();
      await done;
    };
  }

  private async follow(cursor: string): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        const r = await fetch(`${this.manager.url}/api/v1/feed?after=${cursor}&timeout=25`, {
          headers: { authorization: `Bearer ${this.token}` },
          signal: this.stop.signal,
        });
        const page = await r.json();
        if (!r.ok) throw new Error(`feed: ${r.status} ${JSON.stringify(page)}`);
        const at = performance.now();
        cursor = page.cursor;
        for (const e of page.events) {
          if (e.type === "port" && e.op === "put") this.heard(e.port.id.split("@")[0], at, this);
        }
      } catch (err) {
        if (this.stop.signal.aborted) return;
        throw err;
      }
    }
  }
}

export function managerOf(url: string): Manager {
  return {
    url,
    async call(method, path, token = ADMIN_TOKEN, body) {
      const r = await fetch(`${url}/api/v1/${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : null;
    },
  };
}

export function memoryMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = Number(status.match(new RegExp(`${field}:\\s+(\\d+)`))?.[1]);
  return kb / 1024;
}

export const tokenOf = (c: number, i: number) => `bench-node-c${c}-n${i}-0123456789abcdef`;

/** The admin's token and one node token per node of each cluster, for the manager's config. */
export function tokenTable(clusters: number, nodes: number): Record<string, string>[] {
  const tokens: Record<string, string>[] = [{ token: ADMIN_TOKEN, scope: "admin" }];
  for (let c = 0; c < clusters; c++) {
    for (let i = 0; i < nodes; i++) {
      tokens.push({ token: tokenOf(c, i), scope: "node", node: `n${i}`, cluster: `c${c}` });
    }
  }
  return tokens;
}

/** Clusters c0..c(C-1), each allowed tenant "shared" (network "wide") and its own tenant t{c}. */
export async function setUp(m: Manager, clusters: number, nodes: number): Promise<void> {
  await m.call("POST", "tenants", ADMIN_TOKEN, { name: "shared" });
  await m.call("POST", "tenants/shared/networks", ADMIN_TOKEN, {
    name: "wide",
    cidr: "10.0.0.0/12",
  });
  for (let c = 0; c < clusters; c++) {
    await m.call("POST", "tenants", ADMIN_TOKEN, { name: `t${c}` });
    await m.call("POST", `tenants/t${c}/networks`, ADMIN_TOKEN, {
      name: "local",
      cidr: `10.${16 + c}.0.0/16`,
    });
    await m.call("POST", "clusters", ADMIN_TOKEN, { name: `c${c}`, tenants: ["shared", `t${c}`] });
    for (let i = 0; i < nodes; i++) {
      await m.call("PUT", `nodes/n${i}`, tokenOf(c, i), {
        underlayIp: `10.${200 + c}.${Math.floor(i / 250)}.${i % 250 + 1}`,
      });
    }
  }
}

export async function clusterFeedFigures(
  opts: { clusters: number; nodes: number; ports: number },
): Promise<ClusterFeedFigures> {
  const { clusters, nodes, ports } = opts;
  return await withTempDir(async (dir) => {
    const spawned = await spawnManager(dir, `${dir}/manager.kv`, {
      tokens: tokenTable(clusters, nodes),
    });
    try {
      const m = managerOf(spawned.url);
      await waitUp(m);
      await setUp(m, clusters, nodes);
      const pid = spawned.child.pid;
      const rssIdleMiB = memoryMiB(pid, "VmRSS");

      // Who needs which port: every node for "wide", the port's own cluster for "local".
      const pending = new Map<string, { need: Set<Follower>; t0: number; done: () => void }>();
      const one: number[] = [];
      let leaked = 0;
      const heard = (id: string, at: number, f: Follower) => {
        const p = pending.get(id);
        if (!p) return;
        if (!p.need.delete(f)) {
          leaked++;
          return;
        }
        one.push(at - p.t0);
        if (p.need.size === 0) p.done();
      };
      const followers: Follower[] = [];
      for (let c = 0; c < clusters; c++) {
        for (let i = 0; i < nodes; i++) followers.push(new Follower(m, tokenOf(c, i), c, heard));
      }
      const stops = await Promise.all(followers.map((f) => f.start()));
      // Every follower's first long poll is in before the first port.
      await new Promise((r) => setTimeout(r, 1000));
      const rssFollowedMiB = memoryMiB(pid, "VmRSS");

      const byKind = { wide: [] as number[], local: [] as number[] };
      let missing = 0;
      for (let k = 0; k < ports; k++) {
        const c = k % clusters;
        const node = (k * 7) % nodes;
        const wide = k % 2 === 0;
        const id = `bp-${k}`;
        const need = new Set(followers.filter((f) => wide || f.cluster === c));
        let done!: () => void;
        const arrived = new Promise<void>((r) => done = r);
        const t0 = performance.now();
        pending.set(id, { need, t0, done });
        const path = wide ? `tenants/shared/networks/wide` : `tenants/t${c}/networks/local`;
        await m.call("PUT", `${path}/ports/${id}`, tokenOf(c, node), { node: `n${node}` });
        const timer = new Promise<"late">((r) => setTimeout(() => r("late"), WAIT_MS));
        if ((await Promise.race([arrived, timer])) === "late") missing += need.size;
        else byKind[wide ? "wide" : "local"].push(performance.now() - t0);
        // Late deliveries of this port must still count as leaks if they go to the wrong node.
        await new Promise((r) => setTimeout(r, 20));
      }
      const rssPeakMiB = memoryMiB(pid, "VmHWM");
      await Promise.all(stops.map((s) => s()));
      const all = [...byKind.wide, ...byKind.local].sort((a, b) => a - b);
      byKind.wide.sort((a, b) => a - b);
      byKind.local.sort((a, b) => a - b);
      one.sort((a, b) => a - b);
      return {
        clusters,
        nodesPerCluster: nodes,
        ports,
        allP50Ms: percentile(all, 50),
        allP99Ms: percentile(all, 99),
        wideP50Ms: percentile(byKind.wide, 50),
        wideP99Ms: percentile(byKind.wide, 99),
        localP50Ms: percentile(byKind.local, 50),
        localP99Ms: percentile(byKind.local, 99),
        oneP50Ms: percentile(one, 50),
        oneP99Ms: percentile(one, 99),
        missing,
        leaked,
        rssIdleMiB,
        rssFollowedMiB,
        rssPeakMiB,
        load: Deno.loadavg(),
      };
    } finally {
      await spawned.stop();
    }
  });
}

export async function waitUp(m: Manager): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    try {
      const r = await fetch(`${m.url}/readyz`);
      await r.body?.cancel();
      if (r.ok) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`manager at ${m.url} not ready`);
}

export function clusterFeedTable(f: ClusterFeedFigures): string {
  const ms = (x: number) => x.toFixed(1);
  const mib = (x: number) => x.toFixed(0);
  return `| what | figure |
|---|---|
| clusters × nodes following the feed | ${f.clusters} × ${f.nodesPerCluster} (${
    f.clusters * f.nodesPerCluster
  } long polls, one process) |
| ports, one at a time, half on a network of every cluster, half of one cluster | ${f.ports} |
| port made → every node that needs it has it | **p50 ${ms(f.allP50Ms)} ms, p99 ${
    ms(f.allP99Ms)
  } ms** |
| the same, ports of the network of every cluster (${
    f.clusters * f.nodesPerCluster
  } nodes need each) | p50 ${ms(f.wideP50Ms)} ms, p99 ${ms(f.wideP99Ms)} ms |
| the same, ports of a network of one cluster (${f.nodesPerCluster} nodes need each) | p50 ${
    ms(f.localP50Ms)
  } ms, p99 ${ms(f.localP99Ms)} ms |
| port made → one node has it | p50 ${ms(f.oneP50Ms)} ms, p99 ${ms(f.oneP99Ms)} ms |
| deliveries missing after ${
    WAIT_MS / 1000
  } s / to nodes of clusters that may not see it | ${f.missing} / ${f.leaked} |
| manager memory (VmRSS): set up / all following / peak (VmHWM) | ${mib(f.rssIdleMiB)} / ${
    mib(f.rssFollowedMiB)
  } / ${mib(f.rssPeakMiB)} MiB |
| machine load (1, 5, 15 min) at the end | ${f.load.map((x) => x.toFixed(2)).join(", ")} |`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      clusters: { type: "string", default: "5" },
      nodes: { type: "string", default: "200" },
      ports: { type: "string", default: "100" },
    },
  });
  const f = await clusterFeedFigures({
    clusters: Number(values.clusters),
    nodes: Number(values.nodes),
    ports: Number(values.ports),
  });
  console.log(clusterFeedTable(f));
}
