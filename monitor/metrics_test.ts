import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { conventionProblems } from "@knitter/common/metrics";
import { parseExposition, samplesOf } from "@knitter/common/metrics_text";
import { MonitorMetrics, type WatchSource } from "./metrics.ts";
import { WorkQueue } from "./work_queue.ts";

const EXPECTED: Record<string, string> = {
  knitter_monitor_watch_age_seconds: "gauge",
  knitter_monitor_watch_restarts_total: "counter",
  knitter_monitor_watch_lists_total: "counter",
  knitter_monitor_watch_events_total: "counter",
  knitter_monitor_feed_lag_seconds: "gauge",
  knitter_monitor_reconcile_errors_total: "counter",
  knitter_monitor_queue_depth_keys: "gauge",
  knitter_monitor_ports_released_total: "counter",
  knitter_monitor_reclaimed_ports_total: "counter",
  knitter_monitor_reclaim_runs_total: "counter",
};

function watch(what: string, aliveMsAgo: number): WatchSource {
  return {
    what,
    errors: 1,
    restarts: 2,
    expired: 3,
    lists: 7,
    eventCounts: new Map([["ADDED", 4], ["BOOKMARK", 9]]),
    health: () => ({ lastAliveMsAgo: aliveMsAgo, synced: true }),
  };
}

Deno.test("monitor metrics: every name and type, within the naming convention, read from the parts when scraped", async () => {
  const tracker = { released: 2 };
  const reclaimer = { runs: 3, reclaimed: 1 };
  const log = createLogger("test", "error");
  const failing = new WorkQueue("pods", () => Promise.reject(new Error("no")), 1, log);
  const m = new MonitorMetrics({
    watches: [watch("pods", 1500), watch("namespaces", 250)],
    queues: [failing],
    tracker,
    reclaimer,
    feed: () => ({ lastAliveMsAgo: 3000 }),
  });
  failing.add("acme/web");
  await failing.idle();
  failing.stop();
  tracker.released = 5;

  const f = parseExposition(await m.render());
  assert.deepEqual(Object.fromEntries([...f.values()].map((x) => [x.name, x.type])), EXPECTED);
  assert.deepEqual(await conventionProblems(m.registry), []);
  const one = (name: string, labels: Record<string, string> = {}) => {
    const s = samplesOf(f, name, labels);
    assert.equal(s.length, 1, `${name} ${JSON.stringify(labels)}`);
    return s[0].value;
  };
  assert.equal(one("knitter_monitor_watch_age_seconds", { resource: "pods" }), 1.5);
  assert.equal(one("knitter_monitor_watch_age_seconds", { resource: "namespaces" }), 0.25);
  assert.equal(
    one("knitter_monitor_watch_restarts_total", { resource: "pods", reason: "dead" }),
    2,
  );
  assert.equal(
    one("knitter_monitor_watch_restarts_total", { resource: "pods", reason: "error" }),
    1,
  );
  assert.equal(
    one("knitter_monitor_watch_restarts_total", { resource: "pods", reason: "expired" }),
    3,
  );
  assert.equal(one("knitter_monitor_watch_lists_total", { resource: "pods" }), 7);
  assert.equal(one("knitter_monitor_watch_events_total", { resource: "pods", type: "ADDED" }), 4);
  // Types not seen yet are there at 0: a series born at 1 would hide that event from rate().
  for (const type of ["MODIFIED", "DELETED"]) {
    assert.equal(one("knitter_monitor_watch_events_total", { resource: "pods", type }), 0, type);
  }
  assert.equal(one("knitter_monitor_reconcile_errors_total", { queue: "pods" }), 1);
  assert.equal(one("knitter_monitor_ports_released_total"), 5);
  assert.equal(one("knitter_monitor_reclaimed_ports_total"), 1);
  assert.equal(one("knitter_monitor_reclaim_runs_total"), 3);
  assert.equal(one("knitter_monitor_feed_lag_seconds"), 3);
});
