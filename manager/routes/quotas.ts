/** A tenant's quota: its limits, and what it uses. */
import * as S from "../schemas.ts";
import * as quotas from "../service/quotas.ts";
import { noContent, ok, type Resource, route } from "./route.ts";

export const QUOTAS: Resource = {
  tag: "quotas",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/quota",
      summary: "A tenant's quota and what it uses (no limits: the use, counted now)",
      access: "tenant",
      ok: { status: 200, schema: S.Quota, description: "limits and use" },
    }).handle(async ({ ctx, params }) => ok(await quotas.getQuota(ctx, params.tenant))),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/quota",
      summary:
        "Set a tenant's limits (a kind left out is unlimited); exceeding one is a 403 quota_exceeded",
      access: "admin",
      ok: { status: 200, schema: S.Quota, description: "the limits and the use" },
    }).body(S.QuotaSet)
      .handle(async ({ ctx, params, body }) => ok(await quotas.setQuota(ctx, params.tenant, body))),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/quota",
      summary: "Remove a tenant's quota: nothing limited or counted any more",
      access: "admin",
      ok: { status: 204, description: "removed" },
    }).handle(async ({ ctx, params }) => (await quotas.deleteQuota(ctx, params.tenant), noContent)),
  ],
};
