/**
 * Metrics across the components, on a real stack: a manager, a simulated node whose agent runs in
 * Kubernetes mode (its probe listener on the node's loopback, as deployed), the stand-in API
 * server and the monitor. A pod is attached and detached through the real CNI plugin; then the
 * manager's, the agent's and the monitor's /metrics are scraped over HTTP and parsed: the ADD and
 * the DEL are in the agent's histogram, the port in the manager's counters and pool gauges, the
 * pod's watch events in the monitor's, and every metric the Grafana dashboard queries is exported
 * by one of them.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { type MetricFamily, parseExposition, samplesOf } from "@knitter/common/metrics_text";
import { dashboardMetrics } from "../deploy/dashboard.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  AGENT_HEALTH_PORT,
  DEFAULT_NETWORK,
  eventually,
  startKubeCluster,
} from "./support/kube_cluster.ts";

type Families = Map<string, MetricFamily>;

/** The one sample of `name` with these labels (fails when there is none or several). */
function value(f: Families, name: string, labels: Record<string, string> = {}): number {
  const found = samplesOf(f, name, labels);
  assert.equal(found.length, 1, `one ${name} ${JSON.stringify(labels)}: ${JSON.stringify(found)}`);
  return found[0].value;
}

/** Whether a family of `families` exports `name` (a histogram's series by their family). */
function exports(families: Families, name: string): boolean {
  if (families.has(name)) return true;
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return base !== name && families.get(base)?.type === "histogram";
}

Deno.test("metrics: a CNI ADD and DEL on a real stack show in the agent's histogram; manager, agent and monitor serve /metrics and export every metric the dashboard queries", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  const monitor = await k.startMonitor();
  k.namespace("acme");

  // The agent's probe listener is on its node's loopback (each node is a netns of its own).
  const scrapeAgent = async () => {
    const r = await run(
      ["curl", "-sS", "-f", `http://127.0.0.1:${AGENT_HEALTH_PORT}/metrics`],
      { netns: n1.sim.netns },
    );
    return parseExposition(r.stdout);
  };
  const before = await scrapeAgent();
  const addsBefore = samplesOf(before, "knitter_agent_cni_duration_seconds_count", {
    command: "ADD",
  })[0]?.value ?? 0;

  const web = await k.pod(n1, { namespace: "acme", name: "web" });
  const added = await web.cni.add();
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const afterAdd = await scrapeAgent();
  assert.equal(
    value(afterAdd, "knitter_agent_cni_duration_seconds_count", { command: "ADD" }),
    addsBefore + 1,
    "the ADD is counted",
  );
  const inf = value(afterAdd, "knitter_agent_cni_duration_seconds_bucket", {
    command: "ADD",
    le: "+Inf",
  });
  assert.equal(inf, addsBefore + 1);
  assert.ok(value(afterAdd, "knitter_agent_cni_duration_seconds_sum", { command: "ADD" }) > 0);
  assert.deepEqual(samplesOf(afterAdd, "knitter_agent_cni_errors_total", { command: "ADD" }), []);
  // The pod's port has flows now: classification, anti-spoofing, forwarding.
  for (const name of ["CLASSIFY", "SPOOF", "FORWARD"]) {
    assert.ok(value(afterAdd, "knitter_agent_installed_flows", { name }) > 1, name);
  }
  assert.ok(
    value(afterAdd, "knitter_agent_flow_sync_duration_seconds_count", { result: "ok" }) >= 1,
  );
  assert.ok(value(afterAdd, "knitter_agent_feed_lag_seconds") >= 0);

  const deleted = await web.cni.del();
  assert.equal(deleted.code, 0, `DEL: ${JSON.stringify(deleted.out)} ${deleted.stderr}`);
  const agent = await scrapeAgent();
  assert.equal(value(agent, "knitter_agent_cni_duration_seconds_count", { command: "DEL" }), 1);
  assert.equal(
    value(agent, "knitter_agent_cni_duration_seconds_count", { command: "ADD" }),
    addsBefore + 1,
  );

  // The manager: the port's allocation and release, the default network's pool.
  const res = await fetch(`${k.stack.managerUrl}/metrics`, {
    headers: { authorization: `Bearer ${k.stack.adminToken}` },
  });
  assert.equal(res.status, 200);
  const manager = parseExposition(await res.text());
  assert.ok(value(manager, "knitter_manager_allocations_total", { kind: "ip" }) >= 1);
  assert.ok(value(manager, "knitter_manager_releases_total", { kind: "ip" }) >= 1);
  const pool = { tenant: "admin", network: DEFAULT_NETWORK.name };
  assert.equal(value(manager, "knitter_manager_pool_capacity_addresses", pool), 253);
  // Released: in quarantine (the stack's manager keeps the default), no longer used.
  assert.equal(value(manager, "knitter_manager_pool_used_addresses", pool), 0);
  assert.equal(value(manager, "knitter_manager_pool_quarantined_addresses", pool), 1);

  // The monitor: the pod's watch events, each watch's age.
  const scrapeMonitor = async () => {
    const r = await fetch(`${monitor.healthUrl}/metrics`);
    assert.equal(r.status, 200);
    return parseExposition(await r.text());
  };
  const watched = await eventually("the monitor counted the pod's ADDED event", async () => {
    const f = await scrapeMonitor();
    const n = samplesOf(f, "knitter_monitor_watch_events_total", {
      resource: "pods",
      type: "ADDED",
    })[0]?.value ?? 0;
    return n >= 1 ? f : undefined;
  });
  for (const resource of ["pods", "namespaces", "networks", "ipgroups"]) {
    assert.ok(value(watched, "knitter_monitor_watch_age_seconds", { resource }) >= 0, resource);
  }

  // Every metric the dashboard queries is exported by one of the three.
  const used = await dashboardMetrics();
  assert.ok(used.size > 0);
  const missing = [...used].filter(([name]) =>
    ![manager, agent, watched].some((f) => exports(f, name))
  );
  assert.deepEqual(missing, [], "dashboard metrics no component exports");
});
