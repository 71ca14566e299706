/**
 * Issue 32, feed fan-out through a real manager (its HTTP server and connection guard on loopback):
 * a follower that stops reading its answers holds its own connection only, and a streaming one is
 * cut off once far behind; every other follower still gets the next change.
 */
import assert from "node:assert/strict";
import {
  bulkyRules,
  callApi,
  feedLines,
  loopbackManager,
  nodeRequestsInFlight,
} from "./test_support.ts";

const ADMIN = "fanout-test-admin-token-0123456789";
const node = (i: number) => `fanout-test-node-${i}-token-0123456789`;
const FOLLOWERS = 3;
/** Ports on the feed before the slow reader asks: each of its answers lists them all. */
const PORTS = 300;
/** Answers the slow reader asks for and never reads (about 110 KB each): more than loopback buffers. */
const UNREAD = 200;
const NET = "tenants/acme/networks/blue";

const call = callApi;
const TOKENS = Array.from({ length: FOLLOWERS + 1 }, (_, i) => node(i));

/** A manager on loopback with the admin's token and FOLLOWERS + 1 node tokens (n0, n1, …). */
function managerIn(dir: string, limits?: { headerTimeoutMs: number; idleTimeoutMs: number }) {
  return loopbackManager(dir, ADMIN, TOKENS, limits);
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
  const m = await managerIn(dir);
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
  // Far shorter than the stream's quiet spells (a heartbeat a second).
  const m = await managerIn(dir, { headerTimeoutMs: 200, idleTimeoutMs: 200 });
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

Deno.test("feed stream: a follower that stops reading is cut off once far behind, while the other streams get every change", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-stream-cut-test-" });
  const m = await managerIn(dir);
  let slow: Deno.Conn | undefined;
  try {
    await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
    await call(m.url, "POST", "tenants/acme/security-groups", ADMIN, { name: "big" });
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    // The slow follower asks for its stream and never reads a byte of it.
    const { hostname, port } = new URL(m.url);
    slow = await Deno.connect({ hostname, port: Number(port) });
    const ask = `GET /api/v1/feed?after=${cursor}&stream=ndjson HTTP/1.1\r\nhost: ${hostname}\r\n` +
      `authorization: Bearer ${node(0)}\r\n\r\n`;
    await slow.write(new TextEncoder().encode(ask));
    const fast = await Promise.all(Array.from({ length: FOLLOWERS }, async (_, i) => {
      const res = await fetch(`${m.url}/api/v1/feed?after=${cursor}&stream=ndjson`, {
        headers: { authorization: `Bearer ${node(i + 1)}` },
      });
      const lines = feedLines(res);
      await lines.next();
      return lines;
    }));
    const streaming = () => nodeRequestsInFlight(m.url, ADMIN);
    while ((await streaming()) < FOLLOWERS + 1) await new Promise((r) => setTimeout(r, 10));

    // Changes until the manager lets the slow stream go (its bound, and the socket's buffers).
    let rounds = 0;
    for (; (await streaming()) > FOLLOWERS; rounds++) {
      assert.ok(rounds < 4000, "the slow follower was never cut off");
      await call(m.url, "PUT", "tenants/acme/security-groups/big", ADMIN, {
        rules: bulkyRules(rounds),
      });
      for (const lines of fast) {
        const page = await lines.next();
        assert.deepEqual(page.events.map((e: { type: string }) => e.type), ["securityGroup"]);
        assert.equal(page.events[0].securityGroup.rules[0].peer.cidr, `10.${rounds % 250}.0.0/24`);
      }
    }
    assert.ok(rounds > 100, `cut after ${rounds} changes: only once far behind`);
    // What the slow follower gets is what was sent before the cut, then the end: no last chunk.
    const tail = await readToEnd(slow);
    assert.ok(!tail.endsWith("\r\n0\r\n\r\n"), "the stream was cut, not ended cleanly");
    // The others go on.
    await call(m.url, "PUT", "tenants/acme/security-groups/big", ADMIN, { rules: [] });
    for (const lines of fast) {
      assert.deepEqual((await lines.next()).events[0].securityGroup.rules, []);
    }
    for (const lines of fast) await lines.cancel();
  } finally {
    slow?.close();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

/** The last bytes a connection delivers before its end (or a reset), as text. */
async function readToEnd(conn: Deno.Conn): Promise<string> {
  const buffer = new Uint8Array(64 * 1024);
  let tail = "";
  for (;;) {
    let n: number | null;
    try {
      n = await conn.read(buffer);
    } catch {
      break; // reset: the manager aborted the answer
    }
    if (n === null) break;
    tail = (tail + new TextDecoder().decode(buffer.subarray(0, n))).slice(-16);
  }
  return tail;
}
