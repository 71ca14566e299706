/**
 * The read-only web console, a sub-app of the manager mounted at /console: the page and its
 * scripts (embedded as text imports, so `deno compile` carries them), who a token is, and the
 * change feed as the token may see it. The page reads everything else from the API with the same
 * bearer token; the token never travels in a URL.
 */
import { type Context, Hono } from "hono";
import type { Principal, TokenTable } from "../auth.ts";
import { ApiError } from "../errors.ts";
import type { FeedEvent } from "../feed.ts";
import type { Ctx } from "../service/context.ts";
import { nodeFor } from "../service/nodes.ts";
import { visible } from "../service/ports/mod.ts";
import { FeedQuery } from "../schemas.ts";
import { z } from "zod";
import { CHART_NAMES, chartOf } from "./metrics_proxy.ts";
import INDEX_HTML from "./static/index.html" with { type: "text" };
import STYLE_CSS from "./static/style.css" with { type: "text" };
import APP_JS from "./static/app.js" with { type: "text" };
import API_JS from "./static/api.js" with { type: "text" };
import DOM_JS from "./static/dom.js" with { type: "text" };
import VIEWS_JS from "./static/views.js" with { type: "text" };
import TOPOLOGY_JS from "./static/topology.js" with { type: "text" };
import TENANT_TOPOLOGY_JS from "./static/tenant_topology.js" with { type: "text" };
import ROUTERS_JS from "./static/routers.js" with { type: "text" };
import SECURITY_GROUPS_JS from "./static/security_groups.js" with { type: "text" };
import CLUSTERS_JS from "./static/clusters.js" with { type: "text" };
import TRACE_JS from "./static/trace.js" with { type: "text" };
import CHARTS_JS from "./static/charts.js" with { type: "text" };
import FLOATING_JS from "./static/floating.js" with { type: "text" };

/**
 * Only the console's own files run and load: no inline script or style, no other origin, no
 * framing, no form posting elsewhere. Styles set from script go through the CSSOM, which the
 * policy allows.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

/** The console's static files: name under /console/ → body ("" is the page). */
const FILES: Record<string, string> = {
  "": INDEX_HTML,
  "style.css": STYLE_CSS,
  "app.js": APP_JS,
  "api.js": API_JS,
  "dom.js": DOM_JS,
  "views.js": VIEWS_JS,
  "topology.js": TOPOLOGY_JS,
  "tenant_topology.js": TENANT_TOPOLOGY_JS,
  "routers.js": ROUTERS_JS,
  "security_groups.js": SECURITY_GROUPS_JS,
  "clusters.js": CLUSTERS_JS,
  "trace.js": TRACE_JS,
  "charts.js": CHARTS_JS,
  "floating.js": FLOATING_JS,
};

function mediaType(name: string): string {
  if (name.endsWith(".js")) return "text/javascript; charset=utf-8";
  if (name.endsWith(".css")) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

export interface ConsoleOptions {
  ctx: Ctx;
  tokens: TokenTable;
  /** Where the charts over time are read (config console.prometheusUrl); absent: none. */
  prometheusUrl?: string;
}

/** A chart's name and how many minutes back it reaches. */
const ChartQuery = z.strictObject({
  chart: z.enum(CHART_NAMES),
  minutes: z.coerce.number().int().min(5).max(7 * 24 * 60).default(60),
});

/** Where the console is served. */
export const CONSOLE_PATH = "/console";

/** The console's routes, under CONSOLE_PATH: mount with `app.route("/", consoleApp(...))`. */
export function consoleApp({ ctx, tokens, prometheusUrl }: ConsoleOptions): Hono {
  const app = new Hono();
  const at = (rest: string) => `${CONSOLE_PATH}${rest}`;

  app.use(at("/*"), async function securityHeaders(c, next) {
    await next();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.header(name, value);
  });

  // The page's relative URLs need the slash: /console answers with a redirect to /console/.
  app.get(CONSOLE_PATH, (c) => c.redirect(at("/"), 301));
  for (const name of Object.keys(FILES)) app.get(at(`/${name}`), (c) => file(c, name));

  app.get(at("/session"), (c) => {
    const principal = viewer(tokens, c);
    return c.json(principal);
  });

  app.get(at("/feed"), async (c) => {
    const principal = viewer(tokens, c);
    const parsed = FeedQuery.safeParse(c.req.query());
    if (!parsed.success) {
      throw new ApiError("invalid_request", `query: ${parsed.error.issues[0].message}`);
    }
    const { after, timeout } = parsed.data;
    if (after === undefined) return c.json({ cursor: ctx.feed.cursor(), events: [] });
    const page = await ctx.feed.since(after, timeout * 1000);
    if (page === "expired") {
      throw new ApiError(
        "feed_expired",
        "The cursor is too old or from before a manager restart: load the console's data again and follow from a new cursor",
      );
    }
    const events = page.events.flatMap((e) => seenBy(principal, e));
    return c.json({ cursor: page.cursor, events });
  });

  app.get(at("/metrics"), async (c) => {
    const principal = viewer(tokens, c);
    const parsed = ChartQuery.safeParse(c.req.query());
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ApiError("invalid_request", `query ${issue.path.join(".")}: ${issue.message}`);
    }
    return c.json(await chartOf(prometheusUrl, principal, parsed.data.chart, parsed.data.minutes));
  });

  return app;
}

function file(c: Context, name: string): Response {
  return c.body(FILES[name], 200, { "content-type": mediaType(name) });
}

/** The token's principal, for the console: admins and tenants only (401 without a token). */
function viewer(tokens: TokenTable, c: Context): Principal {
  const principal = tokens.authenticate(c.req.header("authorization"));
  if (principal.scope !== "admin" && principal.scope !== "tenant") {
    throw new ApiError(
      "forbidden",
      `The console is for admin and tenant tokens, not a ${principal.scope} token`,
    );
  }
  return principal;
}

/**
 * What a principal sees of a feed event, as the API's lists would show it: a tenant its own ports
 * and only the names of nodes; an admin everything.
 */
export function seenBy(principal: Principal, event: FeedEvent): FeedEvent[] {
  if (principal.scope !== "admin" && principal.scope !== "tenant") return [];
  if (event.type === "port") return visible(principal, event.port) ? [event] : [];
  if (event.type === "router") {
    const own = principal.scope === "admin" || principal.tenant === event.router.tenant;
    return own ? [event] : [];
  }
  if (event.type === "securityGroup") {
    const own = principal.scope === "admin" || principal.tenant === event.securityGroup.tenant;
    return own ? [event] : [];
  }
  if (event.type === "mirror") {
    const own = principal.scope === "admin" || principal.tenant === event.mirror.tenant;
    return own ? [event] : [];
  }
  if (event.type === "service") {
    const own = principal.scope === "admin" || principal.tenant === event.service.tenant;
    return own ? [event] : [];
  }
  return [{ ...event, node: nodeFor(principal, event.node) as typeof event.node }];
}
