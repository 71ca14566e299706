import assert from "node:assert/strict";
import { serveProbes } from "./probes.ts";

Deno.test("probes: /metrics answers the exposition when given, and is a 404 listing the paths when not", async () => {
  const withMetrics = serveProbes({ hostname: "127.0.0.1", port: 0 }, {
    healthz: () => [],
    readyz: () => ["not yet"],
    metrics: () => Promise.resolve("knitter_agent_x_total 1\n"),
  });
  const without = serveProbes({ hostname: "127.0.0.1", port: 0 }, {
    healthz: () => [],
    readyz: () => [],
  });
  try {
    const m = await fetch(`${withMetrics.url}/metrics`);
    assert.equal(m.status, 200);
    assert.match(m.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
    assert.equal(await m.text(), "knitter_agent_x_total 1\n");
    const r = await fetch(`${withMetrics.url}/readyz`);
    assert.equal(r.status, 503);
    assert.deepEqual((await r.json()).reasons, ["not yet"]);
    const none = await fetch(`${without.url}/metrics`);
    assert.equal(none.status, 404);
    assert.deepEqual((await none.json()).paths, ["/healthz", "/readyz"]);
    const other = await fetch(`${withMetrics.url}/nope`);
    assert.deepEqual((await other.json()).paths, ["/healthz", "/readyz", "/metrics"]);
  } finally {
    await withMetrics.shutdown();
    await without.shutdown();
  }
});
