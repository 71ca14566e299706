/**
 * Throughput between two network namespaces with Debian's `iperf3`: a one-shot server in one, the
 * client in the other, both started here and ended by pid. Bounded in time.
 */
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";

/** Where a measured stream goes: from one netns (an `ip netns` name) to an address in another. */
export interface Stream {
  from: string;
  to: string;
  addr: string;
}

/**
 * Bits per second received over one TCP stream of `seconds` from `s.from` to `s.addr` (a server in
 * `s.to`), the first second (TCP's start) left out.
 */
export async function iperfRate(
  cleanup: Cleanup,
  s: Stream,
  seconds = 5,
  /** `port`: the server's (default: a random one); `via`: the address the client connects to. */
  opts: { port?: number; via?: string } = {},
): Promise<number> {
  const port = opts.port ?? 20000 + Math.floor(Math.random() * 20000);
  const server = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      s.to,
      "iperf3",
      "-s",
      "-1",
      "--forceflush",
      "-B",
      s.addr,
      "-p",
      `${port}`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  cleanup.pid(server.pid);
  const stderr = new Response(server.stderr).text();
  const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let out = "";
    while (!out.includes("Server listening")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`iperf3 server in ${s.to} ended: ${out} ${await stderr}`);
      out += value;
    }
    const r = await run(
      [
        "iperf3",
        "-c",
        opts.via ?? s.addr,
        "-p",
        `${port}`,
        "-t",
        `${seconds + 1}`,
        "-O",
        "1",
        "-J",
      ],
      { netns: s.from, check: false, timeoutMs: (seconds + 20) * 1000 },
    );
    const report = JSON.parse(r.stdout || "{}");
    const bps = report.end?.sum_received?.bits_per_second;
    if (r.code !== 0 || typeof bps !== "number") {
      throw new Error(`iperf3 ${s.from} -> ${s.addr}: ${report.error ?? r.stderr}`);
    }
    return bps;
  } finally {
    try {
      server.kill("SIGTERM");
    } catch { /* a one-shot server ends by itself */ }
    await server.status;
    await reader.cancel().catch(() => {});
    await stderr;
  }
}
