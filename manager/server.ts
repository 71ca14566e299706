/** Wires a configuration into a running manager: store, services, HTTP(S) server. */
import { createLogger, type Logger, serveUnix } from "@knitter/common";
import { createApp } from "./app.ts";
import { connectionBudget, DEFAULT_GUARD, serveDirect, serveGuarded } from "./conn_guard.ts";
import { type FeedListener, recordSocketPort, serveFeedSockets } from "./feed_listener.ts";
import { TokenTable } from "./auth.ts";
import {
  advertisableRanges,
  DEFAULT_HISTORY_RETENTION_DAYS,
  DEFAULT_QUARANTINE_SECONDS,
  logLevel,
  type ManagerConfig,
  vniRanges,
} from "./config.ts";
import { ChangeFeed } from "./feed.ts";
import { Metrics } from "./metrics.ts";
import { type Ctx, newResolveCache, PoolRegistry } from "./service/context.ts";
import { ensureTenant } from "./service/tenants.ts";
import { sweepHistory } from "./service/history.ts";
import { scopeForeignPortKeys } from "./service/upgrade.ts";
import { ensureDefaultCluster } from "./service/clusters.ts";
import { EtcdFeed } from "./etcd_feed.ts";
import { EtcdStore } from "./store/etcd_store.ts";
import { describeStore, openStore } from "./store/open.ts";
import type { Store } from "./store/store.ts";

/** How often the manager deletes the holdings past the history's retention. */
const HISTORY_SWEEP_MS = 3_600_000;

/** The tenant that owns shared (public) networks. */
export const ADMIN_TENANT = "admin";

export function createContext(
  store: Store,
  config: Pick<ManagerConfig, "vniRanges" | "underlayMtu" | "bgp"> & {
    quarantineSeconds?: number;
    historyRetentionDays?: number;
  },
): Ctx {
  return {
    store,
    settings: {
      vniRanges: vniRanges(config as ManagerConfig),
      underlayMtu: config.underlayMtu,
      quarantineMs: (config.quarantineSeconds ?? 0) * 1000,
      historyMs: (config.historyRetentionDays ?? 0) * 86_400_000,
      advertisableRanges: advertisableRanges(config),
    },
    metrics: new Metrics(),
    pools: new PoolRegistry(store),
    cache: newResolveCache(),
    // On a shared store the feed is the store's own history, so that any replica can serve it.
    feed: store instanceof EtcdStore ? new EtcdFeed(store) : new ChangeFeed(),
  };
}

/**
 * What a start writes or mends before serving: a handful of keys, none per port, so that a start on
 * a million ports is as quick as on none (startup_test.ts, bench/startup_bench.ts).
 */
export async function prepareStore(ctx: Ctx, log: Logger): Promise<void> {
  await ensureTenant(ctx, ADMIN_TENANT);
  if (await ensureDefaultCluster(ctx)) log.info("the default cluster recorded (clusters are new)");
  const moved = await scopeForeignPortKeys(ctx);
  if (moved > 0) log.info("ports on public networks moved to tenant-scoped keys", { moved });
}

export interface RunningManager {
  url: string;
  finished: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startManager(config: ManagerConfig): Promise<RunningManager> {
  const log = createLogger("manager", logLevel(config));
  const store = await openStore(config.store);
  const ctx = createContext(store, {
    ...config,
    quarantineSeconds: config.quarantineSeconds ?? DEFAULT_QUARANTINE_SECONDS,
    historyRetentionDays: config.historyRetentionDays ?? DEFAULT_HISTORY_RETENTION_DAYS,
  });
  await prepareStore(ctx, log);
  const limits = config.limits ?? {};
  const app = createApp({
    ctx,
    tokens: new TokenTable(config.tokens),
    limits,
    fairness: config.fairness,
    prometheusUrl: config.console?.prometheusUrl,
    onInternalError: (err) =>
      log.error("internal error", { error: String((err as Error)?.stack ?? err) }),
    onClientGone: (what) => log.info("client gone mid-request", what),
  });
  const tls = config.tls
    ? {
      cert: await Deno.readTextFile(config.tls.certFile),
      key: await Deno.readTextFile(config.tls.keyFile),
    }
    : {};
  // Behind the connection guard, a client that trickles its request header is cut off. With
  // headerTimeoutMs 0 a proxy in front does that, and requests go straight to Deno.serve.
  const tlsFiles = config.tls ? tls as { cert: string; key: string } : undefined;
  const guardLimits = { ...DEFAULT_GUARD, ...limits };
  // One budget of new connections per address for both ports.
  const budget = connectionBudget(guardLimits);
  const onSlowClient = (what: { remote: string; reason: string }) =>
    log.info("slow client disconnected", what);
  const onRefusedConnection = () => ctx.metrics.refusedConnections.inc();
  // Up before the API, which names its port: no follower is told of it before it listens.
  const feedSockets = startFeedSockets(config, {
    tls: tlsFiles,
    limits: guardLimits,
    budget,
    handler: (req) => app.fetch(req),
    onSlowClient,
    onRefusedConnection,
  });
  if (feedSockets) recordSocketPort(ctx, feedSockets.addr.port);
  const server = await serveApi(config, app.fetch, {
    tls: tlsFiles,
    limits,
    budget,
    onSlowClient,
    onRefusedConnection,
  }).catch(async (err) => {
    // The API's port taken, say: the feed's is let go too, so that nothing is left listening.
    await feedSockets?.shutdown();
    throw err;
  });
  const { hostname, port } = server.addr;
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  const url = `${config.tls ? "https" : "http"}://${host}:${port}`;
  const local = config.listen.socket ? await serveUnix(config.listen.socket, app.fetch) : undefined;
  // Holdings past the history's retention go hourly too, not only as releases prune a few each.
  const sweep = () =>
    sweepHistory(ctx).then(
      (n) => n > 0 && log.info("address history: expired holdings deleted", { deleted: n }),
      (err) => log.warn("address history: sweep failed", { error: String(err) }),
    );
  const sweeper = setInterval(sweep, HISTORY_SWEEP_MS);
  sweep();
  log.info("manager ready", {
    url,
    socket: config.listen.socket,
    feedSocketPort: feedSockets?.addr.port,
    store: describeStore(config.store),
    tokens: config.tokens.length,
  });
  return {
    url,
    finished: server.finished,
    async shutdown() {
      clearInterval(sweeper);
      ctx.feed.close();
      await Promise.all([server.shutdown(), local?.shutdown(), feedSockets?.shutdown()]);
      store.close();
    },
  };
}

/** The feed's socket listener, when the configuration gives it a port. */
function startFeedSockets(
  config: ManagerConfig,
  options: Omit<Parameters<typeof serveFeedSockets>[0], "hostname" | "port">,
): FeedListener | undefined {
  const port = config.listen.feedSocketPort ?? 0;
  if (port === 0) return undefined;
  return serveFeedSockets({ hostname: config.listen.hostname, port, ...options });
}

/** The API's listener: behind the connection guard, or straight on Deno.serve (headerTimeoutMs 0). */
function serveApi(
  config: ManagerConfig,
  handler: Parameters<typeof serveGuarded>[1],
  options: Omit<Parameters<typeof serveGuarded>[0], "hostname" | "port">,
) {
  const { hostname, port } = config.listen;
  return options.limits?.headerTimeoutMs === 0
    ? serveDirect(hostname, port, options.tls, handler)
    : serveGuarded({ hostname, port, ...options }, handler);
}
