/**
 * The monitor's Prometheus metrics (naming: ../common/metrics.ts), served at `/metrics` on its
 * probe listener (config `health`). All of them are read when scraped, from the running totals and
 * states the watches, queues, pod tracker and reclaimer keep anyway: nothing is told twice.
 */
import { componentRegistry, readGauge, totalsCounter } from "@knitter/common/metrics";

/** The types of watch events (each exported from the start, at 0 until one comes). */
export const WATCH_EVENT_TYPES = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"] as const;

/** What the metrics read of a watch (an Informer). */
export interface WatchSource {
  /** The resource: pods, namespaces, networks, ipgroups. */
  what: string;
  errors: number;
  restarts: number;
  expired: number;
  lists: number;
  /** Watch events applied, by type (ADDED, MODIFIED, DELETED, BOOKMARK). */
  eventCounts: ReadonlyMap<string, number>;
  health(): { lastAliveMsAgo: number; synced: boolean };
}

/** What the metrics read of a work queue. */
export interface QueueSource {
  name: string;
  size: number;
  /** Keys whose reconcile failed (and were queued again). */
  failed: number;
}

export interface MonitorMetricSources {
  watches: readonly WatchSource[];
  queues: readonly QueueSource[];
  /** Ports released since start, for a deleted pod or by the leak reclaim. */
  tracker: { released: number };
  /** Leak reclaim passes run, and the ports they released. */
  reclaimer: { runs: number; reclaimed: number };
  /** The manager's change feed as the port index follows it; absent: not exported. */
  feed?: () => { lastAliveMsAgo: number };
}

export class MonitorMetrics {
  readonly registry = componentRegistry();

  constructor(s: MonitorMetricSources) {
    const r = this.registry;
    const perWatch = (value: (w: WatchSource) => number) =>
      s.watches.map((w) => ({ labels: { resource: w.what }, value: value(w) }));
    readGauge(r, {
      name: "knitter_monitor_watch_age_seconds",
      help: "Seconds since a watch last showed a sign of life (an event, a bookmark, its clean " +
        "end, or a fresh list), by resource; past the watch deadline it is restarted.",
      labelNames: ["resource"] as const,
      read: () => perWatch((w) => w.health().lastAliveMsAgo / 1000),
    });
    totalsCounter(r, {
      name: "knitter_monitor_watch_restarts_total",
      help: "Watches started again with a fresh list, by resource and reason (dead: no sign of " +
        "life by the deadline, deaf to changes, or found behind; error: a failed list or watch; " +
        "expired: 410 Gone).",
      labelNames: ["resource", "reason"] as const,
      read: () =>
        s.watches.flatMap((w) => [
          { labels: { resource: w.what, reason: "dead" }, value: w.restarts },
          { labels: { resource: w.what, reason: "error" }, value: w.errors },
          { labels: { resource: w.what, reason: "expired" }, value: w.expired },
        ]),
    });
    totalsCounter(r, {
      name: "knitter_monitor_watch_lists_total",
      help: "Full lists made, by resource (the first, then one per restart).",
      labelNames: ["resource"] as const,
      read: () => perWatch((w) => w.lists),
    });
    totalsCounter(r, {
      name: "knitter_monitor_watch_events_total",
      help: "Watch events applied, by resource and type (ADDED, MODIFIED, DELETED, BOOKMARK).",
      labelNames: ["resource", "type"] as const,
      read: () =>
        s.watches.flatMap((w) => {
          const counts = new Map<string, number>(WATCH_EVENT_TYPES.map((t) => [t, 0]));
          for (const [type, n] of w.eventCounts) counts.set(type, n);
          return [...counts].map(([type, value]) => ({
            labels: { resource: w.what, type },
            value,
          }));
        }),
    });
    readGauge(r, {
      name: "knitter_monitor_feed_lag_seconds",
      help: "Seconds since the manager's change feed last answered the monitor (events, an " +
        "empty long poll, or a fresh list): what it knows of the ports is at most this old.",
      read: () => (s.feed ? [{ labels: {}, value: s.feed().lastAliveMsAgo / 1000 }] : []),
    });
    totalsCounter(r, {
      name: "knitter_monitor_reconcile_errors_total",
      help: "Reconciles that failed and were queued again, by queue.",
      labelNames: ["queue"] as const,
      read: () => s.queues.map((q) => ({ labels: { queue: q.name }, value: q.failed })),
    });
    readGauge(r, {
      name: "knitter_monitor_queue_depth_keys",
      help: "Keys waiting or being reconciled, by queue.",
      labelNames: ["queue"] as const,
      read: () => s.queues.map((q) => ({ labels: { queue: q.name }, value: q.size })),
    });
    totalsCounter(r, {
      name: "knitter_monitor_ports_released_total",
      help: "Ports released at the manager: of deleted pods, and by the leak reclaim.",
      read: () => [{ labels: {}, value: s.tracker.released }],
    });
    totalsCounter(r, {
      name: "knitter_monitor_reclaimed_ports_total",
      help: "Ports the leak reclaim released (their pod gone, as a fresh read confirmed).",
      read: () => [{ labels: {}, value: s.reclaimer.reclaimed }],
    });
    totalsCounter(r, {
      name: "knitter_monitor_reclaim_runs_total",
      help: "Leak reclaim passes run.",
      read: () => [{ labels: {}, value: s.reclaimer.runs }],
    });
  }

  /** The registry's text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
