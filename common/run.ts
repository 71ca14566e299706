/**
 * The one runner every shell-out goes through: it records the command, its exit code, stderr and
 * duration, throws a {@link CommandError} that says what failed and why, and tells trace hooks.
 */

export interface RunResult {
  /** The command as executed, including any `ip netns exec` / `nsenter` prefix. */
  argv: string[];
  code: number;
  stdout: string;
  /** Trimmed. */
  stderr: string;
  /** Wall time in milliseconds. */
  ms: number;
}

export interface RunOptions {
  /** Written to the command's stdin, which is then closed. */
  stdin?: string;
  /** Added to (not replacing) the inherited environment. */
  env?: Record<string, string>;
  /**
   * Run inside a network namespace: a name runs through `ip netns exec NAME` (which also remounts
   * /sys for that netns), a path (anything with a "/", e.g. /proc/PID/ns/net) through
   * `nsenter --net=PATH`.
   */
  netns?: string;
  /** Throw a CommandError on a non-zero exit. Default true. */
  check?: boolean;
  /** Kill the command (SIGKILL) after this many milliseconds; it then fails with a CommandError. */
  timeoutMs?: number;
}

export class CommandError extends Error {
  readonly result: RunResult;

  constructor(result: RunResult, why?: string) {
    super(`${quote(result.argv)} failed (${why ?? `exit ${result.code}`})${detail(result.stderr)}`);
    this.name = "CommandError";
    this.result = result;
  }
}

/** Called after every command, with its result (also for failures). */
export type RunHook = (result: RunResult) => void;

const hooks = new Set<RunHook>();

/** Trace every command from now on; returns the function that stops it. */
export function onRun(hook: RunHook): () => void {
  hooks.add(hook);
  return () => hooks.delete(hook);
}

/** Which Debian package provides a binary, for the "not found" message. */
const PACKAGES: Record<string, string> = {
  ip: "iproute2",
  "ovs-vsctl": "openvswitch-switch",
  "ovs-ofctl": "openvswitch-switch",
  "ovs-appctl": "openvswitch-switch",
  "ovsdb-server": "openvswitch-switch",
  "ovsdb-tool": "openvswitch-switch",
  "ovs-vswitchd": "openvswitch-switch",
  nsenter: "util-linux",
  ethtool: "ethtool",
  ping: "iputils-ping",
  nft: "nftables",
  bird: "bird2",
  birdc: "bird2",
  arping: "arping",
};

const decoder = new TextDecoder();

export async function run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
  if (argv.length === 0) throw new Error("run: empty command");
  const full = [...netnsPrefix(options.netns), ...argv];
  const started = performance.now();
  const timeout = options.timeoutMs === undefined ? undefined : new AbortController();
  const timer = timeout && setTimeout(() => timeout.abort(), options.timeoutMs);
  let output: Deno.CommandOutput;
  try {
    output = await execute(full, options, timeout?.signal);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw notFound(full, full[0], started);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  if (timeout?.signal.aborted) {
    const result = settle(full, output, started);
    throw new CommandError(result, `timed out after ${options.timeoutMs} ms`);
  }
  return check(settle(full, output, started), argv[0], options);
}

/**
 * A command started now and given its stdin later, so that its start-up (exec, dynamic linking,
 * entering a netns) overlaps what the caller waits for first. Like {@link run} otherwise.
 */
export interface StartedCommand {
  /** The command as executed, including any netns prefix. */
  readonly argv: string[];
  /**
   * Writes `text` to its input and leaves the input open: a command that reads line by line (an
   * `ip -batch`) starts on those lines while the rest is not known yet. A command that has exited
   * already is not an error here: its exit says why, in finish().
   */
  send(text: string): Promise<void>;
  /** Writes `stdin`, closes it and waits for the exit; fails as {@link run} does. */
  finish(stdin: string): Promise<RunResult>;
  /** Kills the command (its input is not needed after all) and waits for it. Idempotent. */
  abandon(): Promise<void>;
  /**
   * Resolves true once the command has printed anything on stdout, false once it ended without:
   * a caller that sent a line whose output it awaits (an `ip -batch` `link show`) learns that the
   * lines before it are done while the command goes on waiting for the rest.
   */
  printed(): Promise<boolean>;
}

/** Spawns `argv` with its stdin held open; see {@link StartedCommand}. */
export function start(
  argv: string[],
  options: Omit<RunOptions, "stdin" | "timeoutMs"> = {},
): StartedCommand {
  if (argv.length === 0) throw new Error("start: empty command");
  const full = [...netnsPrefix(options.netns), ...argv];
  let child: Deno.ChildProcess;
  try {
    child = spawn(full, options.env, true);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw notFound(full, full[0], performance.now());
    throw err;
  }
  let printed!: (yes: boolean) => void;
  const firstOutput = new Promise<boolean>((resolve) => printed = resolve);
  const output = collect(child, () => printed(true)).finally(() => printed(false));
  output.catch(() => {}); // awaited in finish() or abandon(); never an unhandled rejection
  let used = false;
  let writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
  // Set once the command stopped reading: the rest of its input goes nowhere.
  let broken = false;
  const write = async (text: string, close: boolean) => {
    if (broken) return;
    writer ??= child.stdin.getWriter();
    try {
      if (text) await writer.write(new TextEncoder().encode(text));
      if (close) await writer.close();
    } catch (err) {
      if (!(err instanceof Deno.errors.BrokenPipe)) throw err;
      broken = true;
    }
  };
  return {
    argv: full,
    send(text: string): Promise<void> {
      if (used) throw new Error(`${quote(full)} was already finished or abandoned`);
      return write(text, false);
    },
    async finish(stdin: string): Promise<RunResult> {
      if (used) throw new Error(`${quote(full)} was already finished or abandoned`);
      used = true;
      // Its ms is the wait from here: the time spent waiting for input is nobody's cost.
      const fed = performance.now();
      const [out] = await Promise.all([output, write(stdin, true)]);
      return check(settle(full, out, fed), argv[0], options);
    },
    async abandon(): Promise<void> {
      if (used) return;
      used = true;
      try {
        child.kill("SIGKILL");
      } catch { /* already exited */ }
      await output.catch(() => {});
    },
    printed: () => firstOutput,
  };
}

/** What `child.output()` answers, read as it comes: `onOutput` is told of the first stdout bytes. */
async function collect(
  child: Deno.ChildProcess,
  onOutput: () => void,
): Promise<Pick<Deno.CommandOutput, "code" | "stdout" | "stderr">> {
  const [stdout, stderr, status] = await Promise.all([
    bytesOf(child.stdout, onOutput),
    bytesOf(child.stderr),
    child.status,
  ]);
  return { code: status.code, stdout, stderr };
}

async function bytesOf(stream: ReadableStream<Uint8Array>, onChunk?: () => void) {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    onChunk?.();
  }
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return all;
}

function settle(
  argv: string[],
  output: Pick<Deno.CommandOutput, "code" | "stdout" | "stderr">,
  started: number,
): RunResult {
  const result: RunResult = {
    argv,
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr).trim(),
    ms: performance.now() - started,
  };
  tell(result);
  return result;
}

function check(result: RunResult, binary: string, options: RunOptions): RunResult {
  const missing = options.netns === undefined ? undefined : missingInNetns(result, binary);
  if (missing) throw missing;
  if (result.code !== 0 && options.check !== false) throw new CommandError(result);
  return result;
}

function spawn(
  argv: string[],
  env: Record<string, string> | undefined,
  stdin: boolean,
): Deno.ChildProcess {
  return new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    stdin: stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

async function execute(
  argv: string[],
  options: RunOptions,
  signal?: AbortSignal,
): Promise<Deno.CommandOutput> {
  const child = spawn(argv, options.env, options.stdin !== undefined);
  // Deno's own `signal` option sends SIGTERM, which a stuck command may ignore.
  const kill = () => {
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
  };
  signal?.addEventListener("abort", kill, { once: true });
  try {
    // Concurrently: a command that writes much before it has read all its input would otherwise
    // block on a full stdout pipe while we block on its full stdin pipe.
    const fed = options.stdin === undefined ? undefined : feed(child.stdin, options.stdin);
    const [output] = await Promise.all([child.output(), fed]);
    return output;
  } finally {
    signal?.removeEventListener("abort", kill);
  }
}

/** Writes stdin; a command that exits without reading it all is not an error of ours. */
async function feed(stdin: WritableStream<Uint8Array>, text: string): Promise<void> {
  const writer = stdin.getWriter();
  try {
    await writer.write(new TextEncoder().encode(text));
    await writer.close();
  } catch (err) {
    if (!(err instanceof Deno.errors.BrokenPipe)) throw err;
  }
}

/** A broken trace hook must not break the command it traces. */
function tell(result: RunResult): void {
  for (const hook of hooks) {
    try {
      hook(result);
    } catch { /* ignored on purpose */ }
  }
}

function netnsPrefix(netns: string | undefined): string[] {
  if (netns === undefined) return [];
  if (netns.includes("/")) return ["nsenter", `--net=${netns}`];
  return ["ip", "netns", "exec", netns];
}

function notFound(argv: string[], binary: string, started: number): CommandError {
  const result = { argv, code: 127, stdout: "", stderr: "", ms: performance.now() - started };
  tell(result);
  return new CommandError(result, missingWhy(binary));
}

/** `ip netns exec` / `nsenter` report a missing binary as their own failure. */
function missingInNetns(result: RunResult, binary: string): CommandError | undefined {
  if (result.code === 0) return undefined;
  const quoted = binary.replaceAll(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(
    `(exec of "${quoted}" failed|failed to execute ${quoted}): No such file`,
  );
  if (!pattern.test(result.stderr)) return undefined;
  return new CommandError(result, missingWhy(binary));
}

function missingWhy(binary: string): string {
  const name = binary.split("/").pop() ?? binary;
  const pkg = PACKAGES[name];
  const hint = pkg ? `; install the Debian package "${pkg}"` : "";
  return `"${binary}" not found${hint}`;
}

function quote(argv: string[]): string {
  const text = argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a}'`)).join(" ");
  return `"${text.length > 300 ? `${text.slice(0, 300)}...` : text}"`;
}

function detail(stderr: string): string {
  if (stderr === "") return "";
  return `: ${stderr.length > 2000 ? `${stderr.slice(0, 2000)}...` : stderr}`;
}
