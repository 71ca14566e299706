/** Floating addresses: the admin's pools, and the tenants' addresses bound to their ports. */
import * as S from "../schemas.ts";
import * as ips from "../service/floating_ips.ts";
import { floatingHistory } from "../service/floating_history.ts";
import * as pools from "../service/floating_pools.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const FLOATING_POOLS: Resource = {
  tag: "floating pools",
  routes: [
    route({
      method: "GET",
      path: "/floating-pools",
      summary: "List the floating pools (their ranges; what tenants take addresses from)",
      access: "any",
      ok: { status: 200, schema: S.listOf(S.FloatingPool), description: "the pools" },
    }).handle(async ({ ctx, principal }) =>
      items(
        principal.scope === "admin"
          ? await pools.listFloatingPoolsWithUsage(ctx)
          : await pools.listFloatingPools(ctx),
      )
    ),
    route({
      method: "POST",
      path: "/floating-pools",
      summary: "Make a floating pool: IPv4 ranges the fabric routes to the nodes (no overlap)",
      access: "admin",
      ok: { status: 201, schema: S.FloatingPool, description: "made" },
    }).body(S.FloatingPoolCreate)
      .handle(async ({ ctx, body }) => ok(await pools.createFloatingPool(ctx, body), 201)),
    route({
      method: "GET",
      path: "/floating-pools/{pool}",
      summary: "Get a floating pool",
      access: "any",
      ok: { status: 200, schema: S.FloatingPool, description: "the pool" },
    }).handle(async ({ ctx, params }) => ok(await pools.getFloatingPool(ctx, params.pool))),
    route({
      method: "DELETE",
      path: "/floating-pools/{pool}",
      summary: "Delete a floating pool no tenant holds an address of (409 otherwise)",
      access: "admin",
      ok: { status: 204, description: "deleted" },
    }).handle(async (
      { ctx, params },
    ) => (await pools.deleteFloatingPool(ctx, params.pool), noContent)),
  ],
};

export const FLOATING_IPS: Resource = {
  tag: "floating addresses",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/floating-ips",
      summary: "List the tenant's floating addresses and their ports",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.FloatingIp), description: "the addresses" },
    }).handle(async ({ ctx, params }) => items(await ips.listFloatingIps(ctx, params.tenant))),
    route({
      method: "POST",
      path: "/tenants/{tenant}/floating-ips",
      summary:
        "Take a floating address of a pool (quota floatingIps): the one asked for, or the first free one",
      access: "tenant",
      ok: { status: 201, schema: S.FloatingIp, description: "taken" },
    }).body(S.FloatingIpCreate)
      .handle(async ({ ctx, params, body }) =>
        ok(await ips.createFloatingIp(ctx, { tenant: params.tenant, body }), 201)
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/floating-ips/{address}",
      summary: "Get one of the tenant's floating addresses",
      access: "tenant",
      ok: { status: 200, schema: S.FloatingIp, description: "the address" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(await ips.getFloatingIp(ctx, { principal, ...params }))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/floating-ips/{address}/bind",
      summary:
        "Bind it to one of the tenant's ports by ID (1:1 NAT at the port's node; it follows the port ID)",
      access: "tenant",
      ok: { status: 200, schema: S.FloatingIp, description: "bound" },
    }).body(S.FloatingIpBind)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(await ips.bindFloatingIp(ctx, { principal, ...params, body }))
      ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/floating-ips/{address}/unbind",
      summary: "Take it off its port; it stays the tenant's",
      access: "tenant",
      ok: { status: 200, schema: S.FloatingIp, description: "unbound" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(await ips.unbindFloatingIp(ctx, { principal, ...params }))
    ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/floating-ips/{address}/history",
      summary:
        "Who of the tenant held the floating address when, bound to what (also after releasing it)",
      access: "owner",
      ok: { status: 200, schema: S.listOf(S.FloatingStint), description: "oldest first" },
    }).handle(async ({ ctx, params }) => items(await floatingHistory(ctx, params))),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/floating-ips/{address}",
      summary: "Release it (unbound first): in quarantine, then free for any tenant",
      access: "tenant",
      ok: { status: 204, description: "released" },
    }).handle(async ({ ctx, principal, params }) => (
      await ips.deleteFloatingIp(ctx, { principal, ...params }), noContent
    )),
  ],
};
