/** Claims: addresses and MACs of a network that belong to a claim, not to a pod (issue 26). */
import * as S from "../schemas.ts";
import * as claims from "../service/claims.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const CLAIMS: Resource = {
  tag: "claims",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/claims",
      summary: "List the tenant's claims, on every network",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Claim), description: "the claims" },
    }).handle(async ({ ctx, principal, params }) =>
      items(await claims.listClaims(ctx, { principal, tenant: params.tenant }))
    ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks/{network}/claims",
      summary: "List the tenant's claims on a network",
      access: "tenant",
      ok: { status: 200, schema: S.listOf(S.Claim), description: "the claims" },
    }).handle(async ({ ctx, principal, params }) =>
      items(await claims.listClaims(ctx, { principal, ...params }))
    ),
    route({
      method: "POST",
      path: "/tenants/{tenant}/networks/{network}/claims",
      summary:
        "Make a claim: it holds an address and MAC of the network (the next free one) until it is deleted; ports bound to it (PUT with claim) get them",
      access: "tenant",
      ok: { status: 201, schema: S.Claim, description: "made, with its address" },
    }).body(S.ClaimCreate)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(await claims.createClaim(ctx, { principal, ...params, body }), 201)
      ),
    route({
      method: "GET",
      path: "/tenants/{tenant}/networks/{network}/claims/{claim}",
      summary: "Get a claim, its address and its ports",
      access: "tenant",
      ok: { status: 200, schema: S.Claim, description: "the claim" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(
        await claims.getClaim(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          name: params.claim,
        }),
      )
    ),
    route({
      method: "DELETE",
      path: "/tenants/{tenant}/networks/{network}/claims/{claim}",
      summary:
        "Delete a claim with no port bound (409 naming them otherwise): its address is released through quarantine",
      access: "tenant",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, principal, params }) => (
      await claims.deleteClaim(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
        name: params.claim,
      }), noContent
    )),
  ],
};
