/**
 * Issue 32, the feed over a WebSocket through a real manager on loopback (`stream=websocket`): a
 * page a message, the token checked before the upgrade, a follower that stops reading cut off
 * while the others get every change, and a clear refusal behind the connection guard (where Deno
 * closes an upgraded socket at once: conn_guard_test.ts).
 */
import assert from "node:assert/strict";
import { callApi, changeUntilSlowCut, followSocket, loopbackManager } from "./test_support.ts";

const ADMIN = "socket-test-admin-token-0123456789";
const node = (i: number) => `socket-test-node-${i}-token-0123456789`;
const FOLLOWERS = 3;
const NET = "tenants/acme/networks/blue";
/** Served straight by Deno.serve (a proxy in front times headers): sockets live there. */
const DIRECT = { headerTimeoutMs: 0 as const };

const call = callApi;
const TOKENS = Array.from({ length: FOLLOWERS + 1 }, (_, i) => node(i));

function managerIn(
  dir: string,
  limits?: { headerTimeoutMs: number; idleTimeoutMs?: number },
) {
  return loopbackManager(dir, ADMIN, TOKENS, limits);
}

/** The manager's API URL as a WebSocket URL. */
function wsUrl(url: string): string {
  return url.replace(/^http/, "ws");
}

/** A WebSocket handshake sent by hand; the answer's head, and the connection (unread after it). */
async function handshake(url: string, path: string, token?: string) {
  const { hostname, port } = new URL(url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const head = `GET ${path} HTTP/1.1\r\nhost: ${hostname}\r\nupgrade: websocket\r\n` +
    `connection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
    `sec-websocket-version: 13\r\n` + (token ? `authorization: Bearer ${token}\r\n` : "") + "\r\n";
  await conn.write(new TextEncoder().encode(head));
  const buffer = new Uint8Array(4096);
  const n = await conn.read(buffer);
  return { conn, answer: new TextDecoder().decode(buffer.subarray(0, n ?? 0)) };
}

async function world(url: string) {
  await call(url, "POST", "tenants", ADMIN, { name: "acme" });
  await call(url, "POST", "tenants/acme/networks", ADMIN, { name: "blue", cidr: "10.1.0.0/24" });
}

Deno.test("feed socket: a page a message from the cursor on, heartbeats, and the token checked before any upgrade", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-test-" });
  const m = await managerIn(dir, DIRECT);
  try {
    await world(m.url);
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const before = await call(m.url, "PUT", `${NET}/ports/p0`, ADMIN, { node: "n1" });

    // No token, a wrong one: refused as any request is, and no socket.
    const anonymous = await handshake(m.url, `/api/v1/feed?after=${cursor}&stream=websocket`);
    anonymous.conn.close();
    assert.match(anonymous.answer, /^HTTP\/1\.1 401 /);
    const wrong = await handshake(m.url, `/api/v1/feed?after=${cursor}&stream=websocket`, "nope");
    wrong.conn.close();
    assert.match(wrong.answer, /^HTTP\/1\.1 401 /);

    const f = followSocket(wsUrl(m.url), node(0), cursor);
    const first = await f.next();
    assert.deepEqual(first!.events.map((e) => (e.port as { id: string }).id), [before.id]);
    // A quiet second: an empty page at the same cursor.
    assert.deepEqual(await f.next(), { cursor: first!.cursor, events: [] });
    const made = await call(m.url, "PUT", `${NET}/ports/p1`, ADMIN, { node: "n1" });
    let page = await f.next();
    while (page!.events.length === 0) page = await f.next();
    assert.deepEqual(page!.events.map((e) => (e.port as { id: string }).id), [made.id]);
    f.ws.close();
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feed socket: an expired cursor is the socket's only line, then a close 1000; a request that is no handshake is a 400", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-test-" });
  const m = await managerIn(dir, DIRECT);
  try {
    const expired = followSocket(wsUrl(m.url), node(0), "00000000:1");
    const only = await expired.next() as unknown as { error: { code: string } };
    assert.equal(only.error.code, "feed_expired");
    assert.equal(await expired.next(), undefined);
    assert.equal(expired.closed?.code, 1000);
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const plain = await fetch(`${m.url}/api/v1/feed?after=${cursor}&stream=websocket`, {
      headers: { authorization: `Bearer ${node(0)}` },
    });
    const body = await plain.json();
    assert.equal(plain.status, 400);
    assert.equal(body.error.code, "invalid_request");
    assert.match(body.error.message, /Upgrade: websocket/);
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feed socket behind the connection guard: refused with 501 feed_socket_unavailable, the stream still served", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-test-" });
  const m = await managerIn(dir);
  try {
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const { conn, answer } = await handshake(
      m.url,
      `/api/v1/feed?after=${cursor}&stream=websocket`,
      node(0),
    );
    conn.close();
    assert.match(answer, /^HTTP\/1\.1 501 /);
    assert.match(answer, /feed_socket_unavailable/);
    assert.match(answer, /stream=ndjson/);
    const res = await fetch(`${m.url}/api/v1/feed?after=${cursor}&stream=ndjson`, {
      headers: { authorization: `Bearer ${node(0)}` },
    });
    assert.equal(res.status, 200);
    await res.body!.cancel();
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feed socket: a follower that stops reading is cut off once far behind, while the other sockets get every change", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-cut-test-" });
  const m = await managerIn(dir, DIRECT);
  let slow: Deno.Conn | undefined;
  try {
    await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
    await call(m.url, "POST", "tenants/acme/security-groups", ADMIN, { name: "big" });
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    // The slow follower upgrades and never reads a byte more.
    const shake = await handshake(
      m.url,
      `/api/v1/feed?after=${cursor}&timeout=60&stream=websocket`,
      node(0),
    );
    slow = shake.conn;
    assert.match(shake.answer, /^HTTP\/1\.1 101 /);
    const fast = Array.from(
      { length: FOLLOWERS },
      (_, i) => followSocket(wsUrl(m.url), node(i + 1), cursor),
    );
    for (const f of fast) await f.next();
    const rounds = await changeUntilSlowCut(m.url, ADMIN, fast);
    assert.ok(rounds > 100, `cut after ${rounds} changes: only once far behind`);
    await call(m.url, "PUT", "tenants/acme/security-groups/big", ADMIN, { rules: [] });
    for (const f of fast) {
      let page = await f.next();
      while (page && page.events.length === 0) page = await f.next();
      assert.deepEqual((page!.events[0].securityGroup as { rules: unknown[] }).rules, []);
      assert.equal(f.closed, undefined);
      f.ws.close();
    }
  } finally {
    slow?.close();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feed socket: the manager's shutdown ends every socket cleanly (1000, or 1001 going away: the agent's client reads both as the end, and resumes), and does not wait on them", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-test-" });
  const m = await managerIn(dir, DIRECT);
  const { cursor } = await call(m.url, "GET", "feed", node(0));
  const f = followSocket(wsUrl(m.url), node(0), cursor);
  await f.next();
  await m.shutdown();
  assert.equal(await f.next(), undefined, "no page after the end");
  assert.ok([1000, 1001].includes(f.closed!.code), `${f.closed!.code}`);
  await Deno.remove(dir, { recursive: true });
});
