/**
 * What a test killed by hand left behind (SIGKILL, or a terminal closed: its `Cleanup` never ran),
 * found and undone by the next test that starts a node or a stack. A test's `Cleanup` holds a lease,
 * a file named by its prefix holding the pid of the test process; a lease whose process is gone is
 * stale, and everything named by its prefix goes: the processes in its netns and those whose command
 * line names it (by pid: TERM, then KILL), the netns, its temporary directories, then the lease.
 * A lease of a live process is never touched, so tests running side by side are safe.
 */
import { run } from "@knitter/common";
import { pidAlive, stopPid } from "./cleanup.ts";
import { dropLease, LEASES_DIR } from "./lease.ts";

let swept: Promise<string[]> | null = null;

/** sweepStale, once per process. */
export function sweepStaleOnce(): Promise<string[]> {
  swept ??= sweepStale();
  return swept;
}

/** Undoes what every stale lease names; answers their prefixes. Best effort: it never throws. */
export async function sweepStale(): Promise<string[]> {
  const stale: string[] = [];
  for (const prefix of await leases()) {
    const text = await Deno.readTextFile(`${LEASES_DIR}/${prefix}`).catch(() => "");
    const pid = Number.parseInt(text, 10);
    if (Number.isInteger(pid) && pid > 1 && await pidAlive(pid)) continue;
    stale.push(prefix);
  }
  for (const prefix of stale) {
    await sweep(prefix).catch((err) =>
      console.warn(`Leftovers of test ${prefix} not all removed: ${err}`)
    );
  }
  return stale;
}

async function leases(): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(LEASES_DIR)) names.push(e.name);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return names;
}

async function sweep(prefix: string): Promise<void> {
  const mine = (name: string) => name.startsWith(`${prefix}-`);
  const netns = (await run(["ip", "netns", "list"], { check: false })).stdout
    .split("\n").map((l) => l.split(" ")[0]).filter(mine);
  const pids = new Set<number>();
  for (const name of netns) {
    const inside = await run(["ip", "netns", "pids", name], { check: false });
    for (const p of inside.stdout.split("\n")) if (p.trim()) pids.add(Number(p));
  }
  for (const pid of await namingProcesses(prefix)) pids.add(pid);
  pids.delete(Deno.pid);
  await Promise.all([...pids].map((pid) => stopPid(pid, 2000).catch(() => {})));
  for (const name of netns) await run(["ip", "netns", "del", name], { check: false });
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for await (const e of Deno.readDir(tmp)) {
    if (mine(e.name)) await Deno.remove(`${tmp}/${e.name}`, { recursive: true }).catch(() => {});
  }
  await dropLease(prefix);
}

/** The processes whose command line names `prefix-` (daemons started with its paths). */
async function namingProcesses(prefix: string): Promise<number[]> {
  const found: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const cmdline = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
    if (cmdline.includes(`${prefix}-`)) found.push(Number(e.name));
  }
  return found;
}
