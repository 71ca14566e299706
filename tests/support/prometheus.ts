/**
 * Debian's real `prometheus` for tests: started on a free loopback port with a config dir and a
 * storage dir of its own (stopped by pid at cleanup), its scrape jobs derived from what
 * deploy/monitoring/ ships for the Prometheus operator (one static job per ServiceMonitor or
 * PodMonitor: the same job name, path and bearer token), and its HTTP API.
 */
import { parseAllDocuments } from "yaml";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { waitFor } from "../../devstack/stack.ts";
import { RULES_FILE } from "../../deploy/prometheus_rule.ts";
import { freePorts } from "./etcd.ts";

const MONITORING = new URL("../../deploy/monitoring/", import.meta.url).pathname;

/** A scrape job as the operator would make it of one ServiceMonitor or PodMonitor. */
export interface MonitorJob {
  /** The job label: the value of the monitor's `jobLabel` on what it selects, else its name. */
  job: string;
  /** The object the monitor is for: knitter-manager, knitter-agent, knitter-monitor. */
  name: string;
  path: string;
  /** The endpoint sends a bearer token (the manager's, of scope metrics). */
  bearer: boolean;
}

// deno-lint-ignore no-explicit-any
type Obj = any;

/** The jobs of deploy/monitoring/servicemonitor.yaml. */
export async function monitorJobs(): Promise<MonitorJob[]> {
  const text = await Deno.readTextFile(`${MONITORING}servicemonitor.yaml`);
  return parseAllDocuments(text).map((d) => d.toJS() as Obj).map((o: Obj) => {
    const ep = o.kind === "ServiceMonitor" ? o.spec.endpoints[0] : o.spec.podMetricsEndpoints[0];
    const jobLabel = o.spec.jobLabel as string | undefined;
    return {
      job: jobLabel ? o.spec.selector.matchLabels[jobLabel] : o.metadata.name,
      name: o.metadata.name,
      path: ep.path,
      bearer: ep.authorization?.type === "Bearer",
    };
  });
}

/** Where the test's stack serves one job's targets. */
export interface StaticTargets {
  /** host:port each, on the loopback. */
  targets: { address: string; labels?: Record<string, string> }[];
  /** The token, for a job whose monitor sends one. */
  token?: string;
}

/**
 * A prometheus.yml (JSON is YAML) with one static job per shipped monitor, scraped every
 * `interval` instead of the monitors' 30 s so that a test sees samples within seconds, and the
 * plain rules file of deploy/monitoring/ loaded.
 */
export function prometheusConfig(
  jobs: MonitorJob[],
  where: Record<string, StaticTargets>,
  tokenDir: string,
  interval = "1s",
): { config: unknown; tokenFiles: Record<string, string> } {
  const tokenFiles: Record<string, string> = {};
  const scrape_configs = jobs.map((j) => {
    const w = where[j.name];
    if (!w) throw new Error(`no targets for the shipped job ${j.name}`);
    if (j.bearer && !w.token) throw new Error(`job ${j.name} needs a token`);
    const auth = j.bearer ? { type: "Bearer", credentials_file: `${tokenDir}/${j.name}` } : null;
    if (j.bearer) tokenFiles[`${tokenDir}/${j.name}`] = w.token!;
    return {
      job_name: j.job,
      metrics_path: j.path,
      scrape_interval: interval,
      ...(auth ? { authorization: auth } : {}),
      static_configs: w.targets.map((t) => ({ targets: [t.address], labels: t.labels ?? {} })),
    };
  });
  return {
    config: {
      global: { scrape_interval: interval, evaluation_interval: interval },
      rule_files: [RULES_FILE],
      scrape_configs,
    },
    tokenFiles,
  };
}

export interface Prometheus {
  url: string;
  /** An instant query's result vector (or matrix/scalar as given), failing on an API error. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  /** GET /api/v1/PATH's `data`. */
  get(path: string): Promise<Obj>;
}

/**
 * Starts prometheus with `config`; resolves once it is ready. Stopped (by pid) at cleanup. `port`:
 * a loopback port chosen before (something told its URL first); else a free one.
 */
export async function startPrometheus(
  cleanup: Cleanup,
  build: (dir: string) => ReturnType<typeof prometheusConfig>,
  port?: number,
): Promise<Prometheus> {
  const dir = await cleanup.tempDir();
  const { config, tokenFiles } = build(dir);
  for (const [path, token] of Object.entries(tokenFiles)) await Deno.writeTextFile(path, token);
  await Deno.writeTextFile(`${dir}/prometheus.yml`, JSON.stringify(config, null, 2));
  port ??= (await freePorts(1))[0];
  const url = `http://127.0.0.1:${port}`;
  const log = await Deno.open(`${dir}/prometheus.log`, { create: true, write: true });
  const child = new Deno.Command("prometheus", {
    args: [
      `--config.file=${dir}/prometheus.yml`,
      `--storage.tsdb.path=${dir}/data`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  child.stderr.pipeTo(log.writable).catch(() => {});
  cleanup.pid(child.pid);
  let exited = false;
  child.status.then(() => exited = true);
  const ready = () =>
    fetch(`${url}/-/ready`).then(async (r) => (await r.body?.cancel(), r.ok), () => false);
  try {
    await waitFor(`prometheus at ${url}`, async () => {
      if (exited) throw new Error("prometheus exited");
      return await ready();
    }, 30_000);
  } catch (err) {
    const text = await Deno.readTextFile(`${dir}/prometheus.log`).catch(() => "");
    throw new Error(`${(err as Error).message}; its log:\n${text.slice(-2000)}`);
  }
  const get = async (path: string) => {
    const r = await fetch(`${url}/api/v1/${path}`);
    const body = await r.json();
    if (body.status !== "success") {
      throw new Error(`prometheus ${path}: ${body.errorType}: ${body.error}`);
    }
    return body.data;
  };
  return {
    url,
    get,
    async query(expr) {
      const data = await get(`query?query=${encodeURIComponent(expr)}`);
      return data.resultType === "vector" ? data.result : [{ metric: {}, value: data.result }];
    },
  };
}
