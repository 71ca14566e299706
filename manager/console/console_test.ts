/**
 * The console's routes in-process: its files with their policy, who a token is, and the feed as a
 * tenant sees it. The page itself is tested in a real browser (tests/console_browser_test.ts).
 */
import assert from "node:assert/strict";
import { must, testApp, TOKEN } from "../test_support.ts";
import { CONSOLE_CSP } from "./console.ts";

/** Every file of static/ (index.html is the page): a module left out of console.ts fails here. */
const FILES = [...Deno.readDirSync(new URL("./static/", import.meta.url))]
  .map((e) => (e.name === "index.html" ? "/console/" : `/console/${e.name}`))
  .sort();

Deno.test("console: every file is served with the policy, without a token", async () => {
  using t = await testApp();
  assert.ok(FILES.includes("/console/") && FILES.includes("/console/app.js"), String(FILES));
  for (const path of FILES) {
    const res = await t.app.request(path);
    const body = await res.text();
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get("content-security-policy"), CONSOLE_CSP, path);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", path);
    assert.equal(res.headers.get("cache-control"), "no-store", path);
    const type = path.endsWith(".js")
      ? "text/javascript"
      : path.endsWith(".css")
      ? "text/css"
      : "text/html";
    assert.ok(res.headers.get("content-type")?.startsWith(type), path);
    // No script builds markup from strings: names are only ever text.
    assert.doesNotMatch(body, /\.(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write/, path);
  }
  const redirect = await t.app.request("/console");
  assert.equal(redirect.status, 301);
  assert.equal(redirect.headers.get("location"), "/console/");
  const missing = await t.app.request("/console/secrets.js");
  assert.equal(missing.status, 404);
});

Deno.test("console: the policy forbids inline script and other origins, and the page has none", async () => {
  assert.match(CONSOLE_CSP, /default-src 'none'/);
  assert.match(CONSOLE_CSP, /script-src 'self'(;|$)/);
  assert.match(CONSOLE_CSP, /style-src 'self'(;|$)/);
  assert.match(CONSOLE_CSP, /frame-ancestors 'none'/);
  using t = await testApp();
  const html = await (await t.app.request("/console/")).text();
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.equal(scripts.length, 1);
  for (const [, attrs, inline] of scripts) {
    assert.match(attrs, /\bsrc="app\.js"/);
    assert.equal(inline.trim(), "");
  }
  assert.doesNotMatch(html, /<style\b|\sstyle=|\son[a-z]+=/i);
});

Deno.test("console: /console/session names the token's principal; only admins and tenants", async () => {
  using t = await testApp();
  const session = (token: string | null) => t.call("GET", "/console/session", undefined, token);
  assert.deepEqual(must(await session(TOKEN.admin), 200), { scope: "admin" });
  assert.deepEqual(must(await session(TOKEN.acme), 200), { scope: "tenant", tenant: "acme" });
  assert.equal((await session(null)).status, 401);
  assert.equal((await session("not-a-token")).status, 401);
  assert.equal((await session(TOKEN.worker1)).status, 403);
  assert.equal((await session(TOKEN.metrics)).status, 403);
});

Deno.test("console: the feed shows a tenant its own ports and only the names of nodes", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", { name: "blue", cidr: "10.1.0.0/24" }), 201);
  must(await t.call("POST", "tenants/globex/networks", { name: "red", cidr: "10.1.0.0/24" }), 201);
  const feed = (token: string, after?: string) =>
    t.call(
      "GET",
      after ? `/console/feed?after=${after}&timeout=0` : "/console/feed",
      undefined,
      token,
    );
  const start = must(await feed(TOKEN.acme), 200);
  assert.deepEqual(start.events, []);
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.0.2.1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/a1", { node: "worker1" }), 201);
  must(await t.call("PUT", "tenants/globex/networks/red/ports/g1", { node: "worker1" }), 201);

  const acme = must(await feed(TOKEN.acme, start.cursor), 200);
  assert.deepEqual(
    acme.events.map((e: { type: string; port?: { id: string }; node?: unknown }) =>
      e.type === "port" ? `port ${e.port!.id}` : `node ${JSON.stringify(e.node)}`
    ),
    ['node {"name":"worker1"}', "port a1"],
  );
  const admin = must(await feed(TOKEN.admin, start.cursor), 200);
  assert.equal(admin.events.length, 3);
  assert.equal(admin.events[0].node.underlayIp, "192.0.2.1");
  assert.equal(admin.cursor, acme.cursor);

  const globex = must(await feed(TOKEN.globex, start.cursor), 200);
  assert.deepEqual(
    globex.events.filter((e: { type: string }) => e.type === "port").map((
      e: { port: { id: string } },
    ) => e.port.id),
    ["g1"],
  );
  assert.equal((await feed(TOKEN.worker1, start.cursor)).status, 403);
  const stale = await feed(TOKEN.acme, "00000000:0");
  assert.equal(stale.status, 410);
  assert.equal(stale.body.error.code, "feed_expired");
  const bad = await feed(TOKEN.acme, "nonsense");
  assert.equal(bad.status, 400);
});

Deno.test("console: the charts say when no Prometheus is configured, and refuse what is not a chart", async () => {
  using t = await testApp();
  const chart = (query: string, token: string | null = TOKEN.acme) =>
    t.call("GET", `/console/metrics?${query}`, undefined, token);
  const none = must(await chart("chart=pools"), 200);
  assert.equal(none.configured, false);
  assert.match(none.hint, /console.*prometheusUrl/);
  assert.equal((await chart("chart=pools", null)).status, 401);
  assert.equal((await chart("chart=pools", TOKEN.metrics)).status, 403);
  for (const bad of ["chart=up", "chart=pools&minutes=1", "chart=pools&query=up", ""]) {
    const r = await chart(bad);
    assert.equal(r.status, 400, bad);
    assert.equal(r.body.error.code, "invalid_request", bad);
  }
});

Deno.test("console: a configured Prometheus that does not answer is a 502 that names it", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${listener.addr.port}`;
  listener.close();
  using t = await testApp({ prometheusUrl: url });
  const r = await t.call("GET", "/console/metrics?chart=cni-add", undefined, TOKEN.admin);
  assert.equal(r.status, 502);
  assert.equal(r.body.error.code, "metrics_unavailable");
  assert.ok(r.body.error.message.includes(url), r.body.error.message);
});
