import assert from "node:assert/strict";
import {
  componentRegistry,
  conventionProblems,
  Counter,
  Histogram,
  metricValue,
  readGauge,
  totalsCounter,
} from "./metrics.ts";
import { parseExposition, samplesOf } from "./metrics_text.ts";

Deno.test("metrics: a component registry renders counters, histograms and gauges read at scrape time", async () => {
  const registry = componentRegistry();
  const calls = new Counter({
    name: "knitter_agent_things_total",
    help: "Things.",
    labelNames: ["kind"],
    registers: [registry],
  });
  const took = new Histogram({
    name: "knitter_agent_thing_duration_seconds",
    help: "Time.",
    labelNames: ["kind"],
    buckets: [0.1, 1],
    registers: [registry],
  });
  const stats = { done: 3 };
  totalsCounter(registry, {
    name: "knitter_agent_done_total",
    help: "Done.",
    read: () => [{ labels: {}, value: stats.done }],
  });
  readGauge(registry, {
    name: "knitter_agent_level_entries",
    help: "Level.",
    labelNames: ["where"],
    read: () => Promise.resolve([{ labels: { where: 'a"b' }, value: 7 }]),
  });
  calls.inc({ kind: "x" }, 2);
  took.observe({ kind: "x" }, 0.5);
  stats.done = 5;

  const f = parseExposition(await registry.metrics());
  assert.equal(f.get("knitter_agent_things_total")?.type, "counter");
  assert.equal(samplesOf(f, "knitter_agent_things_total", { kind: "x" })[0].value, 2);
  assert.equal(f.get("knitter_agent_thing_duration_seconds")?.type, "histogram");
  const buckets = samplesOf(f, "knitter_agent_thing_duration_seconds_bucket", { kind: "x" });
  assert.deepEqual(buckets.map((b) => [b.labels.le, b.value]), [["0.1", 0], ["1", 1], ["+Inf", 1]]);
  assert.equal(samplesOf(f, "knitter_agent_thing_duration_seconds_count")[0].value, 1);
  assert.equal(samplesOf(f, "knitter_agent_done_total")[0].value, 5, "read when scraped");
  assert.equal(samplesOf(f, "knitter_agent_level_entries")[0].labels.where, 'a"b');
  assert.equal(await metricValue(calls, { kind: "x" }), 2);
  assert.equal(await metricValue(calls, { kind: "y" }), 0);
  assert.deepEqual(await conventionProblems(registry), []);
});

Deno.test("metrics: two registries of one component never collide (tests run several in a process)", async () => {
  for (let i = 0; i < 2; i++) {
    const registry = componentRegistry();
    new Counter({ name: "knitter_manager_x_total", help: "x", registers: [registry] }).inc();
    assert.match(await registry.metrics(), /^knitter_manager_x_total 1$/m);
  }
});

Deno.test("metrics: conventionProblems names each name that breaks the convention", async () => {
  const registry = componentRegistry();
  new Counter({ name: "knitter_monitor_restarts", help: "x", registers: [registry] });
  new Histogram({ name: "knitter_monitor_latency", help: "x", registers: [registry] });
  readGauge(registry, { name: "knitter_monitor_things_total", help: "x", read: () => [] });
  readGauge(registry, { name: "monitor_age_seconds", help: "x", read: () => [] });
  const problems = await conventionProblems(registry);
  assert.deepEqual(problems, [
    "knitter_monitor_restarts: a counter must end in _total",
    "knitter_monitor_latency: a histogram must end in its unit, _seconds or _bytes",
    "knitter_monitor_things_total: only counters end in _total",
    "knitter_monitor_things_total: a gauge must end in its unit",
    "monitor_age_seconds: not knitter_<component>_<what> in lowercase snake case",
  ]);
});

Deno.test("metrics text: labels with escapes, +Inf, and a line that is not the format", () => {
  const f = parseExposition(
    [
      "# HELP knitter_agent_a_seconds A.",
      "# TYPE knitter_agent_a_seconds histogram",
      'knitter_agent_a_seconds_bucket{le="+Inf",op="x\\\\y\\"z"} 3',
      "knitter_agent_a_seconds_sum 1.5",
      "knitter_agent_a_seconds_count 3",
      "untyped_thing 4 1700000000000",
      "knitter_agent_b_seconds Nan",
      "knitter_agent_c_seconds -Inf",
    ].join("\n"),
  );
  assert.equal(f.get("knitter_agent_a_seconds")?.samples.length, 3);
  assert.equal(samplesOf(f, "knitter_agent_a_seconds_bucket")[0].labels.op, 'x\\y"z');
  assert.equal(samplesOf(f, "untyped_thing")[0].value, 4);
  assert.ok(Number.isNaN(samplesOf(f, "knitter_agent_b_seconds")[0].value));
  assert.equal(samplesOf(f, "knitter_agent_c_seconds")[0].value, -Infinity);
  assert.throws(() => parseExposition("knitter_x{a=b} 1"), /Cannot parse line 1/);
});
