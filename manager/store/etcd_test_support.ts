/**
 * Real etcd for tests and benchmarks: members on free loopback ports with a temporary data
 * directory, started as child processes and stopped by pid. A member can be killed and brought
 * back to test fail-over and quorum loss.
 */
import { EtcdClient } from "./etcd_client.ts";

export interface EtcdMember {
  name: string;
  clientUrl: string;
  peerUrl: string;
  dataDir: string;
  process: Deno.ChildProcess | null;
}

export interface EtcdCluster {
  endpoints: string[];
  members: EtcdMember[];
  dir: string;
  /** SIGKILLs member i (its data stays). */
  kill(i: number): Promise<void>;
  /** Starts member i again on its data; resolves when the cluster has a leader. */
  restart(i: number): Promise<void>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface EtcdStartOptions {
  members?: number;
  /** Extra etcd flags for every member (e.g. auth or TLS). */
  flags?: string[];
  /** http or https (with `flags` naming the certificates). */
  scheme?: "http" | "https";
  /** Wait for a leader with this client (TLS, auth); plain http when absent. */
  ready?: (endpoints: string[]) => Promise<void>;
}

/**
 * Writes above 128 operations per transaction (IP groups, big network deletes) need this; the
 * manager's README names the same figure.
 */
export const MAX_TXN_OPS = 1024;

export async function startEtcd(options: EtcdStartOptions = {}): Promise<EtcdCluster> {
  const n = options.members ?? 1;
  const scheme = options.scheme ?? "http";
  const dir = await Deno.makeTempDir({ prefix: "knitter-etcd-" });
  const ports = await freePorts(2 * n);
  const members: EtcdMember[] = Array.from({ length: n }, (_, i) => ({
    name: `m${i}`,
    clientUrl: `${scheme}://127.0.0.1:${ports[2 * i]}`,
    peerUrl: `http://127.0.0.1:${ports[2 * i + 1]}`,
    dataDir: `${dir}/m${i}`,
    process: null,
  }));
  const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(",");
  const spawnMember = async (m: EtcdMember) => {
    const log = await Deno.open(`${dir}/${m.name}.log`, { create: true, append: true });
    m.process = new Deno.Command("etcd", {
      args: [
        `--name=${m.name}`,
        `--data-dir=${m.dataDir}`,
        `--listen-client-urls=${m.clientUrl}`,
        `--advertise-client-urls=${m.clientUrl}`,
        `--listen-peer-urls=${m.peerUrl}`,
        `--initial-advertise-peer-urls=${m.peerUrl}`,
        `--initial-cluster=${initialCluster}`,
        "--initial-cluster-state=new",
        `--initial-cluster-token=${dir}`,
        `--max-txn-ops=${MAX_TXN_OPS}`,
        // Quick elections: the tests kill members and wait for the rest to go on.
        "--heartbeat-interval=50",
        "--election-timeout=500",
        "--logger=zap",
        "--log-outputs=stderr",
        ...(options.flags ?? []),
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    m.process.stderr.pipeTo(log.writable).catch(() => {});
  };
  const endpoints = members.map((m) => m.clientUrl);
  const waitReady = () => (options.ready ?? waitForLeader)(endpoints);
  const cluster: EtcdCluster = {
    endpoints,
    members,
    dir,
    async kill(i) {
      const m = members[i];
      if (!m.process) return;
      m.process.kill("SIGKILL");
      await m.process.status;
      m.process = null;
    },
    async restart(i) {
      await spawnMember(members[i]);
      await waitReady();
    },
    async stop() {
      for (let i = 0; i < members.length; i++) await cluster.kill(i);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
    [Symbol.asyncDispose]: () => cluster.stop(),
  };
  try {
    for (const m of members) await spawnMember(m);
    await waitReady();
  } catch (err) {
    const logs = await Promise.all(
      members.map((m) => Deno.readTextFile(`${dir}/${m.name}.log`).catch(() => "")),
    );
    await cluster.stop();
    throw new Error(
      `etcd did not start: ${(err as Error).message}\n${logs.join("\n").slice(-3000)}`,
    );
  }
  return cluster;
}

/** Polls until some member reports a leader (with a deadline, so a broken start fails). */
export async function waitForLeader(endpoints: string[], client?: EtcdClient): Promise<void> {
  const c = client ?? new EtcdClient({ endpoints, timeoutMs: 1000 });
  const deadline = Date.now() + 30_000;
  try {
    for (;;) {
      try {
        // deno-lint-ignore no-explicit-any
        const s: any = await c.call("/v3/maintenance/status", {});
        if (s.leader && s.leader !== "0") return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error("etcd has no leader after 30 s");
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    if (!client) c.close();
  }
}

/** Ports the kernel hands out now; etcd binds them a moment later. */
export async function freePorts(n: number): Promise<number[]> {
  const listeners = Array.from(
    { length: n },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const l of listeners) l.close();
  return await Promise.resolve(ports);
}

/** A loopback URL where nothing listens: the "etcd is down" case. */
export async function deadEndpoint(): Promise<string> {
  const [port] = await freePorts(1);
  return `http://127.0.0.1:${port}`;
}
