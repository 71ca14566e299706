/** The HTTP face of the manager: serves the route table with auth, validation and metrics. */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { z } from "zod";
import { authorize, type TokenTable } from "./auth.ts";
import { ApiError } from "./errors.ts";
import { openApiDocument } from "./openapi.ts";
import { EMPTY_QUERY, PARAMS, type RouteDef, ROUTES } from "./routes.ts";
import type { Ctx } from "./service/context.ts";
import { StoreLimitError, StoreUnavailableError } from "./store/store.ts";
import { keys } from "./model.ts";
import { poolUsageGauge } from "./usage_gauge.ts";

export const MAX_BODY_BYTES = 1 << 20;

export interface AppOptions {
  ctx: Ctx;
  tokens: TokenTable;
  /** Called with unexpected errors (bugs), which answer 500. */
  onInternalError?: (err: unknown) => void;
}

export function createApp({ ctx, tokens, onInternalError }: AppOptions): Hono {
  const app = new Hono();
  ctx.metrics.addGauge(poolUsageGauge(ctx));

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
  app.get(
    "/metrics",
    async (c) =>
      c.text(await ctx.metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" }),
  );
  const doc = JSON.stringify(openApiDocument(ROUTES));
  app.get("/openapi.json", (c) => c.body(doc, 200, { "content-type": "application/json" }));

  app.use(
    "/api/*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError("body_too_large", `The request body exceeds ${MAX_BODY_BYTES} bytes`);
      },
    }),
  );

  for (const route of ROUTES) {
    const path = route.path.replace(/\{(\w+)\}/g, ":$1");
    app.on(route.method, path, (c) => serve(c, route, ctx, tokens));
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
    return c.json(api.toBody(), api.status as 400);
  });
  return app;
}

async function serve(c: Context, route: RouteDef, ctx: Ctx, tokens: TokenTable): Promise<Response> {
  const principal = tokens.authenticate(c.req.header("authorization"));
  const params = c.req.param() as Record<string, string>;
  for (const [name, value] of Object.entries(params)) {
    const r = PARAMS[name]?.safeParse(value);
    if (r && !r.success) {
      throw new ApiError(
        "invalid_request",
        `path ${name} "${value}" ${r.error.issues[0].message}`,
        name,
      );
    }
  }
  authorize(principal, route.access, params);
  const query = parse(route.query ?? EMPTY_QUERY, c.req.query(), "query");
  const body = route.body ? parse(route.body, await readJson(c), "") : undefined;
  const reply = await route.handle({ ctx, principal, params, query, body });
  if (reply.body === undefined) return c.body(null, reply.status as 204);
  return c.json(reply.body, reply.status as 200);
}

async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
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

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  let at = issue.path;
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    // The unknown field is the one to name, not the object that holds it.
    at = [...issue.path, issue.keys[0]];
    const more = issue.keys.slice(1).map((k) => `"${k}"`).join(", ");
    message = more ? `unknown field (so are ${more})` : "unknown field";
  }
  const path = at.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("")
    .replace(/^\./, "");
  const field = [where, path].filter(Boolean).join(".") || where || "body";
  return (() => {
    throw new ApiError("invalid_request", `${field}: ${message}`, field);
  })();
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
