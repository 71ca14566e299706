/**
 * Issue 33, finding 4: one tenant's load cannot take more than its share. Each test is a hostile
 * tenant's load and its refusal, against a real manager (startManager) over real HTTP on a Deno KV
 * file, while another tenant and the system's own agents are still served.
 */
import assert from "node:assert/strict";
import { ConfigSchema } from "./config.ts";
import { DEFAULT_FAIRNESS, Fairness, type ThrottledError } from "./fairness.ts";
import { type RunningManager, startManager } from "./server.ts";
import { must, mustFail, net, type Reply, TOKEN } from "./test_support.ts";

const TOKENS = [
  { token: TOKEN.admin, scope: "admin" },
  { token: TOKEN.acme, scope: "tenant", tenant: "acme" },
  { token: TOKEN.globex, scope: "tenant", tenant: "globex" },
  { token: TOKEN.worker1, scope: "node", node: "worker1" },
  { token: TOKEN.metrics, scope: "metrics" },
];

interface Manager {
  url: string;
  call(method: string, path: string, body?: unknown, token?: string): Promise<Reply>;
  /** The last answer's headers, for Retry-After. */
  send(method: string, path: string, body: BodyInit | undefined, token: string): Promise<Response>;
  metrics(): Promise<string>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A manager on a KV file in a temp dir, with tenants acme and globex and their network blue. */
async function manager(more: Record<string, unknown> = {}): Promise<Manager> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-fairness-" });
  const config = ConfigSchema.parse({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: TOKENS,
    quarantineSeconds: 0,
    logLevel: "error",
    ...more,
  });
  const running: RunningManager = await startManager(config);
  const send = (method: string, path: string, body: BodyInit | undefined, token: string) =>
    fetch(`${running.url}${path.startsWith("/") ? path : `/api/v1/${path}`}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body,
    });
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    token: string = TOKEN.admin,
  ) => {
    const res = await send(
      method,
      path,
      body === undefined ? undefined : JSON.stringify(body),
      token,
    );
    const text = await res.text();
    return { status: res.status, body: text && text[0] === "{" ? JSON.parse(text) : text };
  };
  for (const tenant of ["acme", "globex"]) {
    must(await call("POST", "tenants", { name: tenant }), 201);
    const cidr = tenant === "acme" ? "10.1.0.0/16" : "10.2.0.0/16";
    must(await call("POST", `tenants/${tenant}/networks`, net("blue", cidr)), 201);
  }
  return {
    url: running.url,
    call,
    send,
    metrics: async () => must(await call("GET", "/metrics", undefined, TOKEN.metrics), 200),
    async [Symbol.asyncDispose]() {
      await running.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** What another tenant and a node agent do while the attack goes on: all must succeed. */
async function othersServed(m: Manager, id: string): Promise<void> {
  must(await m.call("GET", "tenants/globex/networks", undefined, TOKEN.globex), 200);
  must(await m.call("PUT", `tenants/globex/networks/blue/ports/${id}`, {}, TOKEN.globex), 201);
  must(await m.call("GET", "nodes", undefined, TOKEN.worker1), 200);
}

function mustThrottle(res: Response, body: Reply["body"], limit: RegExp): number {
  mustFail({ status: res.status, body }, 429, "too_many_requests", { message: limit });
  const after = Number(res.headers.get("retry-after"));
  assert.ok(
    Number.isInteger(after) && after >= 1,
    `Retry-After: ${res.headers.get("retry-after")}`,
  );
  return after;
}

Deno.test("attack: a tenant beyond its rate gets 429 with Retry-After; others are served", async () => {
  // A burst of 5 and a refill slower than the test: the 6th request onwards is over the rate.
  await using m = await manager({ fairness: { tenant: { ratePerSecond: 0.01, burst: 5 } } });
  const answers = [];
  for (let i = 0; i < 8; i++) {
    const res = await m.send("GET", "tenants/acme/networks", undefined, TOKEN.acme);
    answers.push({ res, body: await res.json() });
  }
  assert.deepEqual(answers.map((a) => a.res.status), [200, 200, 200, 200, 200, 429, 429, 429]);
  const after = mustThrottle(answers[5].res, answers[5].body, /tenant "acme" is over its rate/);
  // The next token comes in 100 s at 0.01 a second.
  assert.ok(after > 60 && after <= 100, String(after));
  await othersServed(m, "g1");
  // A write is refused before it does anything: no port made.
  const res = await m.send("PUT", "tenants/acme/networks/blue/ports/p1", "{}", TOKEN.acme);
  mustThrottle(res, await res.json(), /rate/);
  assert.deepEqual(must(await m.call("GET", "tenants/acme/networks/blue/ports"), 200).items, []);
  assert.match(
    await m.metrics(),
    /knitter_manager_throttled_requests_total\{principal="tenant",reason="rate"\} 4/,
  );
});

/** Starts a request whose body never finishes: it stays in flight until `finish` is called. */
async function held(m: Manager, path: string, token: string) {
  const c = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(m.url).port) });
  const body = "{        }";
  await c.write(new TextEncoder().encode(
    `PUT /api/v1/${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 3)}`,
  ));
  return {
    async finish(): Promise<string> {
      await c.write(new TextEncoder().encode(body.slice(3)));
      const buf = new Uint8Array(4096);
      const n = await c.read(buf);
      c.close();
      return new TextDecoder().decode(buf.subarray(0, n ?? 0)).split("\r\n")[0];
    },
  };
}

/** Waits until the manager reports `n` tenant requests in flight. */
async function inFlight(m: Manager, n: number): Promise<void> {
  const want = new RegExp(`knitter_manager_in_flight_requests\\{principal="tenant"\\} ${n}\\n`);
  while (!want.test(await m.metrics())) await new Promise((r) => setTimeout(r, 10));
}

Deno.test("attack: a tenant's requests beyond its concurrency get 429 at once, not a queue", async () => {
  // The time share off: the held requests' time must not refuse the last call (a slow store, as
  // etcd on a loaded machine, made them take more than the share while another tenant was served).
  await using m = await manager({ fairness: { tenant: { concurrent: 2, busyMsPerSecond: 0 } } });
  const first = await held(m, "tenants/acme/networks/blue/ports/h1", TOKEN.acme);
  const second = await held(m, "tenants/acme/networks/blue/ports/h2", TOKEN.acme);
  await inFlight(m, 2);
  // The third is answered while the two still hang: refused, not queued behind them.
  const res = await m.send("GET", "tenants/acme/networks", undefined, TOKEN.acme);
  const after = mustThrottle(res, await res.json(), /2 requests.*in progress/);
  assert.equal(after, 1);
  await othersServed(m, "g1");
  assert.equal(await first.finish(), "HTTP/1.1 201 Created");
  assert.equal(await second.finish(), "HTTP/1.1 201 Created");
  await inFlight(m, 0);
  must(await m.call("GET", "tenants/acme/networks", undefined, TOKEN.acme), 200);
  assert.match(
    await m.metrics(),
    /knitter_manager_throttled_requests_total\{principal="tenant",reason="concurrency"\} 1/,
  );
});

Deno.test("attack: parallel lists beyond a tenant's share are refused; every other answer is whole", async () => {
  await using m = await manager({ fairness: { tenant: { concurrentLists: 1 } } });
  // Lists this small can each finish before the next arrives; a burst that happens not to overlap
  // on a loaded machine is sent again (at most 5 bursts), until two lists met.
  const lists: Reply[] = [];
  for (let burst = 0; burst < 5 && !lists.some((r) => r.status === 429); burst++) {
    lists.push(
      ...await Promise.all(
        Array.from(
          { length: 32 },
          () => m.call("GET", "tenants/acme/networks", undefined, TOKEN.acme),
        ),
      ),
    );
  }
  const statuses = new Set(lists.map((r) => r.status));
  assert.deepEqual([...statuses].sort(), [200, 429], JSON.stringify([...statuses]));
  for (const r of lists) {
    if (r.status === 429) mustFail(r, 429, "too_many_requests", { message: /list/ });
    else assert.equal(r.body.items.length, 1);
  }
  await othersServed(m, "g1");
});

/** `depth` nested arrays: what no API body needs, and what a recursive parser chokes on. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

Deno.test("attack: a deeply nested body is refused with 400 before any work, announced or streamed", async () => {
  await using m = await manager();
  const before = must(await m.call("GET", "tenants/acme/networks"), 200);
  const deep = `{"name":"x","cidr":"10.9.0.0/24","labels":${nested((1 << 20) / 2 - 40)}}`;
  assert.ok(deep.length <= 1 << 20);
  const res = await m.send("POST", "tenants/acme/networks", deep, TOKEN.acme);
  mustFail({ status: res.status, body: await res.json() }, 400, "invalid_json", {
    message: /nested deeper than 32 levels/,
  });
  // Streamed without a length: refused at the first chunk past the depth.
  const chunks = [deep.slice(0, 1000), deep.slice(1000)];
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
      c.close();
    },
  });
  const streamed = await m.send("POST", "tenants/acme/networks", stream, TOKEN.acme);
  mustFail({ status: streamed.status, body: await streamed.json() }, 400, "invalid_json", {
    message: /nested deeper than 32 levels/,
  });
  // Brackets inside strings are text, not nesting: a body within the depth is served.
  must(
    await m.call("POST", "tenants/acme/networks", {
      ...net("brackets", "10.9.0.0/24"),
      description: "[[[[".repeat(20),
    }, TOKEN.acme),
    201,
  );
  const after = must(await m.call("GET", "tenants/acme/networks"), 200);
  assert.deepEqual(after.items.map((n: { name: string }) => n.name), ["blue", "brackets"]);
  assert.equal(before.items.length, 1);
  await othersServed(m, "g1");
  assert.match(
    await m.metrics(),
    /knitter_manager_throttled_requests_total\{principal="tenant",reason="body_depth"\} 2/,
  );
});

Deno.test("attack: an oversized body is refused with 413 and counted; others are served", async () => {
  await using m = await manager({ limits: { bodyBytes: 4096 } });
  const big = JSON.stringify(net("x", "10.9.0.0/24", { description: "x".repeat(5000) }));
  const res = await m.send("POST", "tenants/acme/networks", big, TOKEN.acme);
  mustFail({ status: res.status, body: await res.json() }, 413, "body_too_large");
  await othersServed(m, "g1");
  assert.match(
    await m.metrics(),
    /knitter_manager_throttled_requests_total\{principal="tenant",reason="body_size"\} 1/,
  );
});

Deno.test("the default limits never throttle a node's burst of allocations nor a tenant's parallel writes", async () => {
  await using m = await manager();
  const node = await Promise.all(
    Array.from(
      { length: 100 },
      (_, i) =>
        m.call("PUT", `tenants/acme/networks/blue/ports/n${i}`, { node: "worker1" }, TOKEN.worker1),
    ),
  );
  assert.deepEqual(new Set(node.map((r) => r.status)), new Set([201]));
  const tenant = await Promise.all(
    Array.from(
      { length: 16 },
      (_, i) => m.call("PUT", `tenants/acme/networks/blue/ports/t${i}`, {}, TOKEN.acme),
    ),
  );
  assert.deepEqual(new Set(tenant.map((r) => r.status)), new Set([201]));
  assert.doesNotMatch(await m.metrics(), /knitter_manager_throttled_requests_total\{/);
});

Deno.test("a principal's buckets refill at their rates; a released slot is free again", () => {
  let now = 0;
  const throttled: string[] = [];
  const budgets = {
    ...DEFAULT_FAIRNESS,
    tenant: {
      ratePerSecond: 2,
      burst: 2,
      concurrent: 3,
      concurrentLists: 1,
      busyMsPerSecond: 100,
      busyBurstMs: 1000,
    },
  };
  const f = new Fairness(budgets, (role, reason) => throttled.push(`${role}/${reason}`), () => now);
  const acme = { scope: "tenant", tenant: "acme" } as const;
  const a = f.admit(acme, "list");
  assert.throws(() => f.admit(acme, "list"), /1 lists in progress/);
  f.admit(acme, "call").release();
  assert.throws(() => f.admit(acme, "call"), (e: ThrottledError) => e.retryAfterSeconds === 1);
  // Another tenant has a budget of its own.
  f.admit({ scope: "tenant", tenant: "globex" }, "list").release();
  now += 500; // one token back
  a.release();
  a.release(); // twice is once
  f.admit(acme, "list").release();
  assert.deepEqual(f.inFlight().get("tenant"), 0);
  // A request that holds the manager 3 s spends the 1 s burst and 2 s more of its share: the
  // tenant owes 2,050 ms at 100 ms a second, and pays it while another caller wants the manager.
  now += 1000;
  const slow = f.admit(acme, "call");
  now += 3000;
  slow.release();
  f.admit({ scope: "tenant", tenant: "globex" }, "call").release();
  assert.throws(
    () => f.admit(acme, "call"),
    (e: ThrottledError) => e.reason === "busy" && e.retryAfterSeconds === 21,
  );
  assert.deepEqual(throttled, ["tenant/lists", "tenant/rate", "tenant/busy"]);
});

/** Opens a connection and asks for /healthz: the status line, or "closed" when refused. */
async function connectAndAsk(port: number): Promise<{ line: string; conn: Deno.Conn }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(new TextEncoder().encode("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    const buf = new Uint8Array(4096);
    const n = await conn.read(buf);
    return {
      line: n === null ? "closed" : new TextDecoder().decode(buf.subarray(0, n)).split("\r\n")[0],
      conn,
    };
  } catch {
    return { line: "closed", conn };
  }
}

Deno.test("attack: an address opening connections beyond its budget is closed at once; open ones are served", async () => {
  await using m = await manager({ limits: { connectionsPerSecond: 0.01, connectionBurst: 6 } });
  const port = Number(new URL(m.url).port);
  // The setup's client holds one connection (or a few); open until refused.
  const opened: Deno.Conn[] = [];
  let refused = 0;
  for (let i = 0; i < 8 && refused === 0; i++) {
    const { line, conn } = await connectAndAsk(port);
    opened.push(conn);
    if (line === "closed") refused++;
    else assert.equal(line, "HTTP/1.1 200 OK");
  }
  assert.equal(refused, 1);
  // A connection already open is served as ever.
  await othersServed(m, "g1");
  for (const c of opened) c.close();
  assert.match(await m.metrics(), /knitter_manager_refused_connections_total 1\n/);
});

Deno.test("attack: the console's long-polls count in a tenant's requests in progress, not in its time", async () => {
  await using m = await manager({
    fairness: { tenant: { concurrent: 2, busyMsPerSecond: 1, busyBurstMs: 100 } },
  });
  const feed = async (query: string) => {
    const res = await m.send("GET", `/console/feed${query}`, undefined, TOKEN.acme);
    return { res, body: await res.json() };
  };
  const { cursor } = (await feed("")).body;
  // A long-poll of a second: far more than the tenant's 100 ms of time, yet not charged to it.
  const waited = await feed(`?after=${cursor}&timeout=1`);
  assert.equal(waited.res.status, 200);
  must(await m.call("GET", "tenants/acme/networks", undefined, TOKEN.acme), 200);
  // Two long-polls held: a third request of the tenant is refused at once, the other tenant served.
  const polls = [feed(`?after=${cursor}&timeout=2`), feed(`?after=${cursor}&timeout=2`)];
  await inFlight(m, 2);
  const third = await feed(`?after=${cursor}&timeout=2`);
  mustThrottle(third.res, third.body, /2 requests.*in progress/);
  must(await m.call("GET", "tenants/globex/networks", undefined, TOKEN.globex), 200);
  for (const p of await Promise.all(polls)) assert.equal(p.res.status, 200);
});

Deno.test("the time budget is work-conserving: a tenant alone, or beside the admin or its own long-polls, is not held back for its time", () => {
  let now = 0;
  const tenant = { ...DEFAULT_FAIRNESS.tenant, busyMsPerSecond: 100, busyBurstMs: 100 };
  const f = new Fairness({ ...DEFAULT_FAIRNESS, tenant }, () => {}, () => now);
  const acme = { scope: "tenant", tenant: "acme" } as const;
  const globex = { scope: "tenant", tenant: "globex" } as const;
  // A slow store (etcd under load): ten requests of 500 ms at once weigh their span, 500 ms, and
  // owe 350 ms of the manager's time.
  const slow = Array.from({ length: 10 }, () => f.admit(acme, "call"));
  const poll = f.admit({ scope: "node", node: "n1", cluster: "default" }, "wait");
  now += 500;
  f.admit({ scope: "admin" }, "call").release();
  for (const a of slow) a.release();
  // Nobody else asked for the manager meanwhile (the admin is held to no share; a node's
  // long-poll waits for news): acme goes on.
  f.admit(acme, "call").release();
  // Once another tenant asks, acme pays its debt before it is served again; globex is served.
  f.admit(globex, "call").release();
  assert.throws(
    () => f.admit(acme, "call"),
    (e: ThrottledError) => e.reason === "busy" && e.retryAfterSeconds === 4,
  );
  // A second after the other caller's last request, the manager is acme's alone again.
  now += 1001;
  f.admit(acme, "call").release();
  poll.release();
});
