/** Security groups: stateful ingress and egress rules that ports name. */
import { seesOwned } from "../auth.ts";
import * as S from "../schemas.ts";
import * as secgroups from "../service/security_groups.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const SECURITY_GROUPS: Resource = {
  tag: "security-groups",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/security-groups",
      summary: "List the tenant's security groups",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.SecurityGroup), description: "the groups" },
    }).handle(async ({ ctx, params }) =>
      items(await secgroups.listSecurityGroups(ctx, params.tenant))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/security-groups",
      summary: "Create a security group: stateful ingress and egress rules that ports name",
      access: "tenant",
      ok: { status: 201, schema: S.SecurityGroup, description: "created" },
    }).body(S.SecurityGroupCreate)
      .handle(async ({ ctx, params, body }) =>
        ok(await secgroups.createSecurityGroup(ctx, params.tenant, body), 201)
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/security-groups/{group}",
      summary: "Get a security group",
      access: "tenant",
      ok: { status: 200, schema: S.SecurityGroup, description: "the group" },
    }).handle(async ({ ctx, params }) =>
      ok(await secgroups.getSecurityGroup(ctx, params.tenant, params.group))
    ),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/security-groups/{group}",
      summary:
        "Replace a security group's rules; every port that names it follows at once (established connections stay)",
      access: "tenant",
      ok: { status: 200, schema: S.SecurityGroup, description: "updated" },
    }).body(S.SecurityGroupUpdate)
      .handle(async ({ ctx, params, body }) =>
        ok(
          await secgroups.updateSecurityGroup(ctx, {
            tenant: params.tenant,
            name: params.group,
            body,
          }),
        )
      ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/security-groups/{group}",
      summary: "Delete a security group no port, network or other group names",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, params }) => (
      await secgroups.deleteSecurityGroup(ctx, params.tenant, params.group), noContent
    )),
    route({
      method: "GET",
      path: "/security-groups",
      summary:
        "Every tenant's security groups (what agents compile into flows); a cluster's tokens get its tenants' only",
      access: "infra",
      ok: { status: 200, schema: S.listOf(S.SecurityGroup), description: "the groups" },
    }).handle(async ({ ctx, principal }) =>
      items((await secgroups.listSecurityGroups(ctx)).filter((g) => seesOwned(principal, g)))
    ),
  ],
};
