/**
 * The one configuration loader of the daemons (manager, agent, monitor); each daemon's config.ts
 * declares only its schema, defaults, environment variables and flags.
 *
 * Precedence, lowest first: the schema's defaults, the JSON file given by `--config`, the
 * environment variables (in the order declared), the flags. An object given at a place merges
 * into what is there key by key (an array or a plain value replaces it), so a variable or flag
 * changes only what it names.
 *
 * Every mistake is one DaemonConfigError: what failed, why, and what to do, naming where the value
 * came from (the file, an environment variable, a flag) or, for a missing one, where it can be
 * given.
 */
import { parseArgs } from "node:util";
import type { z } from "zod";

export class DaemonConfigError extends Error {
  /** `what` failed `why`; `fix`: what to do about it. */
  constructor(what: string, why?: string, fix?: string) {
    super([why === undefined ? what : `${what}: ${why}`, fix].filter(Boolean).join("; "));
    this.name = "DaemonConfigError";
  }
}

/** Where a variable's or flag's value goes, and how its text becomes the value. */
export interface Setting {
  /** A dotted path in the configuration: "manager.url"; "" for the whole. */
  at: string;
  /** The text's value (default: the text); throws a DaemonConfigError for a bad one. */
  parse?(text: string): unknown;
}

/** What a daemon's configuration is: its schema and where its values may come from. */
export interface DaemonConfigSpec<T> {
  usage: string;
  schema: z.ZodType<T>;
  /** Environment variables, in the order they apply: a dotted path or a Setting. */
  env: Record<string, string | Setting>;
  /** Flags with a value (besides --config and --help), applied last. */
  flags?: Record<string, string | Setting>;
  /** What follows from the values together (a backend chosen by a flag), before validation. */
  settle?(raw: Raw, given: Given): void;
  /** Checks and additions after validation (a tokens file read, a limit checked). */
  finish?(config: T, io: ConfigIo): Promise<void> | void;
}

/** The outside world the loader reads; tests give their own. */
export interface ConfigIo {
  env(name: string): string | undefined;
  readFile(path: string): Promise<string>;
}

/** The variables and flags given, for `settle`. */
export interface Given {
  env(name: string): string | undefined;
  flags: Record<string, string | undefined>;
}

export type Raw = Record<string, unknown>;

export interface LoadedConfig<T> {
  /** Undefined with `help`: nothing else was read. */
  config: T;
  help: boolean;
}

const DEFAULT_IO: ConfigIo = {
  env: (name) => Deno.env.get(name),
  readFile: (path) => Deno.readTextFile(path),
};

/** Reads flags, the file, the environment, validates; `io` is injectable for tests. */
export async function loadDaemonConfig<T>(
  spec: DaemonConfigSpec<T>,
  args: string[],
  io: Partial<ConfigIo> = {},
): Promise<LoadedConfig<T>> {
  const { env, readFile } = { ...DEFAULT_IO, ...io };
  const flags = parseFlags(spec, args);
  if (flags.help) return { config: undefined as T, help: true };
  const file = flags.config;
  const raw = (file === undefined ? {} : await readJsonFile(file, readFile)) as Raw;
  const fromFile = structuredClone(raw);
  const origins: Origin[] = [];
  const apply = (table: Record<string, string | Setting>, value: (name: string) => unknown) => {
    for (const [name, s] of Object.entries(table)) {
      const text = value(name);
      if (typeof text !== "string" || text === "") continue;
      const setting = typeof s === "string" ? { at: s } : s;
      setAt(raw, setting.at, setting.parse ? setting.parse(text) : text);
      origins.push({ at: setting.at, from: table === spec.env ? name : `--${name}` });
    }
  };
  apply(spec.env, env);
  apply(spec.flags ?? {}, (name) => flags[name]);
  spec.settle?.(raw, { env, flags: flags as Record<string, string | undefined> });
  const parsed = spec.schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const source = file !== undefined && holds(fromFile, issue.path) ? file : undefined;
    throw invalid(issue, spec, { file, source, origins });
  }
  await spec.finish?.(parsed.data, { env, readFile });
  return { config: parsed.data, help: false };
}

/** A JSON file the configuration names (the file itself, a tokens file), as data. */
export async function readJsonFile(
  path: string,
  readFile: (path: string) => Promise<string>,
  what = "configuration file",
): Promise<unknown> {
  let text;
  try {
    text = await readFile(path);
  } catch (err) {
    throw new DaemonConfigError(
      `Cannot read ${what} "${path}"`,
      (err as Error).message,
      "check the path and that this user may read it",
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DaemonConfigError(
      `The ${what} "${path}" is not valid JSON`,
      (err as Error).message,
      "correct the file",
    );
  }
}

/** Where a value set by a variable or flag went. */
interface Origin {
  at: string;
  /** The variable's name, or the flag ("--listen"). */
  from: string;
}

function parseFlags<T>(spec: DaemonConfigSpec<T>, args: string[]) {
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {
    config: { type: "string" },
    help: { type: "boolean", short: "h" },
  };
  for (const name of Object.keys(spec.flags ?? {})) options[name] = { type: "string" };
  try {
    return parseArgs({ args, options, strict: true }).values as Record<string, string> & {
      help?: boolean;
    };
  } catch (err) {
    throw new DaemonConfigError(`${(err as Error).message}\n\n${spec.usage}`);
  }
}

/** The first problem the schema found, with where the value came from and what to do. */
function invalid<T>(
  issue: { path: PropertyKey[]; message: string },
  spec: DaemonConfigSpec<T>,
  where: { file?: string; source?: string; origins: Origin[] },
): DaemonConfigError {
  const at = issue.path.join(".");
  const what = `Invalid configuration at "${at || "(root)"}"`;
  const from = where.origins.findLast((o) => isUnder(at, o.at));
  if (from) {
    return new DaemonConfigError(what, `${issue.message} (from ${from.from})`, "correct it");
  }
  if (where.source !== undefined) {
    return new DaemonConfigError(
      what,
      `${issue.message} (from the file "${where.source}")`,
      "correct the file",
    );
  }
  const file = where.file;
  const names = [
    ...Object.entries(spec.env).filter(([, s]) => reaches(s, at)).map(([n]) => n),
    ...Object.entries(spec.flags ?? {}).filter(([, s]) => reaches(s, at)).map(([n]) => `--${n}`),
  ];
  const place = file === undefined ? "a configuration file (--config)" : `"${file}"`;
  return new DaemonConfigError(
    what,
    issue.message,
    `give it in ${place}${names.length > 0 ? ` or by ${names.join(", ")}` : ""}`,
  );
}

/** Whether the file gave a value at `path` (then a problem there is the file's). */
function holds(raw: unknown, path: PropertyKey[]): boolean {
  let here = raw;
  for (const k of path) {
    if (typeof here !== "object" || here === null || !(k in here)) return false;
    here = (here as Record<PropertyKey, unknown>)[k];
  }
  return true;
}

/** Whether a variable or flag sets something at or under `at`, or `at` within what it sets. */
function reaches(s: string | Setting, at: string): boolean {
  const to = typeof s === "string" ? s : s.at;
  return isUnder(to, at) || isUnder(at, to);
}

/** Whether dotted path `a` is `b` or lies under it. */
function isUnder(a: string, b: string): boolean {
  return b === "" || a === b || a.startsWith(`${b}.`);
}

/** Puts `value` at a dotted path, creating objects on the way; objects merge key by key. */
export function setAt(raw: Raw, at: string, value: unknown): void {
  if (at === "") {
    Object.assign(raw, merge(raw, value));
    return;
  }
  const keys = at.split(".");
  const last = keys.pop()!;
  let here = raw;
  for (const k of keys) {
    if (!isPlainObject(here[k])) here[k] = {};
    here = here[k] as Raw;
  }
  here[last] = merge(here[last], value);
}

function merge(have: unknown, value: unknown): unknown {
  if (!isPlainObject(have) || !isPlainObject(value)) return value;
  const out: Raw = { ...have };
  for (const [k, v] of Object.entries(value)) out[k] = merge(out[k], v);
  return out;
}

function isPlainObject(v: unknown): v is Raw {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A variable's list: comma-separated, spaces around items ignored, empty items dropped. */
export function commaList(text: string): string[] {
  return text.split(",").map((e) => e.trim()).filter(Boolean);
}

/** A variable's whole number; anything else is refused naming the variable. */
export function integer(name: string): (text: string) => number {
  return (text) => {
    if (!/^-?\d+$/.test(text.trim())) {
      throw new DaemonConfigError(
        `${name}="${text}" is not a whole number`,
        undefined,
        "correct it",
      );
    }
    return Number(text);
  };
}
