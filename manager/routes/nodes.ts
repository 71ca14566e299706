/** Nodes: where pods run, with their tunnel endpoints and the conflicts they report. */
import * as S from "../schemas.ts";
import * as conflicts from "../service/conflicts.ts";
import * as nodes from "../service/nodes.ts";
import { items, noContent, ok, type Resource, route } from "./route.ts";

export const NODES: Resource = {
  tag: "nodes",
  routes: [
    route({
      method: "GET",
      path: "/nodes",
      summary: "List registered nodes and their tunnel endpoints",
      access: "any",
      ok: { status: 200, schema: S.listOf(S.Node), description: "the nodes" },
    }).handle(async ({ ctx, principal }) =>
      items((await nodes.listNodes(ctx)).map((n) => nodes.nodeFor(principal, n)))
    ),
    route({
      method: "PUT",
      path: "/nodes/{node}",
      summary: "Register a node (or refresh its record)",
      access: "node",
      ok: { status: 201, schema: S.Node, description: "registered" },
      also: [{ status: 200, description: "updated" }],
    }).body(S.NodeRegister)
      .handle(async ({ ctx, params, body }) => {
        const r = await nodes.registerNode(ctx, params.node, body);
        return ok(r.node, r.created ? 201 : 200);
      }),
    route({
      method: "GET",
      path: "/nodes/{node}",
      summary: "Get a node",
      access: "any",
      ok: { status: 200, schema: S.Node, description: "the node" },
    }).handle(async ({ ctx, principal, params }) =>
      ok(nodes.nodeFor(principal, await nodes.getNode(ctx, params.node)))
    ),
    route({
      method: "DELETE",
      path: "/nodes/{node}",
      summary: "Forget a node",
      access: "admin",
      ok: { status: 204, description: "deleted" },
    }).handle(async ({ ctx, params }) => (await nodes.deleteNode(ctx, params.node), noContent)),
    route({
      method: "PUT",
      path: "/nodes/{node}/conflicts",
      summary:
        "Report the ports this node leaves out of its flows now (agent/PIPELINE.md, Conflicting entries): replaces the node's last report; an empty list clears it",
      access: "node",
      ok: {
        status: 200,
        schema: S.NodeConflicts,
        description:
          "what is kept: entries naming a port bound to another node that holds the MAC or address",
      },
    }).body(S.ConflictReport)
      .handle(async ({ ctx, principal, params, body }) =>
        ok(await conflicts.reportConflicts(ctx, { node: params.node, report: body, principal }))
      ),
    route({
      method: "GET",
      path: "/nodes/{node}/conflicts",
      summary: "The ports a node last reported leaving out of its flows",
      access: "node",
      ok: { status: 200, schema: S.NodeConflicts, description: "the node's record" },
    }).handle(async ({ ctx, params }) => ok(await conflicts.nodeConflicts(ctx, params.node))),
  ],
};
