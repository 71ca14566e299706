/** The address history: who held an address or MAC when. */
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";
import { queryHistory } from "../service/history.ts";
import { items, type Resource, route } from "./route.ts";

export const HISTORY: Resource = {
  tag: "history",
  routes: [
    route({
      method: "GET",
      path: "/tenants/{tenant}/history",
      summary:
        "Who of the tenant's ports held an address or MAC when: at a time (at), over a range (from, to), or all kept",
      access: "owner",
      ok: {
        status: 200,
        schema: S.listOf(S.HistoryEntry),
        description: "the holders, oldest first",
      },
    }).query(S.HistoryQuery)
      .handle(async ({ ctx, params, query }) => {
        if (query.tenant !== undefined && query.tenant !== params.tenant) {
          throw new ApiError(
            "invalid_request",
            "query.tenant: the path names the tenant here; GET /api/v1/history takes tenant",
            "query.tenant",
          );
        }
        return items(await queryHistory(ctx, params.tenant, query));
      }),
    route({
      method: "GET",
      path: "/history",
      summary: "Who held an address or MAC when, across tenants (admin)",
      access: "admin",
      ok: {
        status: 200,
        schema: S.listOf(S.HistoryEntry),
        description: "the holders, oldest first",
      },
    }).query(S.HistoryQuery)
      .handle(async ({ ctx, query }) => items(await queryHistory(ctx, query.tenant, query))),
  ],
};
