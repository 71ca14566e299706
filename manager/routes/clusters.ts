/** Clusters: what each Kubernetes cluster's node and monitor tokens may reach. */
import * as S from "../schemas.ts";
import * as clusters from "../service/clusters.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const CLUSTERS: Resource = {
  tag: "clusters",
  routes: [
    route({
      method: "GET",
      path: "/clusters",
      summary: "List clusters and what each may use (a node or monitor token sees its own)",
      access: "infra",
      ok: { status: 200, schema: S.listOf(S.Cluster), description: "the clusters" },
    }).handle(async ({ ctx, principal }) => {
      const all = await clusters.listClusters(ctx);
      if (principal.scope === "admin") return items(all);
      return items(all.filter((c) => "cluster" in principal && c.name === principal.cluster));
    }),
    route({
      method: "POST",
      path: "/clusters",
      summary:
        "Register a cluster: its node and monitor tokens (cluster in the manager's tokens) reach what it lists",
      access: "admin",
      ok: { status: 201, schema: S.Cluster, description: "created" },
    }).body(S.ClusterCreate)
      .handle(async ({ ctx, body }) => ok(await clusters.createCluster(ctx, body), 201)),
    route({
      method: "GET",
      path: "/clusters/{cluster}",
      summary: "Get a cluster with its registered nodes and which tokens it has",
      access: "admin",
      ok: { status: 200, schema: S.Cluster, description: "the cluster" },
    }).handle(async ({ ctx, params, tokens }) =>
      ok({
        ...await clusters.getCluster(ctx, params.cluster),
        credentials: tokens.ofCluster(params.cluster),
      })
    ),
    route({
      method: "PATCH",
      path: "/clusters/{cluster}",
      summary:
        "Change which tenants, networks and physnets a cluster may use (from its next request on)",
      access: "admin",
      ok: { status: 200, schema: S.Cluster, description: "updated" },
    }).body(S.ClusterUpdate)
      .handle(async ({ ctx, params, body }) =>
        ok(await clusters.updateCluster(ctx, params.cluster, body))
      ),
    route({
      method: "DELETE",
      path: "/clusters/{cluster}",
      summary: "Delete a cluster with no ports, and its nodes (409 while it has ports)",
      access: "admin",
      ok: { status: 204, description: "deleted, with its nodes" },
    }).handle(async (
      { ctx, params },
    ) => (await clusters.deleteCluster(ctx, params.cluster), noContent)),
  ],
};
