/** The HTTP face of the manager: serves each resource's routes with auth, limits and metrics. */
import { type Context, Hono } from "hono";
import { z } from "zod";
import { METRICS_CONTENT_TYPE } from "@knitter/common/metrics";
import { authorize, describe, type Principal, type TokenTable } from "./auth.ts";
import { scopeRequest, viewFor, withReach } from "./service/cluster_view.ts";
import { ApiError } from "./errors.ts";
import { EncodedJson } from "./encoded_json.ts";
import { type FeedSink, FeedStream } from "./feed_streams.ts";
import { FeedSocket } from "./feed_sockets.ts";
import { openApiDocument } from "./openapi.ts";
import { API_BASE, type Resource, RESOURCES, type RouteDef, ROUTES } from "./routes.ts";
import { checkParams } from "./routes/params.ts";
import type { Ctx } from "./service/context.ts";
import { StoreLimitError, StoreUnavailableError } from "./store/store.ts";
import { keys } from "./model.ts";
import { poolUsage } from "./usage_gauge.ts";
import { CONSOLE_PATH, consoleApp } from "./console/console.ts";
import {
  type Budget,
  DEFAULT_FAIRNESS,
  Fairness,
  type FairnessConfig,
  holdOff,
  type RequestKind,
  type Role,
  ThrottledError,
  type ThrottleReason,
} from "./fairness.ts";
import { ListTurns } from "./list_turns.ts";
import { JsonDepthGauge } from "./json_depth.ts";

/** What one request may hold: everything a client controls is bounded. */
export interface RequestLimits {
  /** Bytes of the request body (413 beyond). */
  bodyBytes: number;
  /** Characters of the URL's path and query (414 beyond). */
  urlChars: number;
  /** Time to receive the whole body once the handler asks for it (408 beyond). */
  bodyTimeoutMs: number;
  /** Nesting of a JSON body's objects and arrays (400 beyond, before it is parsed). */
  jsonDepth: number;
}

export const DEFAULT_LIMITS: RequestLimits = {
  bodyBytes: 1 << 20,
  urlChars: 8192,
  bodyTimeoutMs: 10_000,
  jsonDepth: 32,
};

export const MAX_BODY_BYTES = DEFAULT_LIMITS.bodyBytes;

export interface AppOptions {
  ctx: Ctx;
  tokens: TokenTable;
  limits?: Partial<RequestLimits>;
  /** Each role's budget of requests (fairness.ts), over DEFAULT_FAIRNESS. */
  fairness?: Partial<Record<Role, Partial<Budget>>>;
  /** Called with unexpected errors (bugs), which answer 500. */
  onInternalError?: (err: unknown) => void;
  /** The Prometheus the console's charts read (config console.prometheusUrl). */
  prometheusUrl?: string;
  /** Called when a client went away (or stalled) before its request was read: not a bug. */
  onClientGone?: (what: { method: string; path: string; reason: string }) => void;
}

export function createApp(
  {
    ctx,
    tokens,
    limits: given,
    fairness: budgets,
    onInternalError,
    onClientGone,
    prometheusUrl,
  }: AppOptions,
): Hono {
  const limits = { ...DEFAULT_LIMITS, ...given };
  const app = new Hono();
  ctx.metrics.readPoolsFrom(() => poolUsage(ctx));
  const fairness = new Fairness(
    fairnessBudgets(budgets),
    (role, reason) => ctx.metrics.throttled.inc({ principal: role, reason }),
  );
  ctx.metrics.readInFlightFrom(() => fairness.inFlight());
  // Long lists wait between their pages while calls are in progress (list_turns.ts).
  const turns = new ListTurns();
  ctx.listTurns = turns;
  const guard: Guard = { limits, fairness, turns, metrics: ctx.metrics };

  app.use("*", async (c, next) => {
    // Path and query as sent (the URL's origin is the server's own).
    const url = c.req.url;
    const sent = url.length - new URL(url).origin.length;
    if (sent > limits.urlChars) {
      throw new ApiError(
        "uri_too_long",
        `The URL is ${sent} characters long; at most ${limits.urlChars} are accepted`,
      );
    }
    await next();
  });

  app.use("*", async (c, next) => {
    const start = performance.now();
    await next();
    const route = c.req.routePath;
    const labels = { method: c.req.method, route };
    ctx.metrics.requests.inc({ ...labels, status: String(c.res.status) });
    ctx.metrics.latency.observe(labels, (performance.now() - start) / 1000);
  });

  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    try {
      await ctx.store.get(keys.tenant("admin"));
      return c.json({ status: "ready" });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      return c.json({ status: "not ready", reason: `store: ${why}` }, 503);
    }
  });
  app.get("/metrics", async (c) => {
    // Metrics name tenants and networks: only a metrics or admin token reads them.
    const principal = tokens.authenticate(c.req.header("authorization"));
    if (principal.scope !== "admin" && principal.scope !== "metrics") {
      throw new ApiError(
        "forbidden",
        `${describe(principal)} may not read /metrics: use a token of scope metrics or admin`,
      );
    }
    const admission = fairness.admit(principal, "call");
    try {
      return c.text(await ctx.metrics.render(), 200, { "content-type": METRICS_CONTENT_TYPE });
    } finally {
      admission.release();
    }
  });
  // The read-only web console (README.md, "Web console"): its page, scripts, and the feed a token
  // sees. What a token asks of it counts in its budget as the API does; the feed is a long-poll.
  for (const [path, kind] of [["session", "call"], ["feed", "wait"]] as const) {
    app.use(`${CONSOLE_PATH}/${path}`, async (c, next) => {
      const admission = fairness.admit(tokens.authenticate(c.req.header("authorization")), kind);
      try {
        await next();
      } finally {
        admission.release();
      }
    });
  }
  app.route("/", consoleApp({ ctx, tokens, prometheusUrl }));
  const doc = JSON.stringify(openApiDocument(ROUTES));
  app.get("/openapi.json", (c) => c.body(doc, 200, { "content-type": "application/json" }));

  for (const resource of RESOURCES) {
    app.route(
      API_BASE,
      resourceApp(resource, (c, route, kind) => serve(c, route, kind, ctx, tokens, guard)),
    );
  }

  app.notFound((c) =>
    c.json(
      new ApiError("not_found", `No route ${c.req.method} ${c.req.path}; see /openapi.json`)
        .toBody(),
      404,
    )
  );
  app.onError((err, c) => {
    const api = toApiError(err);
    if (api.code === "internal") onInternalError?.(err);
    if (api.code === "client_closed" || api.code === "request_timeout") {
      onClientGone?.({ method: c.req.method, path: c.req.path, reason: api.message });
    }
    // A throttled caller is told when to come back (RFC 9110, Retry-After in seconds), and its
    // connection is left unread meanwhile, as after a body refused for its bounds.
    if (err instanceof ThrottledError) {
      const after = err.retryAfterSeconds;
      const res = c.json(api.toBody(), 429, { "retry-after": String(after) });
      return holdOff(res, after * 1000);
    }
    const res = c.json(api.toBody(), api.status as 400);
    return BODY_REFUSALS.has(err) ? holdOff(res, 1000) : res;
  });
  return app;
}

/** Body refusals (too large, too deep): their connections are left unread a while. */
const BODY_REFUSALS = new WeakSet<object>();

/** What bounds a request before its handler: the body's limits, its caller's budget. */
interface Guard {
  limits: RequestLimits;
  fairness: Fairness;
  turns: ListTurns;
  metrics: Ctx["metrics"];
}

function fairnessBudgets(given: AppOptions["fairness"] = {}): FairnessConfig {
  const out = { ...DEFAULT_FAIRNESS };
  for (const [role, budget] of Object.entries(given) as [Role, Partial<Budget>][]) {
    out[role] = { ...DEFAULT_FAIRNESS[role], ...budget };
  }
  return out;
}

/** One resource's routes as a Hono sub-app, each with the kind of request it is. */
function resourceApp(
  resource: Resource,
  serveRoute: (c: Context, route: RouteDef, kind: RequestKind) => Promise<Response>,
): Hono {
  const sub = new Hono();
  for (const route of resource.routes) {
    const path = route.path.replace(/\{(\w+)\}/g, ":$1");
    const kind = requestKind(resource.tag, route);
    sub.on(route.method, path, (c) => serveRoute(c, route, kind));
  }
  return sub;
}

/**
 * What a route's request does (fairness.ts): the feed waits (a long-poll); a GET answering
 * `{items}` (schemas.ts, listOf) lists, its work growing with the data; the rest are calls.
 */
function requestKind(tag: string, route: RouteDef): RequestKind {
  if (tag === "feed") return "wait";
  const answer = route.ok.schema;
  const lists = answer instanceof z.ZodObject && "items" in answer.shape;
  return route.method === "GET" && lists ? "list" : "call";
}

async function serve(
  c: Context,
  route: RouteDef,
  kind: RequestKind,
  ctx: Ctx,
  tokens: TokenTable,
  guard: Guard,
): Promise<Response> {
  const caller = tokens.authenticate(c.req.header("authorization"));
  // Before anything else the request costs: a caller over its budget is refused here.
  const admission = guard.fairness.admit(caller, kind);
  const endCall = kind === "call" ? guard.turns.call() : undefined;
  let streamed: FeedSink | undefined;
  try {
    const res = await serveAdmitted(c, route, ctx, tokens, guard, caller);
    streamed = STREAMED.get(res);
    return res;
  } finally {
    endCall?.();
    // A streamed feed holds its place among its caller's requests until it ends.
    if (streamed) streamed.ended.then(() => admission.release());
    else admission.release();
  }
}

/** The feed streams answered (feed_streams.ts), by their answer. */
const STREAMED = new WeakMap<Response, FeedSink>();

async function serveAdmitted(
  c: Context,
  route: RouteDef,
  ctx: Ctx,
  tokens: TokenTable,
  guard: Guard,
  caller: Principal,
): Promise<Response> {
  const principal = await withReach(ctx, caller);
  const params = checkParams(c.req.param());
  authorize(principal, route.access, params);
  const refused = (reason: ThrottleReason) =>
    guard.metrics.throttled.inc({ principal: caller.scope, reason });
  const reply = await route.run({
    ctx,
    principal,
    tokens,
    params,
    query: c.req.query(),
    readBody: () => readJson(c, guard.limits, refused),
    scope: (request) => scopeRequest(principal, request),
  });
  if (reply.body === undefined) return c.body(null, reply.status as 204);
  if (reply.body instanceof FeedStream) {
    const res = new Response(reply.body.body, {
      status: reply.status,
      headers: { "content-type": "application/x-ndjson", "cache-control": "no-store" },
    });
    STREAMED.set(res, reply.body);
    return res;
  }
  if (reply.body instanceof FeedSocket) {
    const res = reply.body.accept(c.req.raw);
    STREAMED.set(res, reply.body);
    return res;
  }
  // Already filtered for this principal and encoded (a shared feed page).
  if (reply.body instanceof EncodedJson) {
    return c.body(reply.body.bytes, reply.status as 200, { "content-type": "application/json" });
  }
  return c.json(await viewFor(ctx, principal, reply.body), reply.status as 200);
}

/** JSON media types: application/json, with parameters (charset), and +json suffixes. */
const JSON_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

async function readJson(
  c: Context,
  limits: RequestLimits,
  refused: (reason: ThrottleReason) => void,
): Promise<unknown> {
  const type = c.req.header("content-type");
  if (type === undefined || !JSON_TYPE.test(type)) {
    throw new ApiError(
      "unsupported_media_type",
      `The request body must be JSON, sent with 'Content-Type: application/json' (got ${
        type === undefined ? "no Content-Type" : JSON.stringify(type.slice(0, 100))
      })`,
    );
  }
  const text = await readBody(c, limits, refused);
  if (text.trim() === "") throw new ApiError("invalid_json", "The request needs a JSON body");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(
      "invalid_json",
      `The request body is not valid JSON: ${(err as Error).message}`,
    );
  }
}

/**
 * The body as text, within the size limit, the nesting depth and the body timeout, each checked as
 * the bytes arrive. A client that stalls gets 408; one that goes away mid-body is reported as gone,
 * not as an internal error.
 */
async function readBody(
  c: Context,
  limits: RequestLimits,
  refused: (reason: ThrottleReason) => void,
): Promise<string> {
  const tooLarge = () => {
    refused("body_size");
    return bodyRefusal(
      new ApiError("body_too_large", `The request body exceeds ${limits.bodyBytes} bytes`),
    );
  };
  const tooDeep = () => {
    refused("body_depth");
    return bodyRefusal(
      new ApiError(
        "invalid_json",
        `The request body is nested deeper than ${limits.jsonDepth} levels of objects and arrays; no request needs more`,
      ),
    );
  };
  const declared = c.req.header("content-length");
  if (declared !== undefined && Number(declared) > limits.bodyBytes) throw tooLarge();
  const depth = new JsonDepthGauge(limits.jsonDepth);
  const stream = c.req.raw.body;
  if (!stream) return "";
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    reader.cancel().catch(() => {});
  }, limits.bodyTimeoutMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > limits.bodyBytes) {
        reader.cancel().catch(() => {});
        throw tooLarge();
      }
      if (!depth.feed(value)) {
        reader.cancel().catch(() => {});
        throw tooDeep();
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    if (!timedOut) {
      throw new ApiError(
        "client_closed",
        `The client went away before its request body was read (${(err as Error).message})`,
      );
    }
  } finally {
    clearTimeout(timer);
  }
  if (timedOut) {
    throw new ApiError(
      "request_timeout",
      `The request body did not arrive within ${limits.bodyTimeoutMs} ms`,
    );
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder().decode(bytes);
}

function bodyRefusal(err: ApiError): ApiError {
  BODY_REFUSALS.add(err);
  return err;
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof StoreUnavailableError) return new ApiError("store_unavailable", err.message);
  if (err instanceof StoreLimitError) {
    return new ApiError(
      "invalid_request",
      `The request changes more than one store commit can hold (${err.message}); ask for less at once: fewer or narrower excludes, a smaller IP group`,
    );
  }
  if (err instanceof Error && err.name === "HTTPException") {
    return new ApiError("invalid_request", err.message);
  }
  return new ApiError(
    "internal",
    `Internal error: ${err instanceof Error ? err.message : String(err)}`,
  );
}
