/**
 * Packet captures for end-to-end tests: tcpdump inside a netns, listening before the traffic is
 * sent, and bounded both in packets and in time.
 */
import type { Cleanup } from "../../devstack/cleanup.ts";

export interface Capture {
  /**
   * Waits until `count` packets were seen or the time ran out, or, with `graceMs`, at most that
   * long (for when the traffic is over and nothing more is expected); tcpdump's lines (`-e`).
   */
  done(graceMs?: number): Promise<string[]>;
}

export async function startCapture(
  cleanup: Cleanup,
  netns: string,
  iface: string,
  filter: string,
  /** verbose: tcpdump's -v (IP headers' TOS, TTL…; a packet may then take several lines). */
  opts: { count?: number; timeoutMs?: number; verbose?: boolean } = {},
): Promise<Capture> {
  const seconds = Math.ceil((opts.timeoutMs ?? 5000) / 1000);
  // timeout sends INT, on which tcpdump prints what it caught and exits.
  const child = new Deno.Command("ip", {
    args: [
      ...["netns", "exec", netns, "timeout", "-s", "INT", String(seconds)],
      ...["tcpdump", "-l", "-e", "-nn", ...(opts.verbose ? ["-v"] : [])],
      ...["-c", String(opts.count ?? 1), "-i", iface, filter],
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  cleanup.pid(child.pid);
  const stdout = new Response(child.stdout).text();
  // tcpdump says "listening on IFACE" once its filter is attached: only then may traffic flow.
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let err = "";
  const listening = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`tcpdump on ${iface} in ${netns} ended: ${err}`);
      err += value;
      if (err.includes("listening on")) return;
    }
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`tcpdump on ${iface} not listening: ${err}`)), 5000);
  });
  try {
    await Promise.race([listening, deadline]);
  } catch (e) {
    try {
      child.kill("SIGINT");
    } catch { /* already gone */ }
    await child.status;
    await listening.catch(() => {});
    await stdout;
    throw e;
  } finally {
    clearTimeout(timer);
  }
  const drained = (async () => {
    while (!(await reader.read()).done) { /* keep the pipe flowing */ }
  })();
  return {
    async done(graceMs?: number) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      if (graceMs !== undefined) {
        // timeout passes the INT on to tcpdump.
        timer = setTimeout(() => {
          try {
            child.kill("SIGINT");
          } catch { /* already gone */ }
        }, graceMs);
      }
      await child.status;
      clearTimeout(timer);
      await drained;
      return (await stdout).split("\n").filter((l) => l !== "");
    },
  };
}
