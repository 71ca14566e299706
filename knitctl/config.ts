/**
 * Where knitctl finds its manager, token and tenant: flags, then the environment, then a local
 * stack's manifest (--stack), then the config file. The first that names a value wins.
 */
import { type FlagValues, str } from "./args.ts";
import { UsageError } from "./errors.ts";

export interface ConfigFile {
  server?: string;
  token?: string;
  tenant?: string;
  caFile?: string;
}

/** What knitctl needs of a stack's manifest (scripts/stack.ts writes DIR/stack.json). */
export interface StackManifest {
  manager: { url: string; adminToken: string };
  nodes: { name: string; agentSocket: string }[];
}

export interface Settings {
  server?: string;
  token?: string;
  tenant: string;
  caFile?: string;
  output: "table" | "wide" | "json";
  stack?: StackManifest & { dir: string };
}

export type Env = (name: string) => string | undefined;

const OUTPUTS = ["table", "wide", "json"] as const;
export const DEFAULT_TENANT = "default";

export async function resolveSettings(flags: FlagValues, env: Env): Promise<Settings> {
  const output = str(flags, "output") ?? "table";
  if (!(OUTPUTS as readonly string[]).includes(output)) {
    throw new UsageError(`-o "${output}" is not an output format: use table, wide or json`);
  }
  const stackDir = str(flags, "stack") ?? env("KNITCTL_STACK");
  const stack = stackDir ? await readStack(stackDir) : undefined;
  const file = await readConfigFile(flags, env);
  return {
    server: first(str(flags, "server"), env("KNITCTL_SERVER"), stack?.manager.url, file.server),
    token: first(str(flags, "token"), env("KNITCTL_TOKEN"), stack?.manager.adminToken, file.token),
    tenant: first(str(flags, "tenant"), env("KNITCTL_TENANT"), file.tenant) ?? DEFAULT_TENANT,
    caFile: file.caFile,
    output: output as Settings["output"],
    stack,
  };
}

/** The explicit file must exist; the default one may be missing. */
async function readConfigFile(flags: FlagValues, env: Env): Promise<ConfigFile> {
  const explicit = str(flags, "config") ?? env("KNITCTL_CONFIG");
  const home = env("HOME");
  const path = explicit ?? (home ? `${home}/.config/knitter/knitctl.json` : undefined);
  if (!path) return {};
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (!explicit && err instanceof Deno.errors.NotFound) return {};
    throw new UsageError(`Cannot read the config file ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`The config file ${path} is not JSON: ${(err as Error).message}`);
  }
  return checkConfigFile(path, parsed);
}

const FILE_KEYS = ["server", "token", "tenant", "caFile"];

export function checkConfigFile(path: string, parsed: unknown): ConfigFile {
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new UsageError(`The config file ${path} must hold an object like {"server": "..."}`);
  }
  for (const [key, value] of Object.entries(parsed)) {
    if (!FILE_KEYS.includes(key)) {
      throw new UsageError(
        `The config file ${path} has an unknown key "${key}": use ${FILE_KEYS.join(", ")}`,
      );
    }
    if (typeof value !== "string") {
      throw new UsageError(`The config file ${path}: "${key}" must be a string`);
    }
  }
  return parsed as ConfigFile;
}

async function readStack(dir: string): Promise<StackManifest & { dir: string }> {
  const path = `${dir.replace(/\/$/, "")}/stack.json`;
  let m: StackManifest;
  try {
    m = JSON.parse(await Deno.readTextFile(path));
  } catch (err) {
    throw new UsageError(
      `Cannot read the stack manifest ${path} (${(err as Error).message}): ` +
        `start one with "deno task stack up --dir ${dir}"`,
    );
  }
  if (!m.manager?.url) {
    throw new UsageError(`The stack in ${dir} is not up yet (no manager in ${path})`);
  }
  return { ...m, dir };
}

function first(...values: (string | undefined)[]): string | undefined {
  return values.find((v) => v !== undefined && v !== "");
}
