/**
 * The connectivity matrix: from each pod interface to every address of the other pods, an ICMP
 * echo (ping -I), a TCP stream and a UDP datagram (socat bound to that interface, so the packets
 * leave by it) to echo servers in every pod, compared with what the plan expects. A pair that
 * should reach must pass all three, with the payload back intact; one that should not, none.
 */
import { run } from "@knitter/common";
import { type Endpoint, expectReach, probePairs } from "./demo_plan.ts";

export interface Cell {
  from: string;
  to: string;
  address: string;
  expected: boolean;
  icmp: boolean;
  tcp: boolean;
  udp: boolean;
  /** Anything got through. */
  reached: boolean;
}

/** Where the echo servers listen in every pod. */
export const ECHO_PORT = 7007;

/** Whether a cell is what the plan expects: all three protocols through, or none. */
export function asExpected(c: Cell): boolean {
  return c.expected ? c.icmp && c.tcp && c.udp : !c.reached;
}

/**
 * Pairs that should reach are probed first and may take up to `reachS` seconds for the first
 * reply: the remote node installs its flows when the manager's feed tells it about a new port.
 * Once those replied, the dataplane has every port, and each pair that should not reach gets
 * `isolatedS` (whole) seconds of echo requests, five a second, and a TCP and a UDP try as long;
 * any answer is a leak.
 */
export async function measure(
  endpoints: Endpoint[],
  opts: { reachS?: number; isolatedS?: number; parallel?: number; onCell?: (c: Cell) => void } = {},
): Promise<Cell[]> {
  const pairs = probePairs(endpoints);
  const servers = await startEchoServers(
    [...new Set(endpoints.map((e) => e.netns))],
    // They end by themselves even if this process is killed before it stops them.
    (opts.reachS ?? 10) + 2 * (opts.isolatedS ?? 2) * pairs.length + 30,
  );
  const probe = async ([from, to]: [Endpoint, Endpoint]): Promise<Cell> => {
    const expected = expectReach(from, to);
    let icmp: boolean, tcp: boolean, udp: boolean;
    if (expected) {
      // The first reply says the flows are in; TCP and UDP then get a few tries each.
      icmp = await echo(from, to.address, { seconds: opts.reachS ?? 10, stopAtFirst: true });
      tcp = await retry(() => tcpEcho(from, to.address, 2));
      udp = await retry(() => udpEcho(from, to.address, 1));
    } else {
      const seconds = opts.isolatedS ?? 2;
      [icmp, tcp, udp] = await Promise.all([
        echo(from, to.address, { seconds, stopAtFirst: false }),
        tcpEcho(from, to.address, seconds),
        udpEcho(from, to.address, seconds),
      ]);
    }
    const cell: Cell = {
      from: label(from),
      to: label(to),
      address: to.address,
      expected,
      icmp,
      tcp,
      udp,
      reached: icmp || tcp || udp,
    };
    opts.onCell?.(cell);
    return cell;
  };
  try {
    const parallel = opts.parallel ?? 12;
    const reach = await mapLimit(pairs.filter(([a, b]) => expectReach(a, b)), parallel, probe);
    const isolated = await mapLimit(pairs.filter(([a, b]) => !expectReach(a, b)), parallel, probe);
    const byPair = new Map([...reach, ...isolated].map((c) => [`${c.from}>${c.to}`, c]));
    return pairs.map(([a, b]) => byPair.get(`${label(a)}>${label(b)}`)!);
  } finally {
    await servers.stop();
  }
}

export function label(e: Endpoint): string {
  return `${e.pod}/${e.ifName}`;
}

/** Whether at least one echo reply came back within `seconds`. */
async function echo(
  from: Endpoint,
  address: string,
  opts: { seconds: number; stopAtFirst: boolean },
): Promise<boolean> {
  const count = opts.stopAtFirst ? 1 : Math.ceil(opts.seconds * 5) + 1;
  const r = await run([
    "ping",
    "-n",
    "-q",
    "-I",
    from.ifName,
    "-c",
    String(count),
    "-i",
    "0.2",
    "-w",
    String(opts.seconds),
    address,
  ], { netns: from.netns, check: false });
  // ping exits 1 for "fewer replies than -c by the deadline" as for "none": count the replies.
  const received = /(\d+) (?:packets )?received/.exec(r.stdout);
  // No route out of that interface (it is down, or the address is off every subnet it has).
  if (!received && /Network is unreachable|No route to host/.test(r.stderr)) return false;
  if (!received) {
    throw new Error(`ping from ${label(from)} to ${address} did not run: ${r.stderr || r.stdout}`);
  }
  return Number(received[1]) > 0;
}

/** A random payload of printable bytes (socat passes it through stdin and stdout). */
function payload(bytes: number): string {
  const raw = new Uint8Array(Math.ceil(bytes * 3 / 4));
  crypto.getRandomValues(raw);
  return btoa(String.fromCharCode(...raw)).slice(0, bytes);
}

/** A TCP stream of a few segments to the echo server; true when it all came back intact. */
async function tcpEcho(from: Endpoint, address: string, seconds: number): Promise<boolean> {
  const sent = payload(4000);
  const r = await run([
    ...["socat", "-T", String(seconds), "-"],
    `TCP4:${address}:${ECHO_PORT},so-bindtodevice=${from.ifName},connect-timeout=${seconds}`,
  ], { netns: from.netns, stdin: sent, check: false, timeoutMs: (seconds + 2) * 1000 })
    .catch(() => undefined);
  return r?.code === 0 && r.stdout === sent;
}

/** One UDP datagram to the echo server; true when it came back intact within `seconds`. */
async function udpEcho(from: Endpoint, address: string, seconds: number): Promise<boolean> {
  const sent = payload(1000);
  const r = await run([
    ...["socat", "-t", String(seconds), "-T", String(seconds), "-"],
    `UDP4:${address}:${ECHO_PORT},so-bindtodevice=${from.ifName}`,
  ], { netns: from.netns, stdin: sent, check: false, timeoutMs: (seconds + 2) * 1000 })
    .catch(() => undefined);
  return r?.code === 0 && r.stdout === sent;
}

async function retry(fn: () => Promise<boolean>, tries = 3): Promise<boolean> {
  for (let i = 0; i < tries; i++) if (await fn()) return true;
  return false;
}

/**
 * A TCP and a UDP echo server (socat) in each netns, ended by `stop()`, or by `timeout` after
 * `seconds` should this process die first.
 */
async function startEchoServers(netnses: string[], seconds: number) {
  const children = netnses.flatMap((netns) =>
    [`TCP6-LISTEN:${ECHO_PORT},fork,reuseaddr`, `UDP6-RECVFROM:${ECHO_PORT},fork`].map((listen) =>
      new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          netns,
          "timeout",
          String(Math.ceil(seconds)),
          "socat",
          listen,
          "PIPE",
        ],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn()
    )
  );
  // Listening takes socat a few milliseconds; the first probes are pings anyway.
  await waitListening(netnses);
  return {
    async stop() {
      for (const c of children) {
        try {
          c.kill("SIGTERM");
        } catch { /* ended already */ }
      }
      await Promise.all(children.map((c) => c.status));
    },
  };
}

/** Until every netns has a TCP listener on the echo port (5 s at most). */
async function waitListening(netnses: string[]): Promise<void> {
  const deadline = Date.now() + 5000;
  for (const netns of netnses) {
    for (;;) {
      const r = await run(["ss", "-Hltn", `sport = :${ECHO_PORT}`], { netns, check: false });
      if (r.stdout.trim() !== "" || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 20));
    }
  }
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Counts for the summary line. */
export function tally(cells: Cell[]) {
  return {
    pairs: cells.length,
    reachAsExpected: cells.filter((c) => c.expected && c.reached).length,
    isolatedAsExpected: cells.filter((c) => !c.expected && !c.reached).length,
    mismatches: cells.filter((c) => !asExpected(c)),
  };
}
