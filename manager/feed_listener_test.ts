/**
 * Issue 32, the feed's WebSockets on a port of their own (feed_listener.ts), with the connection
 * guard on (the default): the attacks first (a head trickled or too large, tokens refused before
 * any upgrade, a follower that never reads, a client's bad frame, too many new connections from
 * one address), then what followers rely on (pages, resume by cursor, relist, discovery).
 */
import assert from "node:assert/strict";
import { startManager } from "./server.ts";
import {
  callApi as call,
  changeUntilSlowCut,
  CLUSTER_TOKEN,
  CLUSTER_TOKENS,
  followSocket,
} from "./test_support.ts";
import type { TokenConfig } from "./auth.ts";
import { ManagerClient, TokenBuckets } from "@knitter/common";
import { serveFeedSockets } from "./feed_listener.ts";
import { DEFAULT_GUARD } from "./conn_guard.ts";

const ADMIN = "listener-test-admin-token-0123456789";
const TENANT = "listener-test-tenant-token-0123456789";
const node = (i: number) => `listener-test-node-${i}-token-0123456789`;
const FOLLOWERS = 3;
const HEADER_TIMEOUT_MS = 300;
const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** A port free now on loopback (the manager's config takes 0 as "no listener"). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = l.addr as Deno.NetAddr;
  l.close();
  return port;
}

/** A guarded manager (the default) with a feed socket port. */
async function guarded(
  dir: string,
  limits: Record<string, number> = {},
  more: TokenConfig[] = [],
) {
  const feedSocketPort = freePort();
  const m = await startManager({
    listen: { hostname: "127.0.0.1", port: 0, feedSocketPort },
    store: { path: `${dir}/manager.kv` },
    tokens: [
      { token: ADMIN, scope: "admin" },
      { token: TENANT, scope: "tenant", tenant: "acme" },
      ...Array.from({ length: FOLLOWERS + 1 }, (_, i) => ({
        token: node(i),
        scope: "node" as const,
        node: `n${i}`,
      })),
      ...more,
    ],
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
    limits: { headerTimeoutMs: HEADER_TIMEOUT_MS, ...limits },
  });
  return { ...m, socketUrl: `ws://127.0.0.1:${feedSocketPort}`, feedSocketPort };
}

async function inManager(
  fn: (m: Awaited<ReturnType<typeof guarded>>) => Promise<void>,
  limits?: Record<string, number>,
  tokens?: TokenConfig[],
) {
  const dir = await Deno.makeTempDir({ prefix: "knitter-listener-test-" });
  const m = await guarded(dir, limits, tokens);
  try {
    await fn(m);
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

const KEY = "dGhlIHNhbXBsZSBub25jZQ==";

function handshakeHead(path: string, token?: string, extra = ""): string {
  return `GET ${path} HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
    `sec-websocket-key: ${KEY}\r\nsec-websocket-version: 13\r\n` +
    (token ? `authorization: Bearer ${token}\r\n` : "") + extra + "\r\n";
}

/** Sends `head` on a new connection to `port`; the answer's first bytes, and the connection. */
async function send(port: number, head: string | Uint8Array) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(typeof head === "string" ? ENC.encode(head) : head);
  const buffer = new Uint8Array(4096);
  const n = await conn.read(buffer).catch(() => null);
  return { conn, answer: DEC.decode(buffer.subarray(0, n ?? 0)) };
}

/** Reads until the peer closes (or resets); what came. */
async function untilClosed(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: number[] = [];
  const buffer = new Uint8Array(65536);
  for (;;) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) return new Uint8Array(chunks);
    chunks.push(...buffer.subarray(0, n));
  }
}

/** A masked client frame. */
function clientFrame(op: number, payload: Uint8Array, masked = true): Uint8Array {
  const mask = masked ? [1, 2, 3, 4] : [];
  const frame = new Uint8Array(2 + mask.length + payload.length);
  frame[0] = 0x80 | op;
  frame[1] = (masked ? 0x80 : 0) | payload.length;
  frame.set(mask, 2);
  payload.forEach((b, i) => (frame[2 + mask.length + i] = masked ? b ^ mask[i & 3] : b));
  return frame;
}

const NET = "tenants/acme/networks/blue";

async function world(url: string) {
  await call(url, "POST", "tenants", ADMIN, { name: "acme" });
  await call(url, "POST", "tenants/acme/networks", ADMIN, { name: "blue", cidr: "10.1.0.0/24" });
}

const portIds = (page?: { events: Record<string, unknown>[] }) =>
  page!.events.map((e) => (e.port as { id: string }).id);

Deno.test("attack: a head trickled to the feed socket port is cut at the header timeout", async () => {
  await inManager(async (m) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: m.feedSocketPort });
    await conn.write(ENC.encode("GET /api/v1/feed?after=x&stream=websocket HTTP/1.1\r\n"));
    // Never the blank line: the listener closes the connection, answering nothing.
    assert.equal((await untilClosed(conn)).length, 0);
    conn.close();
  });
});

Deno.test("attack: an over-size head is refused (431) and closed", async () => {
  await inManager(async (m) => {
    const big = handshakeHead(
      "/api/v1/feed?after=x&stream=websocket",
      node(0),
      `x-filler: ${"a".repeat(20_000)}\r\n`,
    );
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: m.feedSocketPort });
    conn.write(ENC.encode(big)).catch(() => {});
    const answer = DEC.decode(await untilClosed(conn));
    conn.close();
    assert.match(answer, /^HTTP\/1\.1 431 /);
    assert.match(answer, /header_too_large/);
  });
});

Deno.test("attack: no token, a wrong one, a tenant's: refused before any upgrade; what is no feed handshake gets a plain error", async () => {
  await inManager(async (m) => {
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const path = `/api/v1/feed?after=${cursor}&stream=websocket`;
    for (
      const [token, status] of [[undefined, 401], ["nope", 401], [TENANT, 403]] as const
    ) {
      const { conn, answer } = await send(m.feedSocketPort, handshakeHead(path, token));
      conn.close();
      assert.match(answer, new RegExp(`^HTTP/1\\.1 ${status} `), answer);
      assert.doesNotMatch(answer, /101/);
    }
    const refusals: [string, RegExp][] = [
      [handshakeHead("/api/v1/ports", node(0)), /^HTTP\/1\.1 404 [^]*only the feed's WebSocket/],
      [
        handshakeHead(path, node(0)).replace("GET", "POST"),
        /^HTTP\/1\.1 404 [^]*not POST/,
      ],
      [
        handshakeHead(path, node(0)).replace("version: 13", "version: 8"),
        /^HTTP\/1\.1 400 [^]*Sec-WebSocket-Version 13/,
      ],
      [
        handshakeHead(path, node(0)).replace(KEY, "short"),
        /^HTTP\/1\.1 400 [^]*Sec-WebSocket-Key/,
      ],
      [
        handshakeHead(path.replace("websocket", "ndjson"), node(0)),
        /^HTTP\/1\.1 400 [^]*stream=websocket/,
      ],
      ["NOT HTTP\r\n\r\n", /^HTTP\/1\.1 400 [^]*not HTTP/],
    ];
    for (const [head, expected] of refusals) {
      const { conn, answer } = await send(m.feedSocketPort, head);
      assert.match(answer, expected);
      assert.equal((await untilClosed(conn)).length, 0, "closed after the answer");
      conn.close();
    }
  });
});

Deno.test("feed socket port: pages from the cursor, heartbeats, resume by cursor, an expired cursor its socket's only line", async () => {
  await inManager(async (m) => {
    await world(m.url);
    assert.deepEqual(await call(m.url, "GET", "feed/socket", node(0)), {
      port: m.feedSocketPort,
      path: "/api/v1/feed",
    });
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const before = await call(m.url, "PUT", `${NET}/ports/p0`, ADMIN, { node: "n1" });
    const f = followSocket(m.socketUrl, node(0), cursor);
    const first = await f.next();
    assert.deepEqual(portIds(first), [before.id]);
    assert.deepEqual(await f.next(), { cursor: first!.cursor, events: [] });
    f.ws.close();
    // Resumed from its last cursor: what came meanwhile, nothing twice.
    const made = await call(m.url, "PUT", `${NET}/ports/p1`, ADMIN, { node: "n1" });
    const again = followSocket(m.socketUrl, node(0), first!.cursor);
    assert.deepEqual(portIds(await again.changes()), [made.id]);
    const next = await call(m.url, "PUT", `${NET}/ports/p2`, ADMIN, { node: "n1" });
    assert.deepEqual(portIds(await again.changes()), [next.id]);
    again.ws.close();

    const stale = followSocket(m.socketUrl, node(0), "00000000:1");
    const only = await stale.next() as unknown as { error: { code: string } };
    assert.equal(only.error.code, "feed_expired");
    assert.equal(await stale.next(), undefined);
    assert.equal(stale.closed?.code, 1000);
  });
});

Deno.test("feed socket port: a socket opened without a cursor follows from now, its first page's cursor one a long poll resumes from", async () => {
  await inManager(async (m) => {
    await world(m.url);
    await call(m.url, "PUT", `${NET}/ports/p0`, ADMIN, { node: "n1" });
    const f = followSocket(m.socketUrl, node(0));
    const first = await f.next();
    assert.deepEqual(
      first?.events,
      [],
      "what was made before the socket is the listing's, not the feed's",
    );
    const made = await call(m.url, "PUT", `${NET}/ports/p1`, ADMIN, { node: "n1" });
    assert.deepEqual(portIds(await f.changes()), [made.id]);
    f.ws.close();
    const polled = await call(m.url, "GET", `feed?after=${first!.cursor}&timeout=0`, node(0));
    assert.deepEqual(portIds(polled), [made.id]);
  });
});

Deno.test("attack: a follower that never reads is cut off at 1 MiB on the socket port, while the others get every change", async () => {
  await inManager(async (m) => {
    await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
    await call(m.url, "POST", "tenants/acme/security-groups", ADMIN, { name: "big" });
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const slow = await send(
      m.feedSocketPort,
      handshakeHead(`/api/v1/feed?after=${cursor}&timeout=60&stream=websocket`, node(0)),
    );
    assert.match(slow.answer, /^HTTP\/1\.1 101 /);
    const fast = Array.from(
      { length: FOLLOWERS },
      (_, i) => followSocket(m.socketUrl, node(i + 1), cursor),
    );
    for (const f of fast) await f.next();
    const rounds = await changeUntilSlowCut(m.url, ADMIN, fast);
    assert.ok(rounds > 100, `cut after ${rounds} changes: only once far behind`);
    for (const f of fast) {
      assert.equal(f.closed, undefined);
      f.ws.close();
    }
    slow.conn.close();
  });
});

Deno.test("attack: a client's unmasked or data frame closes its socket only; a ping is answered, a close closed", async () => {
  await inManager(async (m) => {
    await world(m.url);
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const path = `/api/v1/feed?after=${cursor}&timeout=60&stream=websocket`;
    const other = followSocket(m.socketUrl, node(1), cursor);
    await other.next();

    const opened = async () => {
      const s = await send(m.feedSocketPort, handshakeHead(path, node(0)));
      assert.match(s.answer, /^HTTP\/1\.1 101 /);
      return s.conn;
    };
    const closeCode = (bytes: Uint8Array) => {
      // The last frame is the close: 0x88, its length, then the code.
      const at = bytes.lastIndexOf(0x88);
      assert.ok(at >= 0, "a close frame");
      return (bytes[at + 2] << 8) | bytes[at + 3];
    };
    const unmasked = await opened();
    await unmasked.write(clientFrame(0x9, ENC.encode("hi"), false));
    assert.equal(closeCode(await untilClosed(unmasked)), 1002);
    unmasked.close();
    const data = await opened();
    await data.write(clientFrame(0x2, ENC.encode("data")));
    assert.equal(closeCode(await untilClosed(data)), 1008);
    data.close();

    const polite = await opened();
    await polite.write(clientFrame(0x9, ENC.encode("hi")));
    const pong = new Uint8Array(16);
    let n = 0;
    while (n < 4) n += (await polite.read(pong.subarray(n)))!;
    assert.deepEqual([...pong.subarray(0, 4)], [0x8a, 2, ...ENC.encode("hi")]);
    await polite.write(clientFrame(0x8, new Uint8Array([0x03, 0xe8])));
    assert.equal(closeCode(await untilClosed(polite)), 1000);
    polite.close();

    const made = await call(m.url, "PUT", `${NET}/ports/p0`, ADMIN, { node: "n1" });
    assert.deepEqual(portIds(await other.changes()), [made.id]);
    assert.equal(other.closed, undefined);
    other.ws.close();
  });
});

Deno.test("attack: new connections beyond an address's budget are closed at once, the budget shared with the API's port", async () => {
  await inManager(async (m) => {
    const held: Deno.Conn[] = [];
    // Two of the burst of three go to the API's port (one here, one by the client's call).
    const { cursor } = await call(m.url, "GET", "feed", node(0));
    const path = `/api/v1/feed?after=${cursor}&stream=websocket`;
    const first = await send(m.feedSocketPort, handshakeHead(path, node(0)));
    held.push(first.conn);
    assert.match(first.answer, /^HTTP\/1\.1 101 /);
    const over = await send(m.feedSocketPort, handshakeHead(path, node(1)));
    held.push(over.conn);
    assert.equal(over.answer, "", "closed without an answer");
    for (const c of held) c.close();
  }, { connectionsPerSecond: 0.001, connectionBurst: 2 });
});

Deno.test("feed socket port: the client finds it and follows there; a manager restarted mid-follow ends the socket, the old cursor expires", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-listener-test-" });
  let m = await guarded(dir);
  try {
    await world(m.url);
    const client = new ManagerClient(m.url, node(0));
    const cursor = await client.feedCursor();
    await call(m.url, "PUT", `${NET}/ports/p0`, ADMIN, { node: "n1" });
    const pages: { cursor: string; events: unknown[] }[] = [];
    let seen!: () => void;
    const first = new Promise<void>((r) => (seen = r));
    const following = client.feedSocket(cursor, 1, (p) => {
      pages.push(p);
      seen();
    });
    await first;
    assert.equal(pages[0].events.length, 1);
    await m.shutdown();
    assert.equal(await following, "ended");
    m = await guarded(dir);
    // The restarted manager (its socket port found anew) says over the socket that the old
    // cursor expired, as a stream does: the agent lists again without asking a stream first.
    const again = new ManagerClient(m.url, node(0));
    assert.equal(await again.feedSocket(pages[0].cursor, 1, () => {}), "expired");
    const fresh = await again.feedCursor();
    const made = await call(m.url, "PUT", `${NET}/ports/p1`, ADMIN, { node: "n1" });
    const stop = new AbortController();
    const resumed = again.feedSocket(fresh, 1, (p) => {
      if (p.events.length > 0) {
        assert.equal(JSON.stringify(p.events).includes(made.id), true);
        stop.abort();
      }
    }, stop.signal);
    await assert.rejects(resumed);
    assert.ok(stop.signal.aborted, "the new page came over the socket");
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("attack: over the socket port a cluster's node sees none of another cluster's ports, an unregistered cluster's token gets no socket, and a change of its reach ends its socket", async () => {
  await inManager(
    async (m) => {
      const TOK = CLUSTER_TOKEN;
      await call(m.url, "POST", "tenants", ADMIN, { name: "acme" });
      await call(m.url, "POST", "tenants", ADMIN, { name: "globex" });
      await call(m.url, "POST", "clusters", ADMIN, { name: "east", tenants: ["acme"] });
      await call(m.url, "POST", "clusters", ADMIN, { name: "west", tenants: ["acme", "globex"] });
      await call(m.url, "POST", "tenants/acme/networks", ADMIN, {
        name: "blue",
        cidr: "10.1.0.0/24",
      });
      await call(m.url, "POST", "tenants/globex/networks", ADMIN, {
        name: "red",
        cidr: "10.2.0.0/24",
      });
      await call(m.url, "PUT", "nodes/n1", TOK.westN1, { underlayIp: "192.0.2.2" });
      const { cursor } = await call(m.url, "GET", "feed", TOK.eastN1);

      const north = await send(
        m.feedSocketPort,
        handshakeHead(`/api/v1/feed?after=${cursor}&stream=websocket`, TOK.northN1),
      );
      north.conn.close();
      assert.match(north.answer, /^HTTP\/1\.1 4\d\d /);

      const east = followSocket(m.socketUrl, TOK.eastN1, cursor);
      await east.next();
      await call(m.url, "PUT", "tenants/globex/networks/red/ports/g1", TOK.westN1, { node: "n1" });
      await call(m.url, "PUT", "tenants/acme/networks/blue/ports/b1", TOK.westN1, { node: "n1" });
      const page = await east.changes();
      const seen = page!.events.map((e) => JSON.stringify(e));
      assert.equal(seen.length, 1, `east sees blue's port only: ${seen}`);
      assert.match(seen[0], /"node":"n1@west"/);
      assert.ok(!seen.join().includes("globex") && !seen.join().includes("red"));

      // East may use globex now: what it was told no longer holds, its socket ends with feed_expired.
      await call(m.url, "PATCH", "clusters/east", ADMIN, { tenants: ["acme", "globex"] });
      let last = await east.next();
      while (last && !(last as { error?: unknown }).error) last = await east.next();
      assert.equal((last as unknown as { error: { code: string } }).error.code, "feed_expired");
      await east.next();
      assert.equal(east.closed?.code, 1000);
    },
    {},
    CLUSTER_TOKENS,
  );
});

Deno.test("a storm of handshakes (every node reconnecting at once) reaches the app a few at a time, all answered; a head still trickling holds no turn", async () => {
  const atOnce = 8;
  const storm = atOnce * 3;
  let inApp = 0;
  let most = 0;
  const entered = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const listener = serveFeedSockets({
    hostname: "127.0.0.1",
    port: 0,
    limits: { ...DEFAULT_GUARD, headerTimeoutMs: 60_000 },
    budget: new TokenBuckets<string>(0, 0),
    handshakesAtOnce: atOnce,
    handler: async () => {
      most = Math.max(most, ++inApp);
      if (inApp === atOnce) entered.resolve();
      await release.promise;
      inApp--;
      return new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
    },
  });
  const port = listener.addr.port;
  // Heads that never end: they must not hold a turn the complete ones wait for.
  const trickling = await Promise.all(
    Array.from({ length: atOnce }, async () => {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      await conn.write(ENC.encode("GET /api/v1/feed?after=x&stream=websocket HTTP/1.1\r\n"));
      return conn;
    }),
  );
  try {
    const answers = Array.from(
      { length: storm },
      () => send(port, handshakeHead("/api/v1/feed?after=x&stream=websocket")),
    );
    await entered.promise;
    release.resolve();
    const answered = await Promise.all(answers);
    for (const { conn, answer } of answered) {
      assert.match(answer, /^HTTP\/1\.1 200 /);
      conn.close();
    }
    assert.equal(most, atOnce, "handshakes in the app at the same time");
  } finally {
    for (const conn of trickling) conn.close();
    await listener.shutdown();
  }
});
