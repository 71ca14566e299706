/**
 * What both monitor benchmarks stand on: a manager (no nodes) with a public network "pods" and the
 * tenant "bench", and a stand-in Kubernetes API server with the namespace "bench" and a token for
 * the monitor.
 */
import { type MonitorConfig, MonitorConfigSchema } from "../../monitor/config.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { KubeApi } from "../support/kube_api.ts";
import { type Stack, startStack } from "../../devstack/stack.ts";

export async function monitorBenchWorld(
  cleanup: Cleanup,
  opts: { bookmarkMs: number },
): Promise<{ stack: Stack; api: KubeApi; token: string }> {
  const stack = await startStack({ cleanup, nodes: [] });
  const token = `monitor-${crypto.randomUUID()}`;
  const api = KubeApi.start({ tokens: { [token]: "monitor" }, bookmarkMs: opts.bookmarkMs });
  cleanup.defer(() => api.close());
  must(
    await stack.api("POST", "tenants/admin/networks", {
      name: "pods",
      cidr: "10.96.0.0/16",
      public: true,
    }),
    201,
  );
  must(await stack.api("PUT", "tenants/bench"), 201);
  api.create("namespaces", { metadata: { name: "bench" } });
  return { stack, api, token };
}

/** The monitor's defaults, as deployed, but for the probes' port, against this world. */
export async function defaultMonitorConfig(
  world: { stack: Stack; api: KubeApi; token: string },
): Promise<MonitorConfig> {
  const { stack, api, token } = world;
  return MonitorConfigSchema.parse({
    kubernetes: {
      kubeconfig: await api.writeKubeconfig(`${stack.dir}/monitor.kubeconfig`, token),
    },
    manager: { url: stack.managerUrl, token: stack.adminToken },
    health: { hostname: "127.0.0.1", port: 0 },
    logLevel: "error",
  });
}

export function must(r: { status: number; body: unknown }, status: number): void {
  if (r.status !== status) throw new Error(`${r.status}: ${JSON.stringify(r.body)}`);
}

/** Runs fn(0) … fn(n - 1), `concurrency` at a time: how the benchmarks make many pods quickly. */
export async function pool(
  n: number,
  fn: (i: number) => Promise<void>,
  concurrency = 64,
): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) await fn(next++);
  }));
}

/** Milliseconds as seconds with one decimal, for the benchmarks' tables. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
