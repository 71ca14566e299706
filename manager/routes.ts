/**
 * The API: one module per resource under routes/, each a table of typed routes (routes/route.ts)
 * that app.ts serves as a Hono sub-app under API_BASE and openapi.ts documents; neither knows any
 * route by name.
 */
import { CLAIMS } from "./routes/claims.ts";
import { CLUSTERS } from "./routes/clusters.ts";
import { FEED } from "./routes/feed.ts";
import { FLOATING_IPS, FLOATING_POOLS } from "./routes/floating.ts";
import { HISTORY } from "./routes/history.ts";
import { IP_GROUPS } from "./routes/ip_groups.ts";
import { MIRRORS } from "./routes/mirrors.ts";
import { NETWORKS } from "./routes/networks.ts";
import { NODES } from "./routes/nodes.ts";
import { PHYSNETS } from "./routes/physnets.ts";
import { PORTS } from "./routes/ports.ts";
import { QUOTAS } from "./routes/quotas.ts";
import type { Resource, RouteDef } from "./routes/route.ts";
import { ROUTERS } from "./routes/routers.ts";
import { SECURITY_GROUPS } from "./routes/security_groups.ts";
import { SERVICES } from "./routes/services.ts";
import { TENANTS } from "./routes/tenants.ts";
import { TRACE } from "./routes/trace.ts";

export type { Resource, RouteDef } from "./routes/route.ts";

export const API_BASE = "/api/v1";

/** Every resource, in the order the document lists them. */
export const RESOURCES: Resource[] = [
  TENANTS,
  QUOTAS,
  NETWORKS,
  PORTS,
  HISTORY,
  IP_GROUPS,
  ROUTERS,
  SECURITY_GROUPS,
  MIRRORS,
  SERVICES,
  PHYSNETS,
  NODES,
  CLUSTERS,
  FEED,
  CLAIMS,
  TRACE,
  FLOATING_POOLS,
  FLOATING_IPS,
];

/** A route as the API serves it: its full path, and its resource's tag. */
export interface ApiRoute extends RouteDef {
  tag: string;
}

export const ROUTES: ApiRoute[] = RESOURCES.flatMap((resource) =>
  resource.routes.map((route) => ({ ...route, path: API_BASE + route.path, tag: resource.tag }))
);
