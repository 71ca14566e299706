/**
 * Debian's real Prometheus against a real stack: a manager, two simulated nodes whose agents run
 * in Kubernetes mode (their probe listener on their node's loopback, as deployed), the stand-in
 * API server and the monitor. Prometheus scrapes them with the jobs deploy/monitoring/ ships
 * (static equivalents of the ServiceMonitor and PodMonitors) and evaluates the shipped alerting
 * rules. Then: every target is up; after pods are made (one ADD refused for an exhausted pool,
 * one DEL), every query of the Grafana dashboard returns a number; the rules evaluate without
 * error and the exhausted pool's alerts are pending; and `promtool check metrics` finds nothing
 * wrong in any component's /metrics.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { DASHBOARD_FILE } from "../deploy/dashboard.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  AGENT_HEALTH_PORT,
  DEFAULT_NETWORK,
  eventually,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { forwardFromNetns } from "./support/netns_forward.ts";
import {
  monitorJobs,
  type Prometheus,
  prometheusConfig,
  startPrometheus,
} from "./support/prometheus.ts";

/**
 * Grafana's variables as a dashboard user with "All" agents picked over the last minutes would
 * have them: `$__rate_interval` and `$__range` a minute (many 1 s scrapes), `$instance` the
 * variable's allValue.
 */
function substitute(expr: string, allValue: string): string {
  return expr.replaceAll("$__rate_interval", "1m").replaceAll("$__range", "1m")
    .replaceAll("$instance", allValue);
}

/** Every query of the dashboard: its panel, its legend, the PromQL as Grafana would send it. */
async function dashboardQueries(): Promise<{ where: string; expr: string }[]> {
  const dash = JSON.parse(await Deno.readTextFile(DASHBOARD_FILE));
  const instance = dash.templating.list.find((v: { name: string }) => v.name === "instance");
  const out = [];
  for (const p of dash.panels) {
    for (const t of p.targets ?? []) {
      out.push({
        where: `${p.title} (${t.legendFormat ?? t.refId})`,
        expr: substitute(t.expr, instance.allValue),
      });
    }
  }
  // The variable's own query: label_values(M, L) is the L values of M's series.
  const m = /^label_values\((\w+), *(\w+)\)$/.exec(instance.definition);
  assert.ok(m, `the instance variable: ${instance.definition}`);
  out.push({ where: "variable instance", expr: `count by (${m[2]}) (${m[1]})` });
  return out;
}

/** The queries that return nothing, or nothing but NaN, with what each returned. */
async function emptyQueries(prom: Prometheus, queries: { where: string; expr: string }[]) {
  const empty = [];
  for (const q of queries) {
    const result = await prom.query(q.expr);
    if (!result.some((s) => !Number.isNaN(Number(s.value[1])))) {
      empty.push({ ...q, result: JSON.stringify(result) });
    }
  }
  return empty;
}

Deno.test("prometheus: the shipped scrape jobs find every component up, every dashboard query returns data, the alerting rules evaluate, promtool finds the metrics clean", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = k.stack.nodes;
  const monitor = await k.startMonitor();
  k.namespace("acme");

  // Each agent's probe listener is on its node's loopback; the instance label is the address it
  // has in a cluster (the node's, as the PodMonitor of a hostNetwork pod would give).
  const agents: { address: string; labels: Record<string, string> }[] = [];
  for (const n of k.stack.nodes) {
    const port = await forwardFromNetns(cleanup, n.sim.netns, AGENT_HEALTH_PORT);
    agents.push({
      address: `127.0.0.1:${port}`,
      labels: { instance: `${n.sim.underlayIp}:${AGENT_HEALTH_PORT}`, node: n.name },
    });
  }
  const jobs = await monitorJobs();
  assert.deepEqual(jobs.map((j) => j.name).sort(), [
    "knitter-agent",
    "knitter-manager",
    "knitter-monitor",
  ]);
  const manager = new URL(k.stack.managerUrl);
  const prom = await startPrometheus(cleanup, (dir) =>
    prometheusConfig(jobs, {
      "knitter-manager": { targets: [{ address: manager.host }], token: k.stack.adminToken },
      "knitter-agent": { targets: agents },
      "knitter-monitor": { targets: [{ address: new URL(monitor.healthUrl).host }] },
    }, dir));

  const targets = await eventually("every target scraped and up", async () => {
    const t = (await prom.get("targets?state=active")).activeTargets;
    return t.length === 4 && t.every((x: { health: string }) => x.health === "up") ? t : undefined;
  });
  assert.deepEqual(
    targets.map((t: { labels: Record<string, string> }) => `${t.labels.job} ${t.labels.instance}`)
      .sort(),
    [
      `knitter-agent ${n1.sim.underlayIp}:${AGENT_HEALTH_PORT}`,
      `knitter-agent ${n2.sim.underlayIp}:${AGENT_HEALTH_PORT}`,
      `knitter-manager ${manager.host}`,
      `knitter-monitor ${new URL(monitor.healthUrl).host}`,
    ].sort(),
  );

  // Traffic the panels show: pods on both nodes, a small network filled up, a pod refused there
  // (a CNI error, an allocation refused), a pod deleted.
  const tiny = await k.stack.api("POST", "tenants/admin/networks", {
    name: "tiny",
    cidr: "10.250.0.0/30",
    gateway: "10.250.0.1",
    public: true,
  });
  assert.equal(tiny.status, 201, JSON.stringify(tiny.body));
  const tinyPod = { "k8s.v1.cni.cncf.io/networks": "tiny" };
  const web = await k.pod(n1, { namespace: "acme", name: "web" });
  const db = await k.pod(n2, { namespace: "acme", name: "db", annotations: tinyPod });
  const late = await k.pod(n2, { namespace: "acme", name: "late", annotations: tinyPod });
  for (const p of [web, db]) {
    const r = await p.cni.add();
    assert.equal(r.code, 0, `ADD ${p.obj.metadata.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  }
  const refused = await late.cni.add();
  assert.equal(refused.out?.code, 11, `the tiny network is full: ${JSON.stringify(refused.out)}`);
  const deleted = await web.cni.del();
  assert.equal(deleted.code, 0, `DEL: ${JSON.stringify(deleted.out)} ${deleted.stderr}`);

  const queries = await dashboardQueries();
  assert.ok(queries.length >= 25, `the dashboard has ${queries.length} queries`);
  await eventually("every dashboard query returns data", async () => {
    const empty = await emptyQueries(prom, queries);
    return empty.length === 0 ? true : undefined;
  }, 60_000).catch(async (err) => {
    throw new Error(
      `${err.message}: ${JSON.stringify(await emptyQueries(prom, queries), null, 1)}`,
    );
  });

  // The rules evaluate on the real series; the full network is seen for what it is.
  const groups = (await prom.get("rules")).groups;
  const rules = groups.flatMap((g: { rules: unknown[] }) => g.rules);
  assert.ok(rules.length >= 8, `${rules.length} rules loaded`);
  for (const r of rules as { name: string; health: string; lastError?: string }[]) {
    assert.equal(r.health, "ok", `${r.name}: ${r.lastError}`);
  }
  const alerts = await eventually("the full network's alerts", async () => {
    const a = (await prom.get("alerts")).alerts as { labels: Record<string, string> }[];
    const tinyAlerts = a.filter((x) => x.labels.network === "tiny").map((x) => x.labels.alertname);
    return tinyAlerts.includes("KnitterPoolExhausted") ? a : undefined;
  });
  const names = alerts.map((a) => a.labels.alertname);
  assert.ok(names.includes("KnitterPoolNearlyExhausted"), names.join());
  assert.ok(
    !alerts.some((a) => a.labels.network === DEFAULT_NETWORK.name),
    `the default network has room: ${JSON.stringify(alerts)}`,
  );
  for (const down of ["KnitterManagerDown", "KnitterAgentDown", "KnitterMonitorDown"]) {
    assert.ok(!names.includes(down), `${down} while every target is up`);
  }

  // promtool's lint of each component's exposition, as Prometheus fetched it.
  const scrapes: [string, string, HeadersInit][] = [
    ["manager", `${k.stack.managerUrl}/metrics`, {
      authorization: `Bearer ${k.stack.adminToken}`,
    }],
    ["agent", `http://${agents[0].address}/metrics`, {}],
    ["monitor", `${monitor.healthUrl}/metrics`, {}],
  ];
  for (const [component, url, headers] of scrapes) {
    const r = await fetch(url, { headers });
    assert.equal(r.status, 200, component);
    const lint = await run(["promtool", "check", "metrics"], {
      stdin: await r.text(),
      check: false,
    });
    assert.equal(lint.code, 0, `${component}: ${lint.stdout}${lint.stderr}`);
    assert.equal(`${lint.stdout}${lint.stderr}`.trim(), "", `${component}: promtool's findings`);
  }
});
