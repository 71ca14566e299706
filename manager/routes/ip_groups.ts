/** IP groups: addresses of a network set aside for a tenant's ports to take. */
import * as S from "../schemas.ts";
import * as groups from "../service/ip_groups.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const IP_GROUPS: Resource = {
  tag: "ipgroups",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/ipgroups",
      summary: "List the tenant's IP groups",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.IpGroup), description: "the groups" },
    }).handle(async ({ ctx, params }) =>
      items((await groups.listIpGroups(ctx, params.tenant)).map(groups.groupView))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/ipgroups",
      summary: "Create an IP group from a list of addresses or a size",
      access: "tenant",
      ok: { status: 201, schema: S.IpGroup, description: "created" },
    }).body(S.IpGroupCreate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(
          groups.groupView(
            await groups.createIpGroup(ctx, { principal, tenant: params.tenant, body }),
          ),
          201,
        )
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/ipgroups/{group}",
      summary: "Get an IP group",
      access: "tenant",
      ok: { status: 200, schema: S.IpGroup, description: "the group" },
    }).handle(async ({ ctx, params }) =>
      ok(groups.groupView(await groups.getIpGroup(ctx, params.tenant, params.group)))
    ),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/ipgroups/{group}",
      summary: "Grow or shrink an IP group (addresses in use stay)",
      access: "tenant",
      ok: { status: 200, schema: S.IpGroup, description: "updated" },
    }).body(S.IpGroupUpdate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(
          groups.groupView(
            await groups.updateIpGroup(ctx, {
              principal,
              tenant: params.tenant,
              name: params.group,
              body,
            }),
          ),
        )
      ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/ipgroups/{group}",
      summary: "Delete an IP group none of whose addresses is in use",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, principal, params }) => (
      await groups.deleteIpGroup(ctx, { principal, tenant: params.tenant, name: params.group }),
        noContent
    )),
  ],
};
