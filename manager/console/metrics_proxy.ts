/**
 * The console's charts over time: pool usage and CNI ADD latency, read from Prometheus's
 * `query_range` when the manager is configured with its URL (`console.prometheusUrl`). The page
 * names a chart, never a query: the manager writes the PromQL, so a tenant's token gets its own
 * networks' pools only (the manager's gauges carry the network's tenant), and the CNI latency of
 * every node together (no node named). Without a URL the answer says the metrics are not
 * configured, and the page says so.
 */
import type { Principal } from "../auth.ts";
import { ApiError } from "../errors.ts";

/** One line of a chart: its name and its points, [unix seconds, value]. */
export interface Series {
  name: string;
  points: [number, number][];
}

export interface ChartAnswer {
  configured: boolean;
  chart?: string;
  /** The range asked, in unix seconds: the chart's time axis. */
  start?: number;
  end?: number;
  unit?: string;
  series?: Series[];
  /** Where to set the URL, when not configured. */
  hint?: string;
}

/** A chart: its unit, and its queries (each a line per series) for a principal and a rate window. */
interface Chart {
  unit: string;
  queries(principal: Principal, window: string): { expr: string; name: (m: Labels) => string }[];
}

type Labels = Record<string, string>;

/** Several replicas of the manager report the same pools: one value per network. */
const CHARTS: Record<string, Chart> = {
  pools: {
    unit: "addresses in use",
    queries: (p) => [{
      expr: `max by (tenant, network) (knitter_manager_pool_used_addresses${tenantSelector(p)})`,
      name: (m) => `${m.tenant}/${m.network}`,
    }],
  },
  "cni-add": {
    unit: "ms",
    queries: (_p, window) =>
      [0.5, 0.99].map((q) => ({
        expr: `1000 * histogram_quantile(${q}, sum by (le) (rate(` +
          `knitter_agent_cni_duration_seconds_bucket{command="ADD"}[${window}])))`,
        name: () => `ADD p${q * 100}`,
      })),
  },
};

export const CHART_NAMES = Object.keys(CHARTS);

/** A tenant's own networks only; an admin's every network. */
function tenantSelector(p: Principal): string {
  if (p.scope === "admin") return "";
  if (p.scope !== "tenant") throw new Error(`no chart for ${p.scope} tokens`);
  return `{tenant="${p.tenant.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"}`;
}

/** Points per line: enough for a chart, few enough for any range. */
const POINTS = 120;

/**
 * The chart `name` over the last `minutes`, as `principal` may see it, from the Prometheus at
 * `url`; `{configured: false}` without one.
 */
export async function chartOf(
  url: string | undefined,
  principal: Principal,
  name: string,
  minutes: number,
  now = Date.now() / 1000,
): Promise<ChartAnswer> {
  if (!url) {
    return {
      configured: false,
      hint:
        'The manager has no Prometheus to read: set "console": {"prometheusUrl": "http://..."} in its configuration (or KNITTER_MANAGER_PROMETHEUS_URL)',
    };
  }
  const chart = CHARTS[name];
  const step = Math.max(1, Math.ceil((minutes * 60) / POINTS));
  // A rate needs a few samples in its window, whatever the scrape interval.
  const window = `${Math.max(60, step * 4)}s`;
  const series: Series[] = [];
  for (const q of chart.queries(principal, window)) {
    for (const r of await queryRange(url, q.expr, now - minutes * 60, now, step)) {
      const points = r.values.map(([t, v]) => [t, Number(v)] as [number, number])
        .filter(([, v]) => Number.isFinite(v));
      series.push({ name: q.name(r.metric), points });
    }
  }
  series.sort((a, b) => a.name.localeCompare(b.name));
  return {
    configured: true,
    chart: name,
    start: now - minutes * 60,
    end: now,
    unit: chart.unit,
    series,
  };
}

interface RangeResult {
  metric: Labels;
  values: [number, string][];
}

/** Prometheus's range query; a Prometheus that does not answer, or refuses, is a 502. */
async function queryRange(
  url: string,
  expr: string,
  start: number,
  end: number,
  step: number,
): Promise<RangeResult[]> {
  const params = new URLSearchParams({
    query: expr,
    start: start.toFixed(3),
    end: end.toFixed(3),
    step: String(step),
  });
  const where = `${url.replace(/\/$/, "")}/api/v1/query_range`;
  let res: Response;
  try {
    res = await fetch(`${where}?${params}`, { signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw unavailable(url, (err as Error).message);
  }
  const body = await res.json().catch(() => null);
  if (!res.ok || body?.status !== "success") {
    throw unavailable(url, body?.error ?? `HTTP ${res.status}`);
  }
  return body.data.result;
}

function unavailable(url: string, why: string): ApiError {
  return new ApiError(
    "metrics_unavailable",
    `Prometheus at ${url} did not answer the console's query (${why}): check that it runs and that console.prometheusUrl names it`,
  );
}
