/**
 * What a waiting socket follower costs the manager (issue 32), in process: a manager behind its
 * guard with the feed's socket port (`port`), or served straight by Deno.serve with its WebSocket
 * upgrade (`direct`), N followers from a child process (socket_memory_clients.ts) opening raw
 * handshakes one after the other or all at once (`burst`), each first taking a cursor on an API
 * connection of its own closed after it (`cursor`), kept open beside the socket as an agent keeps
 * its pooled one (`keep`), or not. VmRSS and V8's heap after three forced collections,
 * before and with all waiting; per follower the difference over N.
 *
 *   deno run --allow-all --v8-flags=--expose-gc manager/bench/socket_memory_bench.ts \
 *     [N] [port|direct] [cursor|keep|nocursor] [burst|one]
 */
import { startManager } from "../server.ts";
import type { ManagerConfig } from "../config.ts";
import { freePort } from "./support.ts";
import { linesOf } from "./lines.ts";

const [n = "3000", mode = "port", cursorFirst = "nocursor", arrival = "one"] = Deno.args;
const N = Number(n);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --v8-flags=--expose-gc: the readings follow forced collections");

const rssMiB = () =>
  Number(Deno.readTextFileSync("/proc/self/status").match(/VmRSS:\s+(\d+)/)![1]) / 1024;
const heapMiB = () => Deno.memoryUsage().heapUsed / 1048576;

async function collected(): Promise<{ rss: number; heap: number }> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 200));
  }
  return { rss: rssMiB(), heap: heapMiB() };
}

const dir = await Deno.makeTempDir({ prefix: "knitter-socket-memory-" });
const feedSocketPort = mode === "port" ? freePort() : 0;
const tokenOf = (i: number) => `mem-${i}-token-0123456789`;
const config = {
  listen: { hostname: "127.0.0.1", port: 0, feedSocketPort },
  store: { path: `${dir}/manager.kv` },
  tokens: Array.from({ length: N }, (_, i) => ({
    token: tokenOf(i),
    scope: "node" as const,
    node: `n${i}`,
  })),
  vniRanges: ["5000-5999"],
  underlayMtu: 1500,
  logLevel: "error" as const,
  // One address opens every follower: its budget of new connections is lifted.
  limits: mode === "port" ? { connectionsPerSecond: 0 } : { headerTimeoutMs: 0 as const },
} as ManagerConfig;
const m = await startManager(config);
try {
  const r = await fetch(`${m.url}/api/v1/feed`, {
    headers: { authorization: `Bearer ${tokenOf(0)}` },
  });
  const { cursor } = await r.json();
  const before = await collected();
  const apiPort = new URL(m.url).port;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      new URL("./socket_memory_clients.ts", import.meta.url).pathname,
      String(mode === "port" ? feedSocketPort : apiPort),
      String(N),
      cursor,
      "mem",
      cursorFirst === "nocursor" ? "0" : apiPort,
      arrival,
      cursorFirst,
    ],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  for await (const line of linesOf(child.stdout)) if (line === "ready") break;
  const after = await collected();
  const per = (a: number, b: number) => ((b - a) * 1024 / N).toFixed(1);
  console.log(JSON.stringify({
    mode,
    followers: N,
    cursorFirst,
    arrival,
    rssMiB: [before.rss.toFixed(1), after.rss.toFixed(1)],
    rssPerFollowerKiB: per(before.rss, after.rss),
    heapPerFollowerKiB: per(before.heap, after.heap),
    heapCommittedMiB: (Deno.memoryUsage().heapTotal / 1048576).toFixed(1),
  }));
  await child.stdin.close();
  await child.status;
} finally {
  await m.shutdown();
  await Deno.remove(dir, { recursive: true });
}
