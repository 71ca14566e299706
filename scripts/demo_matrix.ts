/**
 * The connectivity matrix: ICMP echo from each pod interface (ping -I, so the packet leaves by
 * that interface) to every address of the other pods, compared with what the plan expects.
 */
import { run } from "@knitter/common";
import { type Endpoint, expectReach, probePairs } from "./demo_plan.ts";

export interface Cell {
  from: string;
  to: string;
  address: string;
  expected: boolean;
  reached: boolean;
}

/**
 * Pairs that should reach are probed first and may take up to `reachS` seconds for the first
 * reply: the remote node installs its flows when the manager's feed tells it about a new port.
 * Once those replied, the dataplane has every port, and each pair that should not reach gets
 * `isolatedS` (whole) seconds of echo requests, five a second; any reply is a leak.
 */
export async function measure(
  endpoints: Endpoint[],
  opts: { reachS?: number; isolatedS?: number; parallel?: number; onCell?: (c: Cell) => void } = {},
): Promise<Cell[]> {
  const pairs = probePairs(endpoints);
  const probe = async ([from, to]: [Endpoint, Endpoint]): Promise<Cell> => {
    const expected = expectReach(from, to);
    const seconds = expected ? opts.reachS ?? 10 : opts.isolatedS ?? 2;
    const cell: Cell = {
      from: label(from),
      to: label(to),
      address: to.address,
      expected,
      reached: await echo(from, to.address, { seconds, stopAtFirst: expected }),
    };
    opts.onCell?.(cell);
    return cell;
  };
  const parallel = opts.parallel ?? 12;
  const reach = await mapLimit(pairs.filter(([a, b]) => expectReach(a, b)), parallel, probe);
  const isolated = await mapLimit(pairs.filter(([a, b]) => !expectReach(a, b)), parallel, probe);
  const byPair = new Map([...reach, ...isolated].map((c) => [`${c.from}>${c.to}`, c]));
  return pairs.map(([a, b]) => byPair.get(`${label(a)}>${label(b)}`)!);
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
    mismatches: cells.filter((c) => c.expected !== c.reached),
  };
}
