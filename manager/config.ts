/**
 * The manager's configuration: a JSON file, then environment overrides, then flags. Every problem
 * is reported with where it came from.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { CLUSTER_NAME, isLevel, type Level } from "@knitter/common";
import type { TokenConfig } from "./auth.ts";

const TokenSchema = z.strictObject({
  token: z.string().min(16, "must be at least 16 characters"),
  scope: z.enum(["admin", "tenant", "node", "monitor", "metrics"]),
  tenant: z.string().optional(),
  node: z.string().optional(),
  /** The cluster of a node or monitor token (its names are scoped by it); absent: "default". */
  cluster: z.string().regex(CLUSTER_NAME, "must be a cluster name")
    .optional(),
}).refine((t) => t.scope !== "tenant" || t.tenant, 'a tenant token needs "tenant"')
  .refine((t) => t.scope !== "node" || t.node, 'a node token needs "node"')
  .refine(
    (t) => t.cluster === undefined || t.scope === "node" || t.scope === "monitor",
    'only node and monitor tokens belong to a cluster: leave out "cluster"',
  );

/** One role's budget (fairness.ts); an absent field keeps the default, 0 lifts the limit. */
const BudgetSchema = z.strictObject({
  ratePerSecond: z.number().min(0).max(1_000_000).optional(),
  burst: z.int().min(0).max(1_000_000).optional(),
  concurrent: z.int().min(0).max(100_000).optional(),
  concurrentLists: z.int().min(0).max(100_000).optional(),
  busyMsPerSecond: z.int().min(0).max(1_000_000).optional(),
  busyBurstMs: z.int().min(0).max(3_600_000).optional(),
}).refine((b) => !b.ratePerSecond || b.burst !== 0, {
  message: "a burst of 0 refuses every request: give burst at least 1, or ratePerSecond 0",
});

const RangeText = z.string().regex(/^\d+-\d+$/, 'must look like "5000-16777215"');

export const ConfigSchema = z.strictObject({
  listen: z.strictObject({
    hostname: z.string().default("0.0.0.0"),
    port: z.int().min(0).max(65535).default(9527),
    /** Also serve on this unix socket (same API, same tokens): for agents on the same machine. */
    socket: z.string().optional(),
  }).default({ hostname: "0.0.0.0", port: 9527 }),
  tls: z.strictObject({ certFile: z.string(), keyFile: z.string() }).optional(),
  store: z.strictObject({
    /** "kv" (Deno KV, the default) or "etcd"; absent means "kv" unless `etcd` is given. */
    backend: z.enum(["kv", "etcd"]).optional(),
    /** Deno KV: a file, ":memory:", or the https:// URL of a remote KV (with accessToken). */
    path: z.string().min(1).default("knitter-manager.kv"),
    accessToken: z.string().min(1).optional(),
    etcd: z.strictObject({
      endpoints: z.array(
        z.string().regex(/^https?:\/\/[^/]+$/, 'must look like "http://HOST:PORT"'),
      )
        .min(1, "name at least one etcd member"),
      caFile: z.string().optional(),
      certFile: z.string().optional(),
      keyFile: z.string().optional(),
      username: z.string().optional(),
      password: z.string().optional(),
      /** Every key starts with this, so that several installations can share one etcd. */
      prefix: z.string().default("knitter/"),
      /** How long one store operation may take, across all members tried, before a 503. */
      timeoutMs: z.int().min(100).max(600_000).default(5000),
    }).optional(),
  }).default({ path: "knitter-manager.kv" })
    .refine((s) => s.backend !== "etcd" || s.etcd, {
      message: 'the etcd backend needs "etcd": {"endpoints": [...]}',
    })
    .refine((s) => !s.etcd || !s.etcd.certFile === !s.etcd.keyFile, {
      message: "give both etcd.certFile and etcd.keyFile (a client certificate and its key)",
    })
    .refine((s) => !s.etcd?.username === (s.etcd?.password === undefined), {
      message: "give both etcd.username and etcd.password",
    }),
  tokens: z.array(TokenSchema).default([]),
  tokensFile: z.string().optional(),
  /** What one client may hold or send (see app.ts and conn_guard.ts); timer values stay far below setTimeout's 2^31-1 ms. */
  limits: z.strictObject({
    bodyBytes: z.int().min(1024).max(64 << 20).optional(),
    urlChars: z.int().min(256).max(60_000).optional(),
    bodyTimeoutMs: z.int().min(100).max(3_600_000).optional(),
    /** 0: no connection guard (a proxy in front times headers); see conn_guard.ts. */
    headerTimeoutMs: z.union([z.literal(0), z.int().min(100).max(3_600_000)]).optional(),
    idleTimeoutMs: z.int().min(100).max(3_600_000).optional(),
    /** New connections a second from one client address (0: no limit); see conn_guard.ts. */
    connectionsPerSecond: z.number().min(0).max(1_000_000).optional(),
    connectionBurst: z.int().min(1).max(1_000_000).optional(),
    /** Nesting of objects and arrays in a JSON body (400 beyond, before it is parsed). */
    jsonDepth: z.int().min(4).max(1000).optional(),
  }).optional(),
  /** Each role's budget of requests (fairness.ts): over its rate or its concurrency, a 429. */
  fairness: z.strictObject({
    tenant: BudgetSchema.optional(),
    node: BudgetSchema.optional(),
    monitor: BudgetSchema.optional(),
    admin: BudgetSchema.optional(),
    metrics: BudgetSchema.optional(),
  }).optional(),
  vniRanges: z.array(RangeText).default(["1-16777215"]),
  underlayMtu: z.int().min(1280).max(9216).default(1500),
  /**
   * Seconds a released address or MAC is not handed out again (0: at once); absent:
   * DEFAULT_QUARANTINE_SECONDS.
   */
  quarantineSeconds: z.int().min(0).max(86400).optional(),
  /**
   * Days the address history keeps who held an address or MAC after they stopped (0: no history);
   * absent: DEFAULT_HISTORY_RETENTION_DAYS.
   */
  historyRetentionDays: z.int().min(0).max(3650).optional(),
  logLevel: z.enum(["debug", "info", "warn", "error"]).default("info"),
});

export type ManagerConfig = z.infer<typeof ConfigSchema>;

/**
 * The quarantine of released addresses and MACs when the configuration names none: long enough
 * for every node to have removed the flows of a released port.
 */
export const DEFAULT_QUARANTINE_SECONDS = 60;

/** How long the address history keeps an ended holding when the configuration names no time. */
export const DEFAULT_HISTORY_RETENTION_DAYS = 30;

export const USAGE = `knitter-manager: the central network manager (REST API and IPAM)

Usage: deno task manager [COMMAND] [--config FILE] [--listen HOST:PORT] [--store PATH]
                         [--etcd URL,URL...] [--help]

Commands (default: serve the API):
  export --out FILE   write every key of the store to FILE (JSON lines)
  import --in FILE    load an export into an empty store, then compare the two
  compare --in FILE   compare the store with an export; exit 1 and list differences
  check               check that every set bit has its port, IP group or network and the
                      reverse; exit 1 and list the problems
  check --repair      first mend what needs no judgement (old quarantine records, those of
                      deleted networks), in small commits; then check

Options:
  --config FILE       JSON configuration file (see manager/manager.example.json)
  --listen HOST:PORT  address to serve on (default 0.0.0.0:9527)
  --store PATH        Deno KV file holding the state (":memory:" for a throwaway store, or
                      the https:// URL of a remote Deno KV with KNITTER_MANAGER_KV_ACCESS_TOKEN)
  --etcd URLS         keep the state in etcd instead: its members' client URLs, comma-separated
  --help              show this text

Environment (overrides the file; flags override both):
  KNITTER_MANAGER_LISTEN       HOST:PORT
  KNITTER_MANAGER_SOCKET       also serve on this unix socket
  KNITTER_MANAGER_STORE        Deno KV file path, or https:// URL of a remote Deno KV
  KNITTER_MANAGER_KV_ACCESS_TOKEN  access token of the remote Deno KV
  KNITTER_MANAGER_ETCD_ENDPOINTS   etcd client URLs, comma-separated (selects the etcd backend)
  KNITTER_MANAGER_ETCD_CA      PEM file of the CA that signed etcd's certificates
  KNITTER_MANAGER_ETCD_CERT    PEM client certificate for etcd; with KNITTER_MANAGER_ETCD_KEY
  KNITTER_MANAGER_ETCD_KEY     PEM private key of that certificate
  KNITTER_MANAGER_ETCD_USERNAME, KNITTER_MANAGER_ETCD_PASSWORD  etcd user
  KNITTER_MANAGER_ETCD_PREFIX  key prefix in etcd (default "knitter/")
  KNITTER_MANAGER_TLS_CERT     PEM certificate file; with KNITTER_MANAGER_TLS_KEY serves HTTPS
  KNITTER_MANAGER_TLS_KEY      PEM private key file
  KNITTER_MANAGER_ADMIN_TOKEN  adds an admin bearer token
  KNITTER_MANAGER_TOKENS_FILE  JSON file with a list of tokens ({token, scope, tenant?, node?, cluster?})
  KNITTER_MANAGER_LOG_LEVEL    debug | info | warn | error
  KNITTER_MANAGER_FAIRNESS     JSON budgets by role over the file's "fairness", e.g.
                               '{"tenant":{"ratePerSecond":20,"concurrent":8}}'
`;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export interface LoadOptions {
  /** The maintenance commands touch no API, so they need no tokens. */
  requireTokens?: boolean;
}

export interface Loaded {
  config: ManagerConfig;
  help: boolean;
}

/** Reads file, env and flags; `env` and `readFile` are injectable for tests. */
export async function loadConfig(
  args: string[],
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
  readFile: (path: string) => Promise<string> = (p) => Deno.readTextFile(p),
  options: LoadOptions = {},
): Promise<Loaded> {
  let flags;
  try {
    flags = parseArgs({
      args,
      options: {
        config: { type: "string" },
        listen: { type: "string" },
        store: { type: "string" },
        etcd: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }).values;
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n\n${USAGE}`);
  }
  if (flags.help) return { config: ConfigSchema.parse({}), help: true };

  // deno-lint-ignore no-explicit-any
  let raw: any = {};
  if (flags.config) raw = await readJsonFile(flags.config, readFile, "configuration file");
  const listen = flags.listen ?? env("KNITTER_MANAGER_LISTEN");
  if (listen) raw.listen = parseListen(listen);
  const socket = env("KNITTER_MANAGER_SOCKET");
  if (socket) raw.listen = { ...(raw.listen ?? {}), socket };
  raw.store = storeOverrides(raw.store, flags, env);
  const cert = env("KNITTER_MANAGER_TLS_CERT");
  const key = env("KNITTER_MANAGER_TLS_KEY");
  if (cert || key) {
    if (!cert || !key) {
      throw new ConfigError(
        "Set both KNITTER_MANAGER_TLS_CERT and KNITTER_MANAGER_TLS_KEY for HTTPS",
      );
    }
    raw.tls = { certFile: cert, keyFile: key };
  }
  const admin = env("KNITTER_MANAGER_ADMIN_TOKEN");
  if (admin) raw.tokens = [...(raw.tokens ?? []), { token: admin, scope: "admin" }];
  const tokensFile = env("KNITTER_MANAGER_TOKENS_FILE");
  if (tokensFile) raw.tokensFile = tokensFile;
  const level = env("KNITTER_MANAGER_LOG_LEVEL");
  if (level) raw.logLevel = level;
  const fairness = env("KNITTER_MANAGER_FAIRNESS");
  if (fairness) raw.fairness = fairnessOverrides(raw.fairness, fairness);

  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `Invalid configuration at "${issue.path.join(".") || "(root)"}": ${issue.message}`,
    );
  }
  const config = parsed.data;
  if (config.tokensFile) {
    const more = await readJsonFile(config.tokensFile, readFile, "tokens file");
    const list = z.array(TokenSchema).safeParse(more);
    if (!list.success) {
      const issue = list.error.issues[0];
      throw new ConfigError(
        `Invalid tokens file "${config.tokensFile}" at [${issue.path.join(".")}]: ${issue.message}`,
      );
    }
    config.tokens.push(...list.data);
  }
  if (config.tokens.length === 0 && options.requireTokens !== false) {
    throw new ConfigError(
      "No API tokens configured: every /api route needs one. Set KNITTER_MANAGER_ADMIN_TOKEN or list tokens in the configuration",
    );
  }
  vniRanges(config);
  return { config, help: false };
}

async function readJsonFile(path: string, readFile: (p: string) => Promise<string>, what: string) {
  let text;
  try {
    text = await readFile(path);
  } catch (err) {
    throw new ConfigError(`Cannot read ${what} "${path}": ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`The ${what} "${path}" is not valid JSON: ${(err as Error).message}`);
  }
}

/** The store section after env and flags; naming etcd endpoints selects the etcd backend. */
function storeOverrides(
  // deno-lint-ignore no-explicit-any
  fromFile: any,
  flags: { store?: string; etcd?: string },
  env: (name: string) => string | undefined,
) {
  const store = { ...(fromFile ?? {}) };
  const path = flags.store ?? env("KNITTER_MANAGER_STORE");
  if (path) Object.assign(store, { path, backend: "kv" });
  const token = env("KNITTER_MANAGER_KV_ACCESS_TOKEN");
  if (token) store.accessToken = token;
  const etcd = { ...(store.etcd ?? {}) };
  const endpoints = flags.etcd ?? env("KNITTER_MANAGER_ETCD_ENDPOINTS");
  if (endpoints) etcd.endpoints = endpoints.split(",").map((e) => e.trim()).filter(Boolean);
  const fields = {
    caFile: "CA",
    certFile: "CERT",
    keyFile: "KEY",
    username: "USERNAME",
    password: "PASSWORD",
    prefix: "PREFIX",
  };
  for (const [field, name] of Object.entries(fields)) {
    const value = env(`KNITTER_MANAGER_ETCD_${name}`);
    if (value !== undefined) etcd[field] = value;
  }
  if (Object.keys(etcd).length) store.etcd = etcd;
  if (store.etcd && store.backend === undefined) store.backend = "etcd";
  // A flag picks one backend over the other outright.
  if (flags.etcd) store.backend = "etcd";
  else if (flags.store) store.backend = "kv";
  if (store.backend !== "etcd" && /^https?:\/\//.test(store.path ?? "") && !store.accessToken) {
    throw new ConfigError(
      `A remote Deno KV (${store.path}) needs an access token: set store.accessToken or KNITTER_MANAGER_KV_ACCESS_TOKEN`,
    );
  }
  return Object.keys(store).length ? store : undefined;
}

/** The env's budgets over the file's, role by role and field by field. */
// deno-lint-ignore no-explicit-any
function fairnessOverrides(fromFile: any, text: string) {
  let given;
  try {
    given = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      `KNITTER_MANAGER_FAIRNESS is not valid JSON: ${
        (err as Error).message
      }; write e.g. '{"tenant":{"ratePerSecond":20}}'`,
    );
  }
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    throw new ConfigError(
      'KNITTER_MANAGER_FAIRNESS must be a JSON object of budgets by role, e.g. \'{"tenant":{"ratePerSecond":20}}\'',
    );
  }
  const out = { ...(fromFile ?? {}) };
  for (const [role, budget] of Object.entries(given)) {
    out[role] = typeof budget === "object" && budget !== null && !Array.isArray(budget)
      ? { ...(out[role] ?? {}), ...budget }
      : budget;
  }
  return out;
}

function parseListen(text: string): { hostname: string; port: number } {
  const m = text.match(/^(.*):(\d+)$/);
  if (!m) throw new ConfigError(`Listen address "${text}" must be HOST:PORT`);
  return { hostname: m[1].replace(/^\[(.*)\]$/, "$1") || "0.0.0.0", port: Number(m[2]) };
}

/** The VNI ranges as inclusive pairs, checked. */
export function vniRanges(config: ManagerConfig): [number, number][] {
  return config.vniRanges.map((text) => {
    const [s, e] = text.split("-").map(Number);
    if (s < 1 || e > 16777215 || s > e) {
      throw new ConfigError(`VNI range "${text}" must lie within 1-16777215 with start <= end`);
    }
    return [s, e];
  });
}

export function logLevel(config: ManagerConfig): Level {
  return isLevel(config.logLevel) ? config.logLevel : "info";
}

export type { TokenConfig };
