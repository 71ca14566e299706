/** Physical networks: where vlan and flat networks leave the nodes. */
import type { Principal } from "../auth.ts";
import * as S from "../schemas.ts";
import * as physnets from "../service/physnets.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

/**
 * What a tenant sees of the shared infrastructure: what it needs to pick a physnet or read its
 * ports' nodes, and nothing of other tenants' use of it (no usage, no flat network's name, no
 * underlay addresses).
 */
function physnetFor(principal: Principal, p: physnets.PhysnetView) {
  if (principal.scope !== "tenant") return p;
  return { name: p.name, vlanRanges: p.vlanRanges, description: p.description };
}

export const PHYSNETS: Resource = {
  tag: "physnets",
  routes: [
    route({
      method: "GET",
      path: "/physnets",
      summary: "List physical networks",
      access: "any",
      ok: { status: 200, schema: S.listOf(S.Physnet), description: "the physnets" },
    }).handle(async ({ ctx, principal }) =>
      items((await physnets.listPhysnets(ctx)).map((p) => physnetFor(principal, p)))
    ),
    route({
      method: "POST",
      path: "/physnets",
      summary: "Create a physical network with its VLAN ID ranges",
      access: "admin",
      ok: { status: 201, schema: S.Physnet, description: "created" },
    }).body(S.PhysnetCreate)
      .handle(async ({ ctx, body }) => ok(await physnets.createPhysnet(ctx, body), 201)),
    route({
      method: "GET",
      path: "/physnets/{physnet}",
      summary: "Get a physical network",
      access: "any",
      ok: { status: 200, schema: S.Physnet, description: "the physnet" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(physnetFor(principal, await physnets.getPhysnet(ctx, params.physnet)))
    ),
    route({
      method: "DELETE",
      path: "/physnets/{physnet}",
      summary: "Delete a physical network no network uses",
      access: "admin",
      ok: { status: 204, description: "deleted" },
    }).handle(async (
      { ctx, params },
    ) => (await physnets.deletePhysnet(ctx, params.physnet), noContent)),
  ],
};
