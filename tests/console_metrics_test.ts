/**
 * The console's charts over time against Debian's real Prometheus: a one-node stack whose manager
 * is configured with the Prometheus's URL (console.prometheusUrl), Prometheus scraping the manager
 * (with a metrics token) and the node's agent (its probe listener, forwarded from the node's
 * netns), pods of two tenants added through the real plugin. In Chromium, a tenant sees its own
 * networks' pools over time and the CNI ADD latency; an admin sees every tenant's pools.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { launchChromium } from "./support/browser.ts";
import { attrs, logIn, texts } from "./support/console_page.ts";
import { freePorts } from "./support/etcd.ts";
import { forwardFromNetns } from "./support/netns_forward.ts";
import { createNetwork, createTenant, knitterList, makePod } from "./support/pods.ts";
import { startPrometheus } from "./support/prometheus.ts";

const METRICS = `metrics-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;
const GLOBEX = `globex-${crypto.randomUUID()}`;
/** Where the agent serves /metrics in its node's netns. */
const AGENT_HEALTH_PORT = 9464;

Deno.test("console: pool usage and CNI ADD latency over time from a real Prometheus; a tenant sees its own pools only", async () => {
  await using cleanup = new Cleanup();
  const [promPort] = await freePorts(1);
  const stack = await startStack({
    cleanup,
    nodes: ["n1"],
    manager: { console: { prometheusUrl: `http://127.0.0.1:${promPort}` } },
    tokens: [
      { token: METRICS, scope: "metrics" },
      { token: ACME, scope: "tenant", tenant: "acme" },
      { token: GLOBEX, scope: "tenant", tenant: "globex" },
    ],
  });
  const [n1] = stack.nodes;
  // The agent's probe listener on its node's loopback, as deployed (the stack's has none).
  await run(["ip", "-n", n1.sim.netns, "link", "set", "lo", "up"]);
  const config = JSON.parse(await Deno.readTextFile(n1.agentConfig));
  config.health = { hostname: "127.0.0.1", port: AGENT_HEALTH_PORT };
  await Deno.writeTextFile(n1.agentConfig, JSON.stringify(config));
  await n1.stopAgent();
  await n1.startAgent();
  const agentPort = await forwardFromNetns(cleanup, n1.sim.netns, AGENT_HEALTH_PORT);
  const prom = await startPrometheus(cleanup, (dir) => ({
    config: {
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      scrape_configs: [
        {
          job_name: "knitter-manager",
          authorization: { type: "Bearer", credentials_file: `${dir}/metrics-token` },
          static_configs: [{ targets: [new URL(stack.managerUrl).host] }],
        },
        { job_name: "knitter-agent", static_configs: [{ targets: [`127.0.0.1:${agentPort}`] }] },
      ],
    },
    tokenFiles: { [`${dir}/metrics-token`]: METRICS },
  }), promPort);
  await waitFor("both targets scraped and up", async () => {
    const t = (await prom.get("targets?state=active")).activeTargets as { health: string }[];
    return t.length === 2 && t.every((x) => x.health === "up");
  }, 30_000);

  // ADDs after the first scrapes: the latency's rate sees them.
  await createTenant(stack, "acme");
  await createTenant(stack, "globex");
  await createNetwork(stack, "acme", "front", "10.10.0.0/24");
  await createNetwork(stack, "acme", "back", "10.11.0.0/24");
  await createNetwork(stack, "globex", "vault", "10.12.0.0/24");
  for (
    const [name, tenant, net] of [
      ["web", "acme", "front"],
      ["api", "acme", "front"],
      ["db", "acme", "back"],
      ["safe", "globex", "vault"],
    ]
  ) {
    const pod = await makePod(n1, name, tenant, knitterList([net]));
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)}`);
  }

  // Through the manager's proxy, as the page reads it: both charts have samples of the ADDs.
  const chart = async (name: string, token: string) => {
    const res = await fetch(`${stack.managerUrl}/console/metrics?chart=${name}&minutes=5`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 200, `${name}: ${res.status}`);
    return await res.json();
  };
  const hasPoints = (c: { series: { points: unknown[] }[] }) =>
    c.series.length > 0 && c.series.every((s) => s.points.length > 0);
  // A scrape may fall between the two ADDs on front: wait for one after both.
  const frontNow = (c: { series: { name: string; points: [number, number][] }[] }) =>
    c.series.find((s) => s.name === "acme/front")?.points.at(-1)?.[1];
  await waitFor("samples of the pools (after every ADD) and of the ADDs", async () => {
    const [pools, cni] = [await chart("pools", stack.adminToken), await chart("cni-add", ACME)];
    return hasPoints(pools) && pools.series.length >= 3 && frontNow(pools) === 2 && hasPoints(cni);
  }, 60_000);
  const pools = await chart("pools", ACME);
  assert.deepEqual(pools.series.map((s: { name: string }) => s.name), ["acme/back", "acme/front"]);
  const front = pools.series.find((s: { name: string }) => s.name === "acme/front");
  assert.equal(front.points.at(-1)[1], 2, "two addresses in use on acme/front now");

  const env = { url: stack.managerUrl, browser: await launchChromium(cleanup) };
  const page = await logIn(env, ACME);
  // A flat line has no height: attached, not "visible".
  await page.locator("#chart-pools svg polyline").first().waitFor({ state: "attached" });
  assert.deepEqual(await attrs(page, "#chart-pools polyline", "data-series"), [
    "acme/back",
    "acme/front",
  ]);
  assert.deepEqual(await texts(page, "#chart-pools .legend-item"), [
    "acme/back: 1 now",
    "acme/front: 2 now",
  ]);
  assert.deepEqual(await attrs(page, "#chart-cni polyline", "data-series"), [
    "ADD p50",
    "ADD p99",
  ]);
  // Over time: the last 5 minutes (a point every 3 s) show the latency as a line of samples.
  await waitFor("the ADD latency as a line of samples", async () => {
    await page.selectOption("#metrics-range", "5");
    const lines = await attrs(page, "#chart-cni polyline", "points");
    return lines.length === 2 && lines.every((p) => (p?.split(" ").length ?? 0) >= 2);
  }, 60_000);
  assert.match((await texts(page, "#chart-cni .legend-item"))[0], /^ADD p50: \d[\d.]* now$/);
  assert.doesNotMatch(await page.locator("#metrics").innerText(), /globex|vault/);
  const saveTo = Deno.env.get("KNITTER_TEST_SCREENSHOTS");
  if (saveTo) {
    // The whole page: the view is drawn again with every poll, a part of it may go meanwhile.
    await Deno.writeFile(`${saveTo}/metrics.png`, await page.screenshot({ fullPage: true }));
  }

  const admin = await logIn(env, stack.adminToken);
  await admin.locator("#chart-pools svg polyline").first().waitFor({ state: "attached" });
  const all = await attrs(admin, "#chart-pools polyline", "data-series");
  for (const name of ["acme/back", "acme/front", "globex/vault"]) {
    assert.ok(all.includes(name), `the admin sees ${name}: ${all}`);
  }
});
