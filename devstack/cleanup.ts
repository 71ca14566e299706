/**
 * What a test made (network namespaces, daemons, directories), undone in one call that always runs:
 * `await using cleanup = new Cleanup();` or `try { ... } finally { await cleanup.cleanup(); }`.
 */
import { run } from "@knitter/common";
import { dropLease, takeLease } from "./lease.ts";

export class Cleanup implements AsyncDisposable {
  /** Prefix of every name this test makes, unique per Cleanup: "kt-" + 4 random hex digits. */
  readonly prefix: string;
  private deferred: (() => Promise<void>)[] = [];
  private pidfiles: string[] = [];
  private pids: number[] = [];
  private netnses: string[] = [];
  private dirs: string[] = [];

  /** Whether this Cleanup holds the lease of its prefix (stale.ts): one made without a prefix. */
  private readonly leased: boolean;

  constructor(prefix?: string) {
    this.prefix = prefix ?? `kt-${randomHex(4)}`;
    this.leased = prefix === undefined;
    if (this.leased) takeLease(this.prefix);
  }

  /** A name unique to this test, e.g. "kt-a1b2-n1". */
  name(short: string): string {
    return `${this.prefix}-${short}`;
  }

  /** Runs first at cleanup, the last added first. */
  defer(fn: () => Promise<void>): void {
    this.deferred.push(fn);
  }

  /**
   * A daemon to stop by the pid in this file; register it BEFORE starting the daemon. Only a
   * process whose command line names the file is signalled, so a reused pid is left alone.
   */
  pidfile(path: string): void {
    this.pidfiles.push(path);
  }

  pid(pid: number): void {
    this.pids.push(pid);
  }

  netns(name: string): void {
    this.netnses.push(name);
  }

  dir(path: string): void {
    this.dirs.push(path);
  }

  /** A new temporary directory, removed at cleanup. */
  async tempDir(): Promise<string> {
    const dir = await Deno.makeTempDir({ prefix: `${this.prefix}-` });
    this.dir(dir);
    return dir;
  }

  /**
   * Undoes everything registered, in this order: deferred functions, processes (TERM, wait for
   * the pid to exit, KILL if it will not), netns (which removes their veths and taps), dirs. Every
   * step is attempted; the failures are thrown together at the end. Running it twice is harmless.
   */
  async cleanup(): Promise<void> {
    const errors: unknown[] = [];
    const attempt = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        errors.push(err);
      }
    };
    for (const fn of this.deferred.splice(0).reverse()) await attempt(fn);
    for (const path of this.pidfiles.splice(0).reverse()) await attempt(() => stopPidfile(path));
    for (const pid of this.pids.splice(0).reverse()) await attempt(() => stopPid(pid));
    for (const name of this.netnses.splice(0).reverse()) await attempt(() => deleteNetns(name));
    for (const dir of this.dirs.splice(0).reverse()) {
      await attempt(() => Deno.remove(dir, { recursive: true }).catch(ignoreNotFound));
    }
    if (errors.length === 0 && this.leased) await dropLease(this.prefix);
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `cleanup of ${this.prefix} failed`);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.cleanup();
  }
}

/** Alive means running: a zombie (exited, not yet reaped by its parent) counts as gone. */
export async function pidAlive(pid: number): Promise<boolean> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    // "PID (comm) STATE ...": comm may hold spaces and parentheses, so split at the last ")".
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch (err) {
    if (processGone(err)) return false;
    throw err;
  }
}

/** A /proc read fails with NotFound, or with ESRCH when the process is reaped between open and read. */
function processGone(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound || String(err).includes("(os error 3)");
}

/** Waits until the pid has exited, checking ever less often, for at most `ms`. */
export async function waitPidExit(pid: number, ms = 5000): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (let pause = 1; await pidAlive(pid); pause = Math.min(pause * 2, 50)) {
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
  return true;
}

/** SIGTERM, wait; SIGKILL if it does not exit; throws if even that does not end it. */
export async function stopPid(pid: number, ms = 5000): Promise<void> {
  if (!signal(pid, "SIGTERM")) return;
  if (await waitPidExit(pid, ms)) return;
  signal(pid, "SIGKILL");
  if (await waitPidExit(pid, ms)) return;
  throw new Error(`process ${pid} did not exit after SIGKILL`);
}

export async function readPidfile(path: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(path).catch(ignoreNotFound);
  const pid = Number.parseInt(text ?? "", 10);
  return Number.isInteger(pid) && pid > 1 ? pid : undefined;
}

async function stopPidfile(path: string): Promise<void> {
  const pid = await readPidfile(path);
  if (pid === undefined) return;
  const cmdline = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch((err) => {
    if (processGone(err)) return undefined;
    throw err;
  });
  if (!cmdline?.includes(path)) return; // gone, or the pid now belongs to someone else
  await stopPid(pid);
}

function signal(pid: number, sig: Deno.Signal): boolean {
  try {
    Deno.kill(pid, sig);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false; // ESRCH: already gone
    throw err;
  }
}

async function deleteNetns(name: string): Promise<void> {
  const result = await run(["ip", "netns", "del", name], { check: false });
  if (result.code === 0) return;
  if (await exists(`/var/run/netns/${name}`)) {
    throw new Error(`Cannot delete netns ${name}: ${result.stderr}`);
  }
}

async function exists(path: string): Promise<boolean> {
  return (await Deno.stat(path).catch(ignoreNotFound)) !== undefined;
}

function ignoreNotFound(err: unknown): undefined {
  if (err instanceof Deno.errors.NotFound) return undefined;
  throw err;
}

export function randomHex(digits: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(Math.ceil(digits / 2)));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("").slice(0, digits);
}
