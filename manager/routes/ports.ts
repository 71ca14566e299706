/** Ports: a pod's interface on a network, with its address and MAC. */
import * as S from "../schemas.ts";
import * as conflicts from "../service/conflicts.ts";
import * as ports from "../service/ports/mod.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const PORTS: Resource = {
  tag: "ports",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks/{network}/ports",
      summary: "List a network's ports",
      access: "shared",
      ok: { status: 200, schema: S.listOf(S.Port), description: "the ports" },
    }).query(S.PortQuery)
      .handle(async ({ ctx, principal, params, query }) =>
        items(
          await conflicts.withConflicts(
            ctx,
            principal,
            await ports.listNetworkPorts(ctx, {
              principal,
              tenant: params.tenant,
              network: params.network,
              query,
            }),
          ),
        )
      ),
    route({
      method: "PUT",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}",
      summary:
        "Allocate a port idempotently: the same port ID always gets the same address. The port goes into the cluster its ID names (ID@CLUSTER; none: the default one), which must serve its tenant (403)",
      access: "shared",
      ok: { status: 201, schema: S.Port, description: "allocated" },
      also: [{ status: 200, description: "the port already existed; the same answer again" }],
    }).body(S.PortRequest)
      .handle(async ({ ctx, principal, params, body }) => {
        const r = await ports.putPort(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          id: params.port,
          body,
        });
        return ok(r.port, r.created ? 201 : 200);
      }),
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}",
      summary: "Get a port",
      access: "shared",
      ok: { status: 200, schema: S.Port, description: "the port" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(
        await conflicts.withConflictsOne(
          ctx,
          principal,
          await ports.getPort(ctx, {
            principal,
            tenant: params.tenant,
            network: params.network,
            id: params.port,
          }),
        ),
      )
    ),
    route({
      method: "PATCH",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}",
      summary:
        "Change an existing port's security groups only: never allocates (404 for an unknown port), 409 when the path's network is not networkId",
      access: "shared",
      ok: { status: 200, schema: S.Port, description: "the port, with those groups" },
    }).body(S.PortGroupsUpdate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(
          await ports.patchPortGroups(ctx, {
            principal,
            tenant: params.tenant,
            network: params.network,
            id: params.port,
            body,
          }),
        )
      ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}",
      summary: "Release a port (404 for an unknown port: callers treat it as done)",
      access: "shared",
      ok: { status: 204, description: "released" },
    }).handle(async ({ ctx, principal, params }) => (
      await ports.deletePort(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
        id: params.port,
      }), noContent
    )),
    route({
      method: "POST",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}/unbind",
      summary:
        "Take a port off its pod and node, keeping its address, in one step (a stable port whose pod is gone)",
      access: "shared",
      ok: { status: 200, schema: S.Port, description: "the port, unbound (unboundAt set)" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(
        await ports.unbindPort(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          id: params.port,
        }),
      )
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/networks/{network}/ports/{port}/activate",
      summary:
        "Make a port of a claim the active one (a live migration's target: its guest runs here) and the claim's other port inactive, in one step; idempotent. The port's node, its tenant, its cluster's monitor or an admin",
      access: "shared",
      ok: { status: 200, schema: S.Port, description: "the port, active" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(
        await ports.activatePort(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          id: params.port,
        }),
      )
    ),
    route({
      method: "GET",
      path: "/ports",
      summary: "List ports across networks, by node or pod",
      access: "any",
      ok: { status: 200, schema: S.listOf(S.Port), description: "the ports" },
    }).query(S.PortQuery)
      .handle(async ({ ctx, principal, query }) =>
        items(
          await conflicts.withConflicts(
            ctx,
            principal,
            await ports.listPorts(ctx, principal, query),
          ),
        )
      ),
  ],
};
