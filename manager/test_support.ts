/**
 * Test helpers: a manager app on a Deno KV store with admin, tenant and node tokens, called
 * in-process through `app.request()`.
 *
 * With KNITTER_TEST_ETCD_ENDPOINTS set, every app sits on etcd instead, each under a key prefix of
 * its own (one per `path`, so that reopening a path finds its state): the same tests then prove the
 * etcd backend (tests/etcd_api_N_test.ts run them so, in shards).
 */
import assert from "node:assert/strict";
import type { Hono } from "hono";
import {
  createApp,
  createContext,
  openKvStore,
  startManager,
  type Store,
  TokenTable,
} from "./mod.ts";
import type { AppOptions, RequestLimits } from "./app.ts";
import type { TokenConfig } from "./auth.ts";
import { ADMIN_TENANT } from "./server.ts";
import type { Ctx } from "./service/context.ts";
import { ensureTenant } from "./service/tenants.ts";
import { openEtcdStore } from "./store/etcd_store.ts";
import {
  type Check,
  type Key,
  type ListOptions,
  type Mutation,
  StoreUnavailableError,
} from "./store/store.ts";

export const TOKEN = {
  admin: "admin-token-for-tests-0001",
  acme: "acme-token-for-tests-00001",
  globex: "globex-token-for-tests-001",
  worker1: "worker1-token-for-tests-01",
  worker2: "worker2-token-for-tests-01",
  metrics: "metrics-token-for-tests-01",
} as const;

/** Tokens of clusters east, west and north (never registered): a node n1 in each, two monitors. */
export const CLUSTER_TOKEN = {
  eastN1: "east-n1-token-for-tests-001",
  westN1: "west-n1-token-for-tests-001",
  eastMon: "east-monitor-token-for-tests",
  westMon: "west-monitor-token-for-tests",
  northN1: "north-n1-token-for-tests-01",
} as const;

export const CLUSTER_TOKENS: TokenConfig[] = [
  { token: CLUSTER_TOKEN.eastN1, scope: "node", node: "n1", cluster: "east" },
  { token: CLUSTER_TOKEN.westN1, scope: "node", node: "n1", cluster: "west" },
  { token: CLUSTER_TOKEN.eastMon, scope: "monitor", cluster: "east" },
  { token: CLUSTER_TOKEN.westMon, scope: "monitor", cluster: "west" },
  { token: CLUSTER_TOKEN.northN1, scope: "node", node: "n1", cluster: "north" },
];

export interface Reply {
  status: number;
  // deno-lint-ignore no-explicit-any
  body: any;
}

export interface TestApp {
  app: Hono;
  ctx: Ctx;
  /** Internal errors (answered 500) and clients gone mid-request, as the app reported them. */
  internal: unknown[];
  gone: { method: string; path: string; reason: string }[];
  store: Store;
  /**
   * One request. A path without a leading "/" is under /api/v1/. A string body is sent as is,
   * anything else as JSON. The token defaults to the admin's; null sends none.
   */
  call(method: string, path: string, body?: unknown, token?: string | null): Promise<Reply>;
  close(): void;
  [Symbol.dispose](): void;
}

export interface TestAppOptions {
  /** Deno KV path; ":memory:" when absent. */
  path?: string;
  /** A store opened by the test (a real etcd of its own): used instead of `path`. */
  store?: Store;
  vniRanges?: string[];
  /** Tenants created up front (besides the built-in admin tenant). */
  tenants?: string[];
  limits?: Partial<RequestLimits>;
  /** Budgets of requests per role, over the defaults (fairness.ts). */
  fairness?: AppOptions["fairness"];
  /** Quarantine of released addresses and MACs (service/quarantine.ts); 0 (none) when absent. */
  quarantineSeconds?: number;
  /** Address history retention (service/history.ts); 0 (no history) when absent. */
  historyRetentionDays?: number;
  /** The history's clock (ms), for tests that move time. */
  clock?: () => number;
  /** Tokens besides the built-in ones (e.g. of other clusters). */
  tokens?: TokenConfig[];
  /** The manager's bgp.advertisableRanges (none: no network may be advertised). */
  advertisableRanges?: string[];
  /** The console's Prometheus (console/metrics_proxy.ts); none when absent. */
  prometheusUrl?: string;
  /** The manager's underlayMtu; 1500 when absent. */
  underlayMtu?: number;
}

export async function testApp(options: TestAppOptions = {}): Promise<TestApp> {
  const store = options.store ?? await openTestStore(options.path);
  const ctx = createContext(store, {
    vniRanges: options.vniRanges ?? ["5000-5999"],
    underlayMtu: options.underlayMtu ?? 1500,
    quarantineSeconds: options.quarantineSeconds ?? 0,
    historyRetentionDays: options.historyRetentionDays ?? 0,
    bgp: { advertisableRanges: options.advertisableRanges ?? [] },
  });
  if (options.clock) ctx.clock = options.clock;
  await ensureTenant(ctx, ADMIN_TENANT);
  const internal: unknown[] = [];
  const gone: TestApp["gone"] = [];
  const app = createApp({
    ctx,
    tokens: new TokenTable([
      { token: TOKEN.admin, scope: "admin" },
      { token: TOKEN.acme, scope: "tenant", tenant: "acme" },
      { token: TOKEN.globex, scope: "tenant", tenant: "globex" },
      { token: TOKEN.worker1, scope: "node", node: "worker1" },
      { token: TOKEN.worker2, scope: "node", node: "worker2" },
      { token: TOKEN.metrics, scope: "metrics" },
      ...options.tokens ?? [],
    ]),
    limits: options.limits,
    fairness: options.fairness,
    onInternalError: (err) => {
      internal.push(err);
      console.error("internal error in test app:", err);
    },
    onClientGone: (what) => gone.push(what),
    prometheusUrl: options.prometheusUrl,
  });
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    token: string | null = TOKEN.admin,
  ) => {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await app.request(path.startsWith("/") ? path : `/api/v1/${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    const json = res.headers.get("content-type")?.includes("application/json");
    return { status: res.status, body: json && text ? JSON.parse(text) : text };
  };
  for (const name of options.tenants ?? []) must(await call("POST", "tenants", { name }), 201);
  const close = () => {
    ctx.feed.close();
    store.close();
  };
  return { app, ctx, store, internal, gone, call, close, [Symbol.dispose]: close };
}

const ETCD_ENDPOINTS = Deno.env.get("KNITTER_TEST_ETCD_ENDPOINTS");
const RUN = crypto.randomUUID().slice(0, 8);

/** The store of one test app: Deno KV, or etcd when the environment names one. */
export function openTestStore(path?: string): Promise<Store> {
  if (!ETCD_ENDPOINTS) return openKvStore(path ?? ":memory:");
  const name = !path || path === ":memory:" ? crypto.randomUUID() : path;
  return openEtcdStore({ endpoints: ETCD_ENDPOINTS.split(","), prefix: `test/${RUN}/${name}/` });
}

/** Asserts the status and returns the body. */
// deno-lint-ignore no-explicit-any
export function must(reply: Reply, status: number): any {
  assert.equal(
    reply.status,
    status,
    `expected ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`,
  );
  return reply.body;
}

/** Asserts a documented error answer: the status, the code, and optionally field and message. */
export function mustFail(
  reply: Reply,
  status: number,
  code: string,
  expect: { field?: string; message?: RegExp } = {},
): string {
  assert.equal(
    reply.status,
    status,
    `expected ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`,
  );
  const err = reply.body?.error;
  assert.ok(
    err && typeof err.message === "string" && err.message.length > 0,
    "error body with a message",
  );
  assert.deepEqual(Object.keys(reply.body), ["error"]);
  assert.equal(err.code, code, err.message);
  if (expect.field !== undefined) assert.equal(err.field, expect.field, err.message);
  if (expect.message) assert.match(err.message, expect.message);
  return err.message;
}

/** Every key, value and version in the store: equal dumps mean nothing was written. */
export async function dump(store: Store): Promise<unknown[]> {
  const out = [];
  for await (const e of store.list([])) out.push(e);
  return out;
}

/** Runs `fn`, asserts that it wrote nothing to the store, and returns what it returned. */
export async function unchanged<T>(t: TestApp, fn: () => Promise<T>): Promise<T> {
  const before = await dump(t.store);
  const result = await fn();
  assert.deepEqual(await dump(t.store), before, "the store changed");
  return result;
}

/** `t.call` that asserts it wrote nothing to the store: for a request that must be refused. */
export function attempt(t: TestApp) {
  return (method: string, path: string, body?: unknown, token?: string | null) =>
    unchanged(t, () => t.call(method, path, body, token));
}

/** A network body with defaults for the fields a test does not care about. */
export function net(name: string, cidr: string, more: Record<string, unknown> = {}) {
  return { name, cidr, ...more };
}

/** What a watched store tells before each read, listing and commit (a throw fails the call). */
export interface StoreWatch {
  get?(keys: Key[]): void;
  list?(prefix: Key, options?: ListOptions): void;
  commit?(checks: Check[], mutations: Mutation[]): void;
}

/** `store`, telling `watch` of each listing and commit. */
export function watchedStore(store: Store, watch: StoreWatch): Store {
  return {
    get: (key) => {
      watch.get?.([key]);
      return store.get(key);
    },
    getMany: (k) => {
      watch.get?.(k);
      return store.getMany(k);
    },
    list: (prefix, options) => {
      watch.list?.(prefix, options);
      return store.list(prefix, options);
    },
    commit: async (checks, mutations) => {
      watch.commit?.(checks, mutations);
      return await store.commit(checks, mutations);
    },
    close: () => store.close(),
  };
}

/**
 * Makes the app's commits fail from the `n`-th on (counted from now), as a store gone away would;
 * the answer restores the store.
 */
export function failCommitsFrom(t: TestApp, n: number): () => void {
  const store = t.ctx.store;
  let commits = 0;
  t.ctx.store = watchedStore(store, {
    commit: () => {
      if (++commits >= n) throw new StoreUnavailableError("the store went away");
    },
  });
  return () => t.ctx.store = store;
}

/** A streamed feed as a test reads it: each line parsed, in order. */
export interface FeedLines {
  status: number;
  // deno-lint-ignore no-explicit-any
  next(): Promise<any>;
  /** The follower goes away (its answer is cancelled). */
  cancel(): Promise<void>;
}

/** Opens `GET /api/v1/feed?after=…&stream=ndjson` on the test app as `token`. */
export async function streamFeed(
  t: TestApp,
  token: string,
  after: string,
  timeoutS = 25,
): Promise<FeedLines> {
  const res = await t.app.request(
    `/api/v1/feed?after=${after}&timeout=${timeoutS}&stream=ndjson`,
    { headers: { authorization: `Bearer ${token}` } },
  );
  return feedLines(res);
}

/** The lines of a streamed feed's answer (an error answer is one line: its body). */
export function feedLines(res: Response): FeedLines {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  const next = async () => {
    for (;;) {
      const at = rest.indexOf("\n");
      if (at >= 0) {
        const line = rest.slice(0, at);
        rest = rest.slice(at + 1);
        return JSON.parse(line);
      }
      const { done, value } = await reader.read();
      if (done) {
        const last = rest;
        rest = "";
        return last ? JSON.parse(last) : undefined;
      }
      rest += value;
    }
  };
  return { status: res.status, next, cancel: () => reader.cancel() };
}

/** One API call to a manager at `url` as `token`; its JSON answer (asserted 2xx). */
export async function callApi(
  url: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
) {
  const r = await fetch(`${url}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A manager on loopback with `admin`'s token and the node tokens `nodes[i]` (of nodes n0, n1, …). */
export function loopbackManager(
  dir: string,
  admin: string,
  nodes: string[],
  limits?: { headerTimeoutMs: number; idleTimeoutMs?: number },
) {
  return startManager({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [
      { token: admin, scope: "admin" },
      ...nodes.map((token, i) => ({ token, scope: "node" as const, node: `n${i}` })),
    ],
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
    ...(limits ? { limits } : {}),
  });
}

/** A group's rules, about 5 KB of feed event: `round` makes each update differ. */
export function bulkyRules(round: number) {
  return Array.from({ length: 64 }, (_, i) => ({
    direction: "ingress",
    protocol: "tcp",
    ports: String(1000 + i),
    peer: { cidr: `10.${round % 250}.${i}.0/24` },
  }));
}

/** How many node requests the manager at `url` counts in flight (a stream or socket is one). */
export async function nodeRequestsInFlight(url: string, admin: string): Promise<number> {
  const r = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${admin}` } });
  return Number((await r.text()).match(/in_flight_requests\{principal="node"\} (\d+)/)?.[1]);
}

/**
 * A feed follower's socket (Deno's WebSocket client) at `base` (ws:// or wss://, the API port of a
 * manager served straight or its feed socket port), from `cursor`, and its pages as they come.
 */
export function followSocket(base: string, token: string, cursor?: string) {
  const after = cursor === undefined ? "" : `after=${cursor}&`;
  const ws = new WebSocket(`${base}/api/v1/feed?${after}timeout=1&stream=websocket`, {
    headers: { authorization: `Bearer ${token}` },
  });
  ws.binaryType = "arraybuffer";
  const queue: unknown[] = [];
  let wake: (() => void) | undefined;
  let closed: CloseEvent | undefined;
  ws.onmessage = (e) => {
    queue.push(JSON.parse(new TextDecoder().decode(e.data as ArrayBuffer)));
    wake?.();
  };
  ws.onclose = (e) => {
    closed = e;
    wake?.();
  };
  return {
    ws,
    get closed() {
      return closed;
    },
    async next(): Promise<{ cursor: string; events: Record<string, unknown>[] } | undefined> {
      while (queue.length === 0 && !closed) await new Promise<void>((r) => (wake = r));
      return queue.shift() as { cursor: string; events: Record<string, unknown>[] } | undefined;
    },
    /** The next page with events. */
    async changes() {
      let page = await this.next();
      while (page && page.events.length === 0) page = await this.next();
      return page;
    },
  };
}

/**
 * Changes acme's security group "big" (bulkyRules) on the manager at `url` until the manager holds
 * no more than `fast.length` node requests, i.e. until the one follower that reads nothing was cut
 * off; every fast follower must get each change as it comes. The rounds it took.
 */
export async function changeUntilSlowCut(
  url: string,
  admin: string,
  fast: ReturnType<typeof followSocket>[],
): Promise<number> {
  const waiting = () => nodeRequestsInFlight(url, admin);
  while ((await waiting()) < fast.length + 1) await new Promise((r) => setTimeout(r, 10));
  let rounds = 0;
  for (; (await waiting()) > fast.length; rounds++) {
    assert.ok(rounds < 4000, "the slow follower was never cut off");
    await callApi(url, "PUT", "tenants/acme/security-groups/big", admin, {
      rules: bulkyRules(rounds),
    });
    for (const f of fast) {
      const page = await f.changes();
      assert.deepEqual(page!.events.map((e) => e.type), ["securityGroup"]);
      const group = page!.events[0].securityGroup as { rules: { peer: { cidr: string } }[] };
      assert.equal(group.rules[0].peer.cidr, `10.${rounds % 250}.0.0/24`);
    }
  }
  return rounds;
}
