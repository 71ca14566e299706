/**
 * Issue 32, feed fan-out through a real manager (its HTTP server and connection guard on loopback):
 * a follower that stops reading its answers holds its own connection only; every other follower
 * still gets the next change.
 */
import assert from "node:assert/strict";
import { startManager } from "./mod.ts";
import { feedLines } from "./test_support.ts";

const ADMIN = "fanout-test-admin-token-0123456789";
const node = (i: number) => `fanout-test-node-${i}-token-0123456789`;
const FOLLOWERS = 3;
/** Ports on the feed before the slow reader asks: each of its answers lists them all. */
const PORTS = 300;
/** Answers the slow reader asks for and never reads (about 110 KB each): more than loopback buffers. */
const UNREAD = 200;
const NET = "tenants/acme/networks/blue";

async function call(url: string, method: string, path: string, token: string, body?: unknown) {
  const r = await fetch(`${url}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Sends `count` feed requests on one connection, pipelined, and reads none of the answers. */
async function stopReading(url: string, token: string, after: string, count: number) {
  const { hostname, port } = new URL(url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const request = `GET /api/v1/feed?after=${after}&timeout=0 HTTP/1.1\r\nhost: ${hostname}\r\n` +
    `authorization: Bearer ${token}\r\n\r\n`;
  const bytes = new TextEncoder().encode(request.repeat(count));
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
  return conn;
}

Deno.test("feed fan-out: a follower that stops reading its answers does not keep the others from the next change", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-fanout-test-" });
  const tokens = [
    { token: ADMIN, scope: "admin" as const },
    ...Array.from(
      { length: FOLLOWERS + 1 },
      (_, i) => ({ token: node(i), scope: "node" as const, node: `n${i}` }),
    ),
  ];
  const m = await startManager({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens,
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
  });
  let slow: Deno.Conn | undefined;
  try {
    await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
    await call(m.url, "POST", "tenants/acme/networks", ADMIN, {
      name: "blue",
      cidr: "10.1.0.0/20",
    });
    const start = (await call(m.url, "GET", "feed", node(0))).cursor;
    for (let i = 0; i < PORTS; i++) {
      await call(m.url, "PUT", `${NET}/ports/p${i}`, ADMIN, { node: "n0", interface: `e${i}` });
    }
    slow = await stopReading(m.url, node(0), start, UNREAD);

    const cursors = await Promise.all(
      Array.from({ length: FOLLOWERS }, (_, i) => call(m.url, "GET", "feed", node(i + 1))),
    );
    const pages = cursors.map((c, i) =>
      call(m.url, "GET", `feed?after=${c.cursor}&timeout=60`, node(i + 1))
    );
    const made = await call(m.url, "PUT", `${NET}/ports/next`, ADMIN, { node: "n1" });
    for (const page of await Promise.all(pages)) {
      assert.deepEqual(page.events.map((e: { port: { id: string } }) => e.port.id), [made.id]);
    }

    // The slow reader's answers were made and wait for it, unread.
    const first = new Uint8Array(1024);
    const n = await slow.read(first);
    assert.match(new TextDecoder().decode(first.subarray(0, n ?? 0)), /^HTTP\/1\.1 200/);
  } finally {
    slow?.close();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feed stream through the connection guard: it outlives the idle and header timeouts, and the manager's shutdown ends it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-stream-test-" });
  const m = await startManager({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [{ token: ADMIN, scope: "admin" }, { token: node(0), scope: "node", node: "n0" }],
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
    // Far shorter than the stream's quiet spells (a heartbeat a second).
    limits: { headerTimeoutMs: 200, idleTimeoutMs: 200 },
  });
  let stopped = false;
  try {
    await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
    await call(m.url, "POST", "tenants/acme/networks", ADMIN, {
      name: "blue",
      cidr: "10.1.0.0/24",
    });
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const res = await fetch(`${m.url}/api/v1/feed?after=${cursor}&timeout=1&stream=ndjson`, {
      headers: { authorization: `Bearer ${node(0)}` },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/x-ndjson");
    const lines = feedLines(res);
    const first = await lines.next();
    // Two heartbeats: more than the idle timeout passes with no request in progress but this one.
    assert.deepEqual(await lines.next(), { cursor: first.cursor, events: [] });
    assert.deepEqual(await lines.next(), { cursor: first.cursor, events: [] });
    const made = await call(m.url, "PUT", `${NET}/ports/p1`, ADMIN, { node: "n0" });
    const page = await lines.next();
    assert.deepEqual(page.events.map((e: { port: { id: string } }) => e.port.id), [made.id]);
    await m.shutdown();
    stopped = true;
    assert.equal(await lines.next(), undefined, "the stream ended with the manager");
  } finally {
    if (!stopped) await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
