/**
 * deploy/monitoring/: the Component, rendered by kubectl's kustomize over deploy/, makes the agent
 * and the monitor serve /metrics where their pods' scrape annotations point (the kubelet's probes
 * unchanged); the operator objects select the right workloads; and every metric the Grafana
 * dashboard queries is one a component's registry declares (tests/metrics_test.ts checks the
 * same against a running stack).
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { run } from "@knitter/common";
import { loadAgentConfig } from "@knitter/agent";
import { loadMonitorConfig } from "@knitter/monitor";
import { AgentMetrics } from "../agent/metrics.ts";
import { Metrics } from "../manager/metrics.ts";
import { MonitorMetrics } from "../monitor/metrics.ts";
import { DASHBOARD_FILE, dashboardMetrics } from "./dashboard.ts";
import { DEPLOY_DIR, findObject, loadManifests } from "./manifests.ts";
import { RULES_FILE } from "./prometheus_rule.ts";

const MONITORING = `${DEPLOY_DIR}/monitoring`;

// deno-lint-ignore no-explicit-any
type Obj = any;

/** `kubectl kustomize` of deploy/ with the Component, in a copy with placeholder secrets. */
async function renderWithComponent(): Promise<Obj[]> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-monitoring-" });
  try {
    await run(["cp", "-r", DEPLOY_DIR, `${dir}/deploy`]);
    await Deno.mkdir(`${dir}/deploy/secrets`, { recursive: true });
    await Deno.writeTextFile(`${dir}/deploy/secrets/tokens.json`, "[]");
    await Deno.writeTextFile(`${dir}/deploy/secrets/admin-token`, "placeholder");
    await Deno.writeTextFile(`${dir}/deploy/secrets/node-tokens`, "worker1 placeholder\n");
    await Deno.writeTextFile(
      `${dir}/kustomization.yaml`,
      "resources: [deploy]\ncomponents: [deploy/monitoring]\n",
    );
    const out = await run(["kubectl", "kustomize", dir]);
    return parseAllDocuments(out.stdout).map((d) => d.toJS());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const WORKLOADS = [
  { kind: "DaemonSet", name: "knitter-agent", container: "agent", config: "agent/agent.json" },
  {
    kind: "Deployment",
    name: "knitter-monitor",
    container: "monitor",
    config: "monitor/monitor.json",
  },
];

Deno.test("monitoring Component: the agent's and the monitor's pods are annotated for scraping where their /metrics listens, off the loopback; probes unchanged", async () => {
  const objects = await renderWithComponent();
  for (const w of WORKLOADS) {
    const o = objects.find((x) => x.kind === w.kind && x.metadata.name === w.name);
    assert.ok(o, `${w.name} rendered`);
    const pod = o.spec.template;
    const c = pod.spec.containers.find((x: Obj) => x.name === w.container);
    const env: Record<string, string> = {
      KNITTER_AGENT_MANAGER_URL: "http://10.96.0.27:9527",
      KNITTER_AGENT_MANAGER_TOKEN: "a-node-token-for-the-test",
      KNITTER_AGENT_UNDERLAY_IP: "192.0.2.11",
      KNITTER_AGENT_NODE_NAME: "worker1",
      KNITTER_MONITOR_MANAGER_URL: "http://10.96.0.27:9527",
      KNITTER_MONITOR_MANAGER_TOKEN: "an-admin-token-for-the-test",
    };
    for (const e of c.env) {
      if (e.value !== undefined && /HEALTH/.test(e.name)) env[e.name] = e.value;
    }
    const file = `${DEPLOY_DIR}/${w.config}`;
    const load = w.container === "agent" ? loadAgentConfig : loadMonitorConfig;
    const { config } = await load(["--config", file], (n) => env[n]);
    const health = config.health!;
    assert.equal(health.hostname, "0.0.0.0", `${w.name}: /metrics reachable from the cluster`);
    const a = pod.metadata.annotations;
    assert.equal(a["prometheus.io/scrape"], "true", w.name);
    assert.equal(a["prometheus.io/path"], "/metrics", w.name);
    assert.equal(a["prometheus.io/port"], String(health.port), w.name);
    for (const probe of ["livenessProbe", "readinessProbe"]) {
      assert.equal(c[probe].httpGet.host, "127.0.0.1", `${w.name}: ${probe} still on the loopback`);
      assert.equal(c[probe].httpGet.port, health.port, `${w.name}: ${probe} port`);
    }
  }
});

Deno.test("monitoring Component: the alerting rules come as the ConfigMap knitter-prometheus-rules, in knitter-system, under a fixed name", async () => {
  const objects = await renderWithComponent();
  const cm = objects.find((x) => x.kind === "ConfigMap" && x.metadata.name.includes("rules"));
  assert.ok(cm, "the rules' ConfigMap rendered");
  assert.equal(cm.metadata.name, "knitter-prometheus-rules");
  assert.equal(cm.metadata.namespace, "knitter-system");
  assert.equal(cm.data["knitter.rules.yaml"], await Deno.readTextFile(RULES_FILE));
});

Deno.test("monitoring: the ServiceMonitor scrapes the manager's Service port with a metrics token, the PodMonitors the annotated probe ports", async () => {
  const base = loadManifests();
  const service = findObject(base, "Service", "knitter-manager").object;
  const docs = parseAllDocuments(await Deno.readTextFile(`${MONITORING}/servicemonitor.yaml`))
    .map((d) => d.toJS());
  const sm = docs.find((d) => d.kind === "ServiceMonitor");
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) {
    assert.equal(service.metadata.labels[k], v, `the ServiceMonitor selects the manager: ${k}`);
  }
  const ep = sm.spec.endpoints[0];
  assert.ok(service.spec.ports.some((p: Obj) => p.name === ep.port), "a port the Service names");
  assert.equal(ep.path, "/metrics");
  assert.equal(ep.authorization.type, "Bearer");
  for (const w of WORKLOADS) {
    const pm = docs.find((d) => d.kind === "PodMonitor" && d.metadata.name === w.name);
    const workload = findObject(base, w.kind, w.name).object;
    for (const [k, v] of Object.entries(pm.spec.selector.matchLabels)) {
      assert.equal(workload.spec.template.metadata.labels[k], v, `${w.name}: selected`);
    }
    // The job label the alerting rules match on (job="knitter-agent"): the pods' name label.
    assert.equal(workload.spec.template.metadata.labels[pm.spec.jobLabel], w.name, "job label");
    const config = JSON.parse(await Deno.readTextFile(`${DEPLOY_DIR}/${w.config}`));
    assert.equal(pm.spec.podMetricsEndpoints[0].targetPort, config.health.port, w.name);
  }
});

/** Every metric name the components' registries declare, histogram series included. */
async function declaredNames(): Promise<Set<string>> {
  const registries = [
    new Metrics().registry,
    new AgentMetrics().registry,
    new MonitorMetrics({
      watches: [],
      queues: [],
      tracker: { released: 0 },
      reclaimer: { runs: 0, reclaimed: 0 },
    }).registry,
  ];
  const names = new Set<string>();
  for (const r of registries) {
    for (const m of await r.getMetricsAsJSON()) {
      names.add(m.name);
      if (String(m.type) === "histogram") {
        for (const s of ["_bucket", "_sum", "_count"]) names.add(m.name + s);
      }
    }
  }
  return names;
}

Deno.test("monitoring: every metric the alerting rules use is declared by the manager, the agent or the monitor", async () => {
  const declared = await declaredNames();
  const used = new Set((await Deno.readTextFile(RULES_FILE)).match(/\bknitter_[a-z0-9_]+/g));
  assert.ok(used.size >= 8, `the rules use ${used.size} metrics`);
  assert.deepEqual(
    [...used].filter((n) => !declared.has(n)),
    [],
    "undeclared metrics in the rules",
  );
});

Deno.test("monitoring: every metric the Grafana dashboard queries is declared by the manager, the agent or the monitor", async () => {
  const declared = await declaredNames();
  const used = await dashboardMetrics();
  assert.ok(used.size >= 15, `the dashboard queries ${used.size} metrics`);
  const unknown = [...used].filter(([name]) => !declared.has(name));
  assert.deepEqual(unknown, [], "metrics the dashboard queries that no component declares");
  const dash = JSON.parse(await Deno.readTextFile(DASHBOARD_FILE));
  const ids = dash.panels.map((p: Obj) => p.id);
  assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
  for (const p of dash.panels.filter((x: Obj) => x.type !== "row")) {
    assert.ok(p.targets.length > 0 && p.datasource.uid === "${datasource}", p.title);
  }
});
