/**
 * Probes against the stand-in API server: the monitor's `/healthz` and `/readyz` (its loopback
 * health port) say 503, naming the watch, while a watch is stale (the API server down past the
 * watch deadline), and 200 again once it is back; the agent's, on its node's loopback, answer
 * through the plugin's own socket.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { AGENT_HEALTH_PORT, eventually, startKubeCluster } from "./support/kube_cluster.ts";

async function probe(url: string): Promise<{ status: number; body: { reasons?: string[] } }> {
  const r = await fetch(url);
  return { status: r.status, body: await r.json() };
}

Deno.test("stand-in API server: the monitor's /healthz and /readyz say 503 while a watch is stale, naming it, and 200 once the API server is back", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { watchTimeoutSeconds: 1, watchDeadlineSeconds: 2, watchProbeSeconds: 1 },
  });
  const m = await k.startMonitor();
  assert.match(m.healthUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal((await probe(`${m.healthUrl}/healthz`)).status, 200);
  await eventually(
    "ready",
    async () => (await probe(`${m.healthUrl}/readyz`)).status === 200 ? true : undefined,
  );

  // Down for longer than the deadline: nothing heard, so nothing known.
  const back = k.api.restart(6000);
  const sick = await eventually("healthz 503", async () => {
    const r = await probe(`${m.healthUrl}/healthz`);
    return r.status === 503 ? r : undefined;
  }, 10_000);
  assert.match(sick.body.reasons!.join("; "), /watch of pods: nothing heard for \d+ s/);
  const notReady = await probe(`${m.healthUrl}/readyz`);
  assert.equal(notReady.status, 503);
  assert.match(notReady.body.reasons!.join("; "), /watch of pods/);
  await back;
  await eventually(
    "healthy again",
    async () => (await probe(`${m.healthUrl}/healthz`)).status === 200 ? true : undefined,
  );
  await eventually(
    "ready again",
    async () => (await probe(`${m.healthUrl}/readyz`)).status === 200 ? true : undefined,
  );
  assert.equal((await probe(`${m.healthUrl}/nope`)).status, 404);
});

Deno.test("stand-in API server: the agent's /healthz and /readyz on its node's loopback answer through the plugin's socket", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  const curl = (path: string) =>
    run(
      [
        "curl",
        "-s",
        "-o",
        "/dev/stdout",
        "-w",
        "\n%{http_code}",
        `http://127.0.0.1:${AGENT_HEALTH_PORT}${path}`,
      ],
      { netns: n1.sim.netns, check: false },
    );
  const ok = await curl("/healthz");
  assert.equal(ok.stdout.trim().split("\n").at(-1), "200", ok.stdout + ok.stderr);
  const ready = await curl("/readyz");
  assert.equal(ready.stdout.trim().split("\n").at(-1), "200", ready.stdout);
  assert.match(ready.stdout, /"status":"ready"/);

  // The agent stops: nothing listens any more, the probe fails (the kubelet restarts it).
  await n1.stopAgent();
  const down = await curl("/healthz");
  assert.notEqual(down.stdout.trim().split("\n").at(-1), "200");
  await n1.startAgent();
  await eventually("the agent healthy again", async () => {
    const r = await curl("/healthz");
    return r.stdout.trim().endsWith("200") ? true : undefined;
  });
});
