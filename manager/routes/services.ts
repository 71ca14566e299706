/** Services: a VIP of a tenant's network spread over backend ports (service/services.ts). */
import { seesOwned } from "../auth.ts";
import * as S from "../schemas.ts";
import * as services from "../service/services.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const SERVICES: Resource = {
  tag: "services",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/services",
      summary: "List the tenant's services, with their endpoints",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Service), description: "the services" },
    }).handle(async ({ ctx, params }) => {
      const all = await services.listServices(ctx, params.tenant);
      return items(
        await Promise.all(
          all.map(async (s) => services.serviceView(s, await services.serviceStatus(ctx, s))),
        ),
      );
    }),
    route({
      method: "POST",
      path: "/tenants/{tenant}/services",
      summary:
        "Create a service: a VIP of one of the tenant's networks (given, or taken from its pool) spread over backend ports",
      access: "tenant",
      ok: { status: 201, schema: S.Service, description: "created" },
    }).body(S.ServiceCreate)
      .handle(async ({ ctx, principal, params, body }) => {
        const s = await services.createService(ctx, { principal, tenant: params.tenant, body });
        return ok(services.serviceView(s, await services.serviceStatus(ctx, s)), 201);
      }),
    route({
      method: "GET",
      path: "/tenants/{tenant}/services/{service}",
      summary: "Get a service and its endpoints",
      access: "tenant",
      ok: { status: 200, schema: S.Service, description: "the service" },
    }).handle(async ({ ctx, params }) => {
      const s = await services.getService(ctx, params.tenant, params.service);
      return ok(services.serviceView(s, await services.serviceStatus(ctx, s)));
    }),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/services/{service}",
      summary: "Replace a service's ports, backends and affinity (its network and VIP stay)",
      access: "tenant",
      ok: { status: 200, schema: S.Service, description: "updated" },
    }).body(S.ServiceUpdate)
      .handle(async ({ ctx, principal, params, body }) => {
        const s = await services.updateService(ctx, {
          principal,
          tenant: params.tenant,
          name: params.service,
          body,
        });
        return ok(services.serviceView(s, await services.serviceStatus(ctx, s)));
      }),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/services/{service}",
      summary: "Delete a service: its VIP goes back to the pool, the nodes remove its flows",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, params }) => (
      await services.deleteService(ctx, params.tenant, params.service), noContent
    )),
    route({
      method: "GET",
      path: "/services",
      summary:
        "Every tenant's services (nodes and admins: the agents balance them); a cluster's tokens get its tenants' only",
      access: "infra",
      ok: { status: 200, schema: S.listOf(S.Service), description: "the services" },
    }).handle(async ({ ctx, principal }) =>
      items(
        (await services.listServices(ctx)).filter((s) => seesOwned(principal, s)).map((s) =>
          services.serviceView(s)
        ),
      )
    ),
  ],
};
