/**
 * Prometheus metrics for the manager, the agent and the monitor, on the maintained client
 * `prom-client`. Each component makes one registry (`componentRegistry`) and registers its metrics
 * there, never in prom-client's global one, so that several components or test instances in one
 * process never collide.
 *
 * The naming convention, the same in every component (`conventionProblems` checks it):
 *
 * - `knitter_<component>_<what>`: lowercase, words joined by `_`, the component (`manager`,
 *   `agent`, `monitor`) second, so a dashboard query says where a figure comes from;
 * - the unit last, plural and in base units: `_seconds`, `_bytes`, or what is counted
 *   (`_addresses`, `_flows`, `_entries`); counters end in `_total`, and only counters do;
 * - a histogram measures a unit, so its name ends in `_seconds` or `_bytes`;
 * - capacity and usage are separate gauges (`..._capacity_addresses`, `..._used_addresses`), not
 *   one gauge with a `state` label, so that `used / capacity` is a plain division;
 * - labels name bounded sets (a CNI command, a code, a table, a resource), never a pod or port;
 *   the values known in advance are exported at 0 from the start, since a series born at its
 *   first increment hides that increment from Prometheus's rate() and increase().
 *
 * @module
 */
import { Counter, Gauge, Histogram, type Metric, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

/** The Content-Type of the text exposition format prom-client writes. */
export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** Histogram buckets in seconds, shared so that dashboards compare like with like. */
export const SECONDS_BUCKETS = {
  /** An HTTP request answered by the manager. */
  request: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  /** A CNI call on a node: manager round trips, `ip` and OVS included. */
  cni: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  /** A flow computation and its bundle (a full resync of 100k flows takes seconds). */
  flowSync: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
};

/** A registry of one component's metrics (its metric names say which: `knitter_<component>_`). */
export function componentRegistry(): Registry {
  return new Registry();
}

/** One labelled value of a running total or a level, read when scraped. */
export interface Sample<L extends string = string> {
  labels: Partial<Record<L, string | number>>;
  value: number;
}

/**
 * A counter whose values are running totals kept elsewhere (a `stats` object), read at scrape
 * time: the component counts as it always did, and nothing has to be told twice.
 */
export function totalsCounter<L extends string>(
  registry: Registry,
  opts: { name: string; help: string; labelNames?: readonly L[]; read(): Sample<L>[] },
): Counter<L> {
  const { read } = opts;
  return new Counter<L>({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames ?? [],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of read()) this.inc(s.labels, s.value);
    },
  });
}

/** A gauge whose values are read at scrape time. */
export function readGauge<L extends string>(
  registry: Registry,
  opts: {
    name: string;
    help: string;
    labelNames?: readonly L[];
    read(): Sample<L>[] | Promise<Sample<L>[]>;
  },
): Gauge<L> {
  const { read } = opts;
  return new Gauge<L>({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames ?? [],
    registers: [registry],
    async collect() {
      const samples = await read();
      this.reset();
      for (const s of samples) this.set(s.labels, s.value);
    },
  });
}

/** The value of one labelled series of a counter or gauge (0 when it has none yet). */
export async function metricValue(
  metric: Metric,
  labels: Record<string, string | number> = {},
): Promise<number> {
  const { values } = await metric.get();
  const want = Object.entries(labels);
  const hit = values.find((v) =>
    Object.keys(v.labels).length === want.length &&
    want.every(([k, x]) => String(v.labels[k]) === String(x))
  );
  return hit?.value ?? 0;
}

const UNITS =
  /_(seconds|bytes|addresses|flows|entries|ports|events|keys|info|ratio|requests|sessions|prefixes)$/;

/** The names of `registry` that break the convention above, each with why; empty when none. */
export async function conventionProblems(registry: Registry): Promise<string[]> {
  const problems: string[] = [];
  for (const m of await registry.getMetricsAsJSON()) {
    const { name, type } = m as unknown as { name: string; type: string };
    const why = (s: string) => problems.push(`${name}: ${s}`);
    if (!/^knitter_(manager|agent|monitor)_[a-z0-9]+(_[a-z0-9]+)*$/.test(name)) {
      why("not knitter_<component>_<what> in lowercase snake case");
    }
    if (type === "counter" && !name.endsWith("_total")) why("a counter must end in _total");
    if (type !== "counter" && name.endsWith("_total")) why("only counters end in _total");
    if (type === "histogram" && !/_(seconds|bytes)$/.test(name)) {
      why("a histogram must end in its unit, _seconds or _bytes");
    }
    if (type === "gauge" && !UNITS.test(name)) why("a gauge must end in its unit");
  }
  return problems;
}
