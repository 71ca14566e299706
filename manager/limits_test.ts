/**
 * Issue 15, limits on what a client controls and what it may read: each test is the hostile
 * client's request and its refusal. The first tests run in process (app.request); those about
 * connections run a real listener on loopback.
 */
import assert from "node:assert/strict";
import { createApp, createContext, openKvStore, TokenTable } from "./mod.ts";
import { serveGuarded } from "./conn_guard.ts";
import { ensureTenant } from "./service/tenants.ts";
import { must, mustFail, net, testApp, TOKEN, unchanged } from "./test_support.ts";

Deno.test("attack: a huge URL or query is a 414 with a JSON error", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const r = await unchanged(t, () => t.call("GET", `ports?node=${"a".repeat(9000)}`));
  mustFail(r, 414, "uri_too_long", { message: /at most 8192/ });
  mustFail(await t.call("GET", `tenants/${"a".repeat(9000)}`), 414, "uri_too_long");
});

Deno.test("attack: a body that is not application/json is a 415, whatever it holds", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const post = async (type: string | null, body: string) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN.admin}` };
    if (type !== null) headers["content-type"] = type;
    const res = await t.app.request("/api/v1/tenants", { method: "POST", headers, body });
    return { status: res.status, body: await res.json() };
  };
  const send = (type: string | null, body: string) => unchanged(t, () => post(type, body));
  for (
    const type of [null, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
  ) {
    mustFail(await send(type, '{"name":"sneaky"}'), 415, "unsupported_media_type", {
      message: /Content-Type: application\/json/,
    });
  }
  must(await post("application/json; charset=utf-8", '{"name":"fine"}'), 201);
});

Deno.test("attack: a body beyond the limit is a 413, with or without a Content-Length", async () => {
  using t = await testApp({ tenants: ["acme"], limits: { bodyBytes: 4096 } });
  const big = JSON.stringify(net("x", "10.9.0.0/24", { description: "x".repeat(5000) }));
  mustFail(
    await unchanged(t, () => t.call("POST", "tenants/acme/networks", big)),
    413,
    "body_too_large",
  );
  // Streamed (chunked): no length announced; the reader stops at the limit.
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode(" ".repeat(1000)));
      c.close();
    },
  });
  const res = await t.app.request("/api/v1/tenants/acme/networks", {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN.admin}`, "content-type": "application/json" },
    body: stream,
  });
  mustFail({ status: res.status, body: await res.json() }, 413, "body_too_large");
});

Deno.test("attack: too many items and out-of-range numbers are refused, never wrapped", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const labels = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"]));
  mustFail(
    await unchanged(t, () => t.call("PUT", "nodes/worker1", { underlayIp: "192.0.2.1", labels })),
    400,
    "invalid_request",
    { field: "labels", message: /at most 64/ },
  );
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("x", "10.9.0.0/24", { excludes: Array(257).fill("10.9.0.1") }),
    ),
    400,
    "invalid_request",
    { field: "excludes" },
  );
  // A timeout beyond setTimeout's 2^31-1 ms would fire at once: refused instead.
  for (const timeout of ["99999999999", "2147484", "61", "", "-1", "1e3", "0x10", "5.5"]) {
    mustFail(
      await t.call("GET", `feed?after=00000000:0&timeout=${timeout}`, undefined, TOKEN.worker1),
      400,
      "invalid_request",
      { field: "query.timeout" },
    );
  }
  for (const mtu of [1e300, 2 ** 53, -1, 9217]) {
    mustFail(
      await t.call("POST", "tenants/acme/networks", net("x", "10.9.0.0/24", { mtu })),
      400,
      "invalid_request",
      { field: "mtu" },
    );
  }
});

Deno.test("attack: /metrics needs a metrics or admin token; a metrics token reads nothing else", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("secret", "10.9.0.0/24")), 201);
  mustFail(await t.call("GET", "/metrics", undefined, null), 401, "unauthorized");
  mustFail(await t.call("GET", "/metrics", undefined, TOKEN.acme), 403, "forbidden", {
    message: /metrics or admin/,
  });
  mustFail(await t.call("GET", "/metrics", undefined, TOKEN.worker1), 403, "forbidden");
  assert.match(
    must(await t.call("GET", "/metrics", undefined, TOKEN.metrics), 200),
    /network="secret"/,
  );
  for (const path of ["tenants", "ports", "nodes", "physnets", "tenants/acme/networks"]) {
    mustFail(await t.call("GET", path, undefined, TOKEN.metrics), 403, "forbidden");
  }
});

Deno.test("attack: a tenant reads of nodes and physnets only what it needs", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(
    await t.call(
      "PUT",
      "nodes/worker1",
      { underlayIp: "192.0.2.11", labels: { rack: "r1" } },
      TOKEN.worker1,
    ),
    201,
  );
  must(
    await t.call("POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] }),
    201,
  );
  must(
    await t.call(
      "POST",
      "tenants/globex/networks",
      net("hidden", "10.9.0.0/24", { type: "flat", physnet: "phys1" }),
    ),
    201,
  );
  assert.deepEqual(must(await t.call("GET", "nodes", undefined, TOKEN.acme), 200).items, [{
    name: "worker1",
  }]);
  assert.deepEqual(must(await t.call("GET", "nodes/worker1", undefined, TOKEN.acme), 200), {
    name: "worker1",
  });
  const phys = must(await t.call("GET", "physnets/phys1", undefined, TOKEN.acme), 200);
  assert.deepEqual(Object.keys(phys).sort(), ["name", "vlanRanges"]);
  assert.ok(
    !JSON.stringify(must(await t.call("GET", "physnets", undefined, TOKEN.acme), 200)).includes(
      "globex",
    ),
  );
  // Nodes and admins see it all.
  assert.equal(
    must(await t.call("GET", "nodes/worker1", undefined, TOKEN.worker2), 200).underlayIp,
    "192.0.2.11",
  );
  assert.equal(must(await t.call("GET", "physnets/phys1"), 200).flatNetwork, "globex/hidden");
});

// ---- on a real listener

async function listener(limits: Record<string, number>) {
  const store = await openKvStore(":memory:");
  const ctx = createContext(store, { vniRanges: ["5000-5999"], underlayMtu: 1500 });
  await ensureTenant(ctx, "admin");
  const gone: string[] = [];
  const internal: unknown[] = [];
  const slow: string[] = [];
  const app = createApp({
    ctx,
    tokens: new TokenTable([{ token: TOKEN.admin, scope: "admin" }]),
    limits,
    onInternalError: (err) => internal.push(err),
    onClientGone: (w) => gone.push(w.reason),
  });
  const server = await serveGuarded({
    hostname: "127.0.0.1",
    port: 0,
    limits,
    onSlowClient: (w) => slow.push(w.reason),
  }, app.fetch);
  return {
    port: server.addr.port,
    gone,
    internal,
    slow,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      ctx.feed.close();
      store.close();
    },
  };
}

/**
 * Sends `parts` with pauses between them; the first line of the answer, or "closed" ("closed while
 * sending" when a part could not be written: the server closed before the client was done).
 */
async function raw(port: number, parts: string[], pauseMs: number, waitMs = 5000): Promise<string> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    for (const [i, p] of parts.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, pauseMs));
      try {
        await c.write(new TextEncoder().encode(p));
      } catch {
        return "closed while sending";
      }
    }
    const buf = new Uint8Array(65536);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const n = await Promise.race([
      c.read(buf).catch(() => null),
      new Promise<"wait">((r) => timer = setTimeout(() => r("wait"), waitMs)),
    ]);
    clearTimeout(timer);
    if (n === "wait") return "still open";
    if (n === null) return "closed";
    return new TextDecoder().decode(buf.subarray(0, n)).split("\r\n")[0];
  } finally {
    try {
      c.close();
    } catch { /* closed */ }
  }
}

const AUTH = `Authorization: Bearer ${TOKEN.admin}\r\n`;

Deno.test("attack: a client trickling its request header is disconnected", async () => {
  await using l = await listener({ headerTimeoutMs: 300, idleTimeoutMs: 2000 });
  const trickle = Array.from(
    { length: 20 },
    (_, i) => i === 0 ? "GET /healthz HTTP/1.1\r\n" : `X-${i}: y\r\n`,
  );
  // Twenty parts, 50 ms apart: the header timeout (300 ms) cuts it long before the last.
  assert.equal(await raw(l.port, trickle, 50), "closed while sending");
  assert.deepEqual(l.slow, ["no complete request header within 300 ms"]);
  // One that connects and says nothing is closed as well.
  assert.equal(await raw(l.port, [], 0, 2000), "closed");
  assert.ok(l.slow.length >= 2, JSON.stringify(l.slow));
  // A well-behaved client on the same listener is served.
  assert.equal(
    await raw(l.port, ["GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"], 0),
    "HTTP/1.1 200 OK",
  );
});

Deno.test("attack: a client trickling its body gets 408, one leaving mid-body is logged as gone", async () => {
  await using l = await listener({ bodyTimeoutMs: 300, headerTimeoutMs: 2000 });
  const head =
    `POST /api/v1/tenants HTTP/1.1\r\nHost: x\r\n${AUTH}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n`;
  assert.equal(await raw(l.port, [head, '{"na'], 0), "HTTP/1.1 408 Request Timeout");
  // Leaves with the body half sent.
  const c = await Deno.connect({ hostname: "127.0.0.1", port: l.port });
  await c.write(new TextEncoder().encode(head + '{"name":'));
  await new Promise((r) => setTimeout(r, 100));
  c.close();
  for (let i = 0; i < 50 && l.gone.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(l.gone.length, 2, JSON.stringify(l.gone));
  assert.match(l.gone[1], /went away/);
  assert.deepEqual(l.internal, []);
});

Deno.test("attack: a URL beyond what the HTTP parser buffers is refused, not reset", async () => {
  await using l = await listener({});
  const line = await raw(l.port, [
    `GET /api/v1/tenants/${"a".repeat(200_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  ], 0);
  assert.match(line, /^HTTP\/1.1 4\d\d/);
  assert.equal(
    await raw(l.port, [
      `GET /api/v1/ports?node=${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n${AUTH}\r\n`,
    ], 0),
    "HTTP/1.1 414 URI Too Long",
  );
  assert.deepEqual(l.internal, []);
});
