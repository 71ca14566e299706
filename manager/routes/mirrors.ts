/** Port mirrors: copies of some of a tenant's ports' traffic to a collector port of its own. */
import { seesOwned } from "../auth.ts";
import * as S from "../schemas.ts";
import * as mirrors from "../service/mirrors.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const MIRRORS: Resource = {
  tag: "mirrors",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/mirrors",
      summary: "List the tenant's port mirrors",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Mirror), description: "the mirrors" },
    }).handle(async ({ ctx, params }) => items(await mirrors.listMirrors(ctx, params.tenant))),
    route({
      method: "POST",
      path: "/tenants/{tenant}/mirrors",
      summary:
        "Copy what some of the tenant's ports send and receive to a collector port of the tenant",
      access: "tenant",
      ok: { status: 201, schema: S.Mirror, description: "created" },
    }).body(S.MirrorCreate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(await mirrors.createMirror(ctx, { principal, tenant: params.tenant, body }), 201)
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/mirrors/{mirror}",
      summary: "Get a port mirror",
      access: "tenant",
      ok: { status: 200, schema: S.Mirror, description: "the mirror" },
    }).handle(async ({ ctx, params }) =>
      ok(await mirrors.getMirror(ctx, params.tenant, params.mirror))
    ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/mirrors/{mirror}",
      summary: "Delete a port mirror: the nodes remove its OVS Mirror row",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, params }) => (
      await mirrors.deleteMirror(ctx, params.tenant, params.mirror), noContent
    )),
    route({
      method: "GET",
      path: "/mirrors",
      summary:
        "Every tenant's port mirrors (nodes and admins: the agents realise them); a cluster's tokens get its tenants' only",
      access: "infra",
      ok: { status: 200, schema: S.listOf(S.Mirror), description: "the mirrors" },
    }).handle(async ({ ctx, principal }) =>
      items((await mirrors.listMirrors(ctx)).filter((m) => seesOwned(principal, m)))
    ),
  ],
};
