/** knitter-manager entry point: serves the API, or runs a maintenance command on the store. */
import { parseArgs } from "node:util";
import { checkStore } from "./check.ts";
import { repairStore } from "./repair.ts";
import { DaemonConfigError } from "@knitter/common/daemon_config";
import { exitOnConfigError } from "@knitter/common/daemon_start";
import { loadConfig, type ManagerConfig, USAGE } from "./config.ts";
import { startManager } from "./server.ts";
import { compareStore, exportStore, importStore } from "./store/migrate.ts";
import { describeStore, openStore } from "./store/open.ts";
import { StoreUnavailableError } from "./store/store.ts";

const COMMANDS = ["export", "import", "compare", "check"] as const;
type Command = typeof COMMANDS[number];

async function serve(args: string[]): Promise<number> {
  const { config, help } = await loadConfig(args);
  if (help) {
    console.log(USAGE);
    return 0;
  }
  const manager = await startManager(config);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(signal, () => {
      manager.shutdown().then(() => Deno.exit(0));
    });
  }
  await manager.finished;
  return 0;
}

/** The command's own flags (--in, --out) first; the rest is the usual configuration. */
async function runCommand(command: Command, args: string[]): Promise<number> {
  const own = parseArgs({
    args,
    options: { in: { type: "string" }, out: { type: "string" }, repair: { type: "boolean" } },
    strict: false,
  });
  const rest = args.filter((a, i) =>
    !["--in", "--out", "--repair"].includes(a) && !["--in", "--out"].includes(args[i - 1]) &&
    !/^--(in|out)=/.test(a)
  );
  const { config, help } = await loadConfig(rest, undefined, undefined, { requireTokens: false });
  if (help) {
    console.log(USAGE);
    return 0;
  }
  const file = (name: "in" | "out") => {
    const value = own.values[name];
    if (typeof value !== "string") {
      throw new DaemonConfigError(`"${command}" needs --${name} FILE\n\n${USAGE}`);
    }
    return value;
  };
  const path = command === "export" ? file("out") : command === "check" ? "" : file("in");
  if (own.values.repair && command !== "check") {
    throw new DaemonConfigError(`--repair goes with "check" only\n\n${USAGE}`);
  }
  const store = await openStore(config.store);
  try {
    if (own.values.repair) await repair(store);
    return await COMMAND_RUNNERS[command](store, path, config);
  } catch (err) {
    if (err instanceof StoreUnavailableError || !(err instanceof Error)) throw err;
    console.error(`knitter-manager ${command}: ${err.message}`);
    return 2;
  } finally {
    store.close();
  }
}

type Runner = (
  store: Awaited<ReturnType<typeof openStore>>,
  path: string,
  config: ManagerConfig,
) => Promise<number>;

const COMMAND_RUNNERS: Record<Command, Runner> = {
  async export(store, path, config) {
    const n = await exportStore(store, path);
    console.log(`exported ${n} keys from ${describeStore(config.store)} to ${path}`);
    return 0;
  },
  async import(store, path, config) {
    const n = await importStore(store, path);
    const diffs = await compareStore(store, path);
    if (diffs.length) {
      return report(`imported ${n} keys, but the store differs from ${path}:`, diffs);
    }
    console.log(`imported ${n} keys into ${describeStore(config.store)}; compared: identical`);
    return 0;
  },
  async compare(store, path, config) {
    const diffs = await compareStore(store, path);
    if (diffs.length) return report(`${describeStore(config.store)} differs from ${path}:`, diffs);
    console.log(`${describeStore(config.store)} and ${path} hold the same state`);
    return 0;
  },
  async check(store, _path, config) {
    const r = await checkStore(store);
    if (r.problems.length) {
      return report(`${describeStore(config.store)}: ${r.problems.length} problems:`, r.problems);
    }
    console.log(
      `${describeStore(config.store)}: consistent (${r.networks} networks, ${r.ports} ports)`,
    );
    return 0;
  },
};

/** `check --repair`: mends what it can (repair.ts), says what it did; the check then runs. */
async function repair(store: Awaited<ReturnType<typeof openStore>>): Promise<void> {
  const done = await repairStore(store);
  for (const line of done) console.log(`repaired: ${line}`);
  if (done.length === 0) console.log("repaired: nothing to repair");
}

function report(title: string, lines: string[]): number {
  console.error(title);
  for (const line of lines) console.error(`  ${line}`);
  return 1;
}

if (import.meta.main) {
  try {
    const command = COMMANDS.find((c) => c === Deno.args[0]);
    Deno.exit(command ? await runCommand(command, Deno.args.slice(1)) : await serve(Deno.args));
  } catch (err) {
    exitOnConfigError("knitter-manager", err);
    if (err instanceof StoreUnavailableError) {
      console.error(`knitter-manager: ${err.message}`);
      Deno.exit(2);
    }
    throw err;
  }
}
