/** Tenants: who owns networks, IP groups, routers and security groups. */
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";
import * as tenants from "../service/tenants.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const TENANTS: Resource = {
  tag: "tenants",
  routes: [
    route({
      method: "GET",
      path: "/tenants",
      summary: "List tenants (a tenant token sees its own)",
      access: "any",
      ok: { status: 200, schema: S.listOf(S.Tenant), description: "the tenants" },
    }).handle(async ({ ctx, principal }) => {
      const all = await tenants.listTenants(ctx);
      if (principal.scope === "admin") return items(all);
      return items(
        principal.scope === "tenant" ? all.filter((t) => t.name === principal.tenant) : [],
      );
    }),
    route({
      method: "POST",
      path: "/tenants",
      summary: "Create a tenant",
      access: "admin",
      ok: { status: 201, schema: S.Tenant, description: "created" },
    }).body(S.TenantCreate)
      .handle(async ({ ctx, body }) => ok(await tenants.createTenant(ctx, body), 201)),
    route({
      method: "PUT",
      path: "/tenants/{tenant}",
      summary:
        "Ensure a tenant exists (agents and the monitor: a Kubernetes namespace is a tenant from its first pod on)",
      access: "infra",
      ok: { status: 201, schema: S.Tenant, description: "created" },
      also: [{ status: 200, description: "it existed already" }],
    }).handle(async ({ ctx, params }) => {
      try {
        return ok(await tenants.createTenant(ctx, { name: params.tenant }), 201);
      } catch (err) {
        if (err instanceof ApiError && err.code === "already_exists") {
          return ok(await tenants.getTenant(ctx, params.tenant));
        }
        throw err;
      }
    }),
    route({
      method: "GET",
      path: "/tenants/{tenant}",
      summary: "Get a tenant",
      access: "tenant",
      ok: { status: 200, schema: S.Tenant, description: "the tenant" },
    }).handle(async ({ ctx, params }) => ok(await tenants.getTenant(ctx, params.tenant))),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}",
      summary: "Delete a tenant that owns nothing (admins, and monitors when its namespace goes)",
      access: "operator",
      ok: { status: 204, description: "deleted" },
    }).handle(async (
      { ctx, params },
    ) => (await tenants.deleteTenant(ctx, params.tenant), noContent)),
  ],
};
