/** Routers: routing between some of a tenant's networks. */
import { seesOwned } from "../auth.ts";
import * as S from "../schemas.ts";
import * as routers from "../service/routers.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const ROUTERS: Resource = {
  tag: "routers",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/routers",
      summary: "List the tenant's routers",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Router), description: "the routers" },
    }).handle(async ({ ctx, params }) =>
      items((await routers.listRouters(ctx, params.tenant)).map(routers.routerView))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/routers",
      summary: "Route between some of the tenant's networks (and through static routes)",
      access: "tenant",
      ok: { status: 201, schema: S.Router, description: "created" },
    }).body(S.RouterCreate)
      .handle(async ({ ctx, params, body, principal }) =>
        ok(
          routers.routerView(
            await routers.createRouter(ctx, { tenant: params.tenant, body, principal }),
          ),
          201,
        )
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/routers/{router}",
      summary: "Get a router",
      access: "tenant",
      ok: { status: 200, schema: S.Router, description: "the router" },
    }).handle(async ({ ctx, params }) =>
      ok(routers.routerView(await routers.getRouter(ctx, params.tenant, params.router)))
    ),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/routers/{router}",
      summary: "Replace what a router connects and routes",
      access: "tenant",
      ok: { status: 200, schema: S.Router, description: "updated" },
    }).body(S.RouterUpdate)
      .handle(async ({ ctx, params, body, principal }) =>
        ok(
          routers.routerView(
            await routers.updateRouter(ctx, {
              tenant: params.tenant,
              name: params.router,
              body,
              principal,
            }),
          ),
        )
      ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/routers/{router}",
      summary: "Delete a router: its networks are isolated again",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, params }) => (
      await routers.deleteRouter(ctx, params.tenant, params.router), noContent
    )),
    route({
      method: "GET",
      path: "/routers",
      summary:
        "Every tenant's routers (nodes and admins: the agents compute their flows); a cluster's tokens get its tenants' only",
      access: "infra",
      ok: { status: 200, schema: S.listOf(S.Router), description: "the routers" },
    }).handle(async ({ ctx, principal }) =>
      items(
        (await routers.listRouters(ctx)).filter((r) => seesOwned(principal, r))
          .map(routers.routerView),
      )
    ),
  ],
};
