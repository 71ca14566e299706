/**
 * The one start of a daemon process (agent, monitor; the manager's serve command): its
 * configuration loaded (common/daemon_config.ts), `--help` answered, the daemon started, and
 * stopped cleanly on SIGINT or SIGTERM. A configuration mistake is one line on stderr, prefixed
 * with the daemon's name, and exit status 2; nothing was started.
 */
import { DaemonConfigError, type LoadedConfig } from "./daemon_config.ts";

export interface Stoppable {
  stop(): Promise<void>;
}

export interface DaemonStart<C, D extends Stoppable> {
  /** "knitter-agent": the prefix of its error lines. */
  name: string;
  usage: string;
  load(args: string[]): Promise<LoadedConfig<C>>;
  start(config: C): Promise<D>;
  /** More once it runs (a signal of its own). */
  running?(daemon: D): void;
}

export async function runDaemon<C, D extends Stoppable>(
  d: DaemonStart<C, D>,
  args: string[] = Deno.args,
): Promise<void> {
  try {
    const { config, help } = await d.load(args);
    if (help) {
      console.log(d.usage);
      Deno.exit(0);
    }
    const daemon = await d.start(config);
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        daemon.stop().then(() => Deno.exit(0));
      });
    }
    d.running?.(daemon);
  } catch (err) {
    exitOnConfigError(d.name, err);
    throw err;
  }
}

/** A configuration mistake: said on one line, exit status 2. Anything else returns. */
export function exitOnConfigError(name: string, err: unknown): void {
  if (!(err instanceof DaemonConfigError)) return;
  console.error(`${name}: ${err.message}`);
  Deno.exit(2);
}
