/**
 * The manager's configuration: its schema, defaults, environment variables and flags. Loaded by
 * common/daemon_config.ts: a JSON file, then environment overrides, then flags. Every problem is
 * reported with where it came from.
 */
import { z } from "zod";
import { CLUSTER_NAME, isLevel, type Level } from "@knitter/common";
import {
  type ConfigIo,
  DaemonConfigError,
  type DaemonConfigSpec,
  type Given,
  loadDaemonConfig,
  type LoadedConfig,
  type Raw,
  readJsonFile,
} from "@knitter/common/daemon_config";
import type { TokenConfig } from "./auth.ts";
import { type Cidr, parseCidr } from "@knitter/common/address";

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

/** An option no longer offered: any value set is an error carrying `message` (what to do instead). */
function removed(message: string) {
  return z.never({ error: message }).optional();
}

const RangeText = z.string().regex(/^\d+-\d+$/, 'must look like "5000-16777215"');

export const ConfigSchema = z.strictObject({
  listen: z.strictObject({
    hostname: z.string().default("0.0.0.0"),
    port: z.int().min(0).max(65535).default(9527),
    /** Also serve on this unix socket (same API, same tokens): for agents on the same machine. */
    socket: z.string().optional(),
    /**
     * The feed's WebSocket listener (feed_listener.ts), on the same address, with the API's TLS
     * and connection guard limits; 0 or absent (the default): none, so a manager opens no port it was not
     * told to (the deploy manifests set 9528).
     */
    feedSocketPort: z.int().min(0).max(65535).optional(),
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
    /** Removed: a file that still sets it is told what replaced it rather than ignored. */
    feedSockets: removed(
      "removed (the guard no longer runs on Deno's older per-connection server, on which it " +
        "carried the feed's WebSockets): delete it and set listen.feedSocketPort instead (9528 " +
        "in the deploy manifests), the feed's sockets on a port of their own behind the same guard",
    ),
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
  /**
   * BGP advertisement (service/advertise.ts): the only ranges a network's CIDRs may lie in to be
   * advertised to the fabric; none (the default): no network is advertised.
   */
  bgp: z.strictObject({
    advertisableRanges: z.array(z.string()).default([]),
  }).optional(),
  /** The web console (console/): where its charts over time are read. */
  console: z.strictObject({
    prometheusUrl: z.string().regex(/^https?:\/\/[^/]+/, 'must look like "http://HOST:PORT"')
      .optional(),
  }).optional(),
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
  KNITTER_MANAGER_FEED_SOCKET_PORT  serve the feed's WebSockets on this port too (0: not)
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
  KNITTER_MANAGER_PROMETHEUS_URL  Prometheus the console's charts read (console.prometheusUrl)
  KNITTER_MANAGER_FAIRNESS     JSON budgets by role over the file's "fairness", e.g.
                               '{"tenant":{"ratePerSecond":20,"concurrent":8}}'
`;

export interface LoadOptions {
  /** The maintenance commands touch no API, so they need no tokens. */
  requireTokens?: boolean;
}

/** Where the environment and flags put their values (common/daemon_config.ts). */
function spec(options: LoadOptions): DaemonConfigSpec<ManagerConfig> {
  const store = (path: string) => ({ path, backend: "kv" });
  const etcd = (name: string) => `store.etcd.${name}`;
  return {
    usage: USAGE,
    schema: ConfigSchema,
    env: {
      KNITTER_MANAGER_LISTEN: { at: "listen", parse: parseListen },
      KNITTER_MANAGER_SOCKET: "listen.socket",
      KNITTER_MANAGER_FEED_SOCKET_PORT: { at: "listen.feedSocketPort", parse: Number },
      KNITTER_MANAGER_STORE: { at: "store", parse: store },
      KNITTER_MANAGER_KV_ACCESS_TOKEN: "store.accessToken",
      KNITTER_MANAGER_ETCD_ENDPOINTS: { at: etcd("endpoints"), parse: list },
      KNITTER_MANAGER_ETCD_CA: etcd("caFile"),
      KNITTER_MANAGER_ETCD_CERT: etcd("certFile"),
      KNITTER_MANAGER_ETCD_KEY: etcd("keyFile"),
      KNITTER_MANAGER_ETCD_USERNAME: etcd("username"),
      KNITTER_MANAGER_ETCD_PASSWORD: etcd("password"),
      KNITTER_MANAGER_ETCD_PREFIX: etcd("prefix"),
      KNITTER_MANAGER_TLS_CERT: "tls.certFile",
      KNITTER_MANAGER_TLS_KEY: "tls.keyFile",
      KNITTER_MANAGER_TOKENS_FILE: "tokensFile",
      KNITTER_MANAGER_LOG_LEVEL: "logLevel",
      KNITTER_MANAGER_PROMETHEUS_URL: "console.prometheusUrl",
      KNITTER_MANAGER_FAIRNESS: { at: "fairness", parse: parseFairness },
    },
    flags: {
      listen: { at: "listen", parse: parseListen },
      store: { at: "store", parse: store },
      etcd: { at: etcd("endpoints"), parse: list },
    },
    settle,
    finish: async (config, io) => {
      await addTokensFile(config, io);
      if (config.tokens.length === 0 && options.requireTokens !== false) {
        throw new DaemonConfigError(
          "No API tokens configured",
          "every /api route needs one",
          "set KNITTER_MANAGER_ADMIN_TOKEN or list tokens in the configuration",
        );
      }
      vniRanges(config);
      advertisableRanges(config);
    },
  };
}

/** Reads file, env and flags; `env` and `readFile` are injectable for tests. */
export function loadConfig(
  args: string[],
  env?: (name: string) => string | undefined,
  readFile?: (path: string) => Promise<string>,
  options: LoadOptions = {},
): Promise<LoadedConfig<ManagerConfig>> {
  return loadDaemonConfig(spec(options), args, {
    ...(env && { env }),
    ...(readFile && { readFile }),
  });
}

/**
 * What follows from the values together: the admin token added to the file's, both TLS files from
 * the environment or none, the store backend (naming etcd endpoints selects etcd unless a backend
 * is named; a flag picks one outright), a remote Deno KV's token.
 */
function settle(raw: Raw, given: Given): void {
  const admin = given.env("KNITTER_MANAGER_ADMIN_TOKEN");
  if (admin) raw.tokens = [...(raw.tokens as unknown[] ?? []), { token: admin, scope: "admin" }];
  if (!given.env("KNITTER_MANAGER_TLS_CERT") !== !given.env("KNITTER_MANAGER_TLS_KEY")) {
    throw new DaemonConfigError(
      "HTTPS from the environment",
      "only one of its two files is named",
      "set both KNITTER_MANAGER_TLS_CERT and KNITTER_MANAGER_TLS_KEY for HTTPS (or neither)",
    );
  }
  const store = raw.store as
    | { backend?: string; path?: string; accessToken?: string; etcd?: unknown }
    | undefined;
  if (!store) return;
  if (store.etcd && store.backend === undefined) store.backend = "etcd";
  if (given.flags.etcd) store.backend = "etcd";
  else if (given.flags.store) store.backend = "kv";
  if (store.backend !== "etcd" && /^https?:\/\//.test(store.path ?? "") && !store.accessToken) {
    throw new DaemonConfigError(
      `A remote Deno KV (${store.path}) needs an access token`,
      "set store.accessToken or KNITTER_MANAGER_KV_ACCESS_TOKEN",
    );
  }
}

/** The tokens of the file `tokensFile` names, checked, after the configuration's own. */
async function addTokensFile(config: ManagerConfig, io: ConfigIo): Promise<void> {
  if (!config.tokensFile) return;
  const more = await readJsonFile(config.tokensFile, io.readFile, "tokens file");
  const parsed = z.array(TokenSchema).safeParse(more);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new DaemonConfigError(
      `Invalid tokens file "${config.tokensFile}" at [${issue.path.join(".")}]`,
      issue.message,
      "correct the file",
    );
  }
  config.tokens.push(...parsed.data);
}

/** "URL, URL" → the URLs. */
function list(text: string): string[] {
  return text.split(",").map((e) => e.trim()).filter(Boolean);
}

/** KNITTER_MANAGER_FAIRNESS: budgets by role, merged over the file's field by field. */
function parseFairness(text: string): unknown {
  const example = `write e.g. '{"tenant":{"ratePerSecond":20}}'`;
  let given;
  try {
    given = JSON.parse(text);
  } catch (err) {
    throw new DaemonConfigError(
      "KNITTER_MANAGER_FAIRNESS is not valid JSON",
      (err as Error).message,
      example,
    );
  }
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    throw new DaemonConfigError(
      "KNITTER_MANAGER_FAIRNESS must be a JSON object of budgets by role",
      undefined,
      example,
    );
  }
  return given;
}

function parseListen(text: string): { hostname: string; port: number } {
  const m = text.match(/^(.*):(\d+)$/);
  if (!m) {
    throw new DaemonConfigError(
      `Listen address "${text}" must be HOST:PORT`,
      undefined,
      'e.g. "0.0.0.0:9527" or "[::1]:9527"',
    );
  }
  return { hostname: m[1].replace(/^\[(.*)\]$/, "$1") || "0.0.0.0", port: Number(m[2]) };
}

/** The VNI ranges as inclusive pairs, checked. */
export function vniRanges(config: ManagerConfig): [number, number][] {
  return config.vniRanges.map((text) => {
    const [s, e] = text.split("-").map(Number);
    if (s < 1 || e > 16777215 || s > e) {
      throw new DaemonConfigError(
        `VNI range "${text}" must lie within 1-16777215 with start <= end`,
        undefined,
        'correct vniRanges, e.g. "5000-16777215"',
      );
    }
    return [s, e];
  });
}

/** The ranges advertised networks must lie in (bgp.advertisableRanges), parsed and checked. */
export function advertisableRanges(config: Pick<ManagerConfig, "bgp">): Cidr[] {
  return (config.bgp?.advertisableRanges ?? []).map((text) => {
    const cidr = parseCidr(text);
    if ("error" in cidr) {
      throw new DaemonConfigError(
        `bgp.advertisableRanges: "${text}" is not a CIDR (${cidr.error})`,
        undefined,
        'write networks such as "10.0.0.0/8" or "fd00::/8"',
      );
    }
    return cidr;
  });
}

export function logLevel(config: ManagerConfig): Level {
  return isLevel(config.logLevel) ? config.logLevel : "info";
}

export type { TokenConfig };
