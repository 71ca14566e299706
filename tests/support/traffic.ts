/**
 * Application traffic between pods, as the world sends it: a TCP stream or UDP datagrams with
 * random payloads, echoed back by the other pod and compared byte for byte (traffic_peer.ts runs at
 * both ends, inside their network namespaces). Bounded in time; the server ends by itself.
 */
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";

export interface Exchange {
  ok: boolean;
  sent: number;
  received: number;
  ms: number;
  error?: string;
}

const PEER = new URL("./traffic_peer.ts", import.meta.url).pathname;

/** A network namespace as `ip netns exec` takes it: a name, or a path under /var/run/netns. */
type Netns = string;

/**
 * Sends `bytes` random bytes over TCP from `from` to `addr`:`port` (a server in `to`), and reads
 * them back; with `rate`, at most that many bytes a second (a stream that lasts). ok means every
 * byte came back, in order. `port`: the server's, when the test's rules name one.
 */
export function tcpExchange(
  cleanup: Cleanup,
  from: Netns,
  to: Netns,
  addr: string,
  bytes: number,
  opts: { seconds?: number; rate?: number; port?: number } = {},
): Promise<Exchange> {
  const rate = opts.rate ? [String(opts.rate)] : [];
  return exchange(
    cleanup,
    "tcp",
    from,
    to,
    addr,
    String(bytes),
    opts.seconds ?? 15,
    rate,
    opts.port,
  );
}

/** One UDP datagram of each size from `from` to `addr`, each echoed back by a server in `to`. */
export function udpExchange(
  cleanup: Cleanup,
  from: Netns,
  to: Netns,
  addr: string,
  sizes: number[],
  opts: { seconds?: number; port?: number } = {},
): Promise<Exchange> {
  return exchange(
    cleanup,
    "udp",
    from,
    to,
    addr,
    sizes.join(","),
    opts.seconds ?? 10,
    [],
    opts.port,
  );
}

async function exchange(
  cleanup: Cleanup,
  proto: "tcp" | "udp",
  from: Netns,
  to: Netns,
  addr: string,
  what: string,
  seconds: number,
  extra: string[] = [],
  /** The server's port; default: a random one in 20000-39999. */
  fixedPort?: number,
): Promise<Exchange> {
  const port = fixedPort ?? 20000 + Math.floor(Math.random() * 20000);
  const server = await serve(cleanup, to, proto, port, seconds + 2);
  try {
    const r = await run(
      [...inNetns(from), Deno.execPath(), "run", "--quiet", "--allow-net", PEER, "send", proto]
        .concat([addr, String(port), what, String(seconds), ...extra]),
      { check: false },
    );
    const line = r.stdout.trim().split("\n").pop() ?? "";
    try {
      return JSON.parse(line) as Exchange;
    } catch {
      return {
        ok: false,
        sent: 0,
        received: 0,
        ms: 0,
        error: `sender failed: ${r.stderr || line}`,
      };
    }
  } finally {
    await server.stop();
  }
}

/** Starts the echo server and waits until it listens. */
export function serve(
  cleanup: Cleanup,
  netns: Netns,
  proto: "tcp" | "udp",
  port: number,
  seconds: number,
): Promise<{ stop(): Promise<void> }> {
  return startReady(cleanup, netns, [PEER, "serve", proto, String(port), String(seconds)], {
    what: `echo server (${proto} ${port})`,
  });
}

/**
 * Runs a Deno script (`script` and its arguments) in `netns` and waits until it prints "ready";
 * stop() ends it.
 */
export async function startReady(
  cleanup: Cleanup,
  netns: Netns,
  script: string[],
  opts: { what: string },
): Promise<{ stop(): Promise<void> }> {
  const child = new Deno.Command(inNetns(netns)[0], {
    args: [
      ...inNetns(netns).slice(1),
      ...[Deno.execPath(), "run", "--quiet", "--allow-net"],
      ...script,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  cleanup.pid(child.pid);
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("ready")) {
    const { value, done } = await reader.read();
    if (done) {
      await child.status;
      throw new Error(`${opts.what} in ${netns} ended: ${await stderr}`);
    }
    out += value;
  }
  return {
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* ended by itself */ }
      await child.status;
      await reader.cancel().catch(() => {});
      await stderr;
    },
  };
}

export function inNetns(netns: Netns): string[] {
  const name = netns.startsWith("/var/run/netns/") || netns.startsWith("/run/netns/")
    ? netns.slice(netns.lastIndexOf("/") + 1)
    : netns;
  return name.includes("/") ? ["nsenter", `--net=${name}`] : ["ip", "netns", "exec", name];
}
