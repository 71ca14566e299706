/** A tenant's networks, and the public networks it may attach to. */
import * as S from "../schemas.ts";
import * as networks from "../service/networks.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const NETWORKS: Resource = {
  tag: "networks",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks",
      summary: "List the tenant's networks and the public networks it may attach to",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Network), description: "the networks, with usage" },
    }).handle(async ({ ctx, principal, params }) =>
      items(await networks.listNetworks(ctx, principal, params.tenant))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/networks",
      summary:
        "Create a network (a VNI or VLAN ID is allocated unless an admin gives segmentId; flat networks are an admin's)",
      access: "tenant",
      ok: { status: 201, schema: S.Network, description: "created" },
    }).body(S.NetworkCreate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(await networks.createNetwork(ctx, { principal, tenant: params.tenant, body }), 201)
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks/{network}",
      summary: "Get a network with its usage (own, or public by name)",
      access: "shared",
      ok: { status: 200, schema: S.Network, description: "the network" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(
        await networks.getNetwork(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
        }),
      )
    ),
    route({
      method: "PATCH",
      path: "/tenants/{tenant}/networks/{network}",
      summary:
        "Change a network's description, MTU, routes or DNS (for ports allocated from then on), its default bandwidth and security groups, egress and hostAccess (at once); other fields are immutable",
      access: "tenant",
      ok: { status: 200, schema: S.Network, description: "updated" },
    }).body(S.NetworkUpdate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(
          await networks.updateNetwork(ctx, {
            principal,
            tenant: params.tenant,
            network: params.network,
            body,
          }),
        )
      ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/networks/{network}",
      summary: "Delete a network with no ports and no IP groups",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, principal, params }) => (
      await networks.deleteNetwork(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
      }), noContent
    )),
  ],
};
