/**
 * A trace between two of a tenant's ports, for the console: the packet followed node by node
 * through the flows the manager's model implies, step by step, as `knitctl trace --offline` gives
 * it (the same function: @knitter/knitctl/trace_offline). A tenant's token traces between its own
 * ports only, and its model holds only what that token may see; the nodes' underlay addresses,
 * which a tenant's token never reads (GET /nodes), are named by their nodes in its answer.
 */
import { offlineTrace, type TraceModel } from "@knitter/knitctl/trace_offline";
import type { Principal } from "../auth.ts";
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";
import type { Ctx } from "../service/context.ts";
import { listNodes } from "../service/nodes.ts";
import { getPort, listPorts } from "../service/ports/mod.ts";
import { listRouters, routerView } from "../service/routers.ts";
import { listSecurityGroups } from "../service/security_groups.ts";
import { ok, type Resource, route } from "./route.ts";

export const TRACE: Resource = {
  tag: "trace",
  routes: [
    route({
      method: "POST",
      path: "/tenants/{tenant}/trace",
      summary:
        "Trace a packet from one of the tenant's ports to another, node by node, through the flows the manager's model implies (as knitctl trace --offline)",
      access: "tenant",
      ok: { status: 200, schema: S.TraceReport, description: "the hops, step by step" },
    }).body(S.TraceRequest)
      .handle(async ({ ctx, principal, params, body }) => {
        const end = (e: { network: string; port: string }) =>
          getPort(ctx, { principal, tenant: params.tenant, network: e.network, id: e.port });
        const [src, dst] = await Promise.all([end(body.from), end(body.to)]);
        if (!src.node) {
          throw new ApiError(
            "conflict",
            `Port "${src.id}" on network "${src.network}" is not bound to a node: only a pod's port has flows to trace from`,
            "from",
          );
        }
        const model = await modelFor(ctx, principal, params.tenant);
        const report = await offlineTrace(model, {
          src,
          dst: dst.ip,
          proto: body.proto,
          ...(body.dport !== undefined ? { dport: body.dport } : {}),
        });
        return ok(principal.scope === "admin" ? report : withoutUnderlay(report, model));
      }),
  ],
};

/** What the trace is computed from: the ports the principal sees, the tenant's routers and groups. */
async function modelFor(ctx: Ctx, principal: Principal, tenant: string): Promise<TraceModel> {
  const [ports, nodes, routers, groups] = await Promise.all([
    listPorts(ctx, principal, {}),
    listNodes(ctx),
    listRouters(ctx, tenant),
    listSecurityGroups(ctx, principal.scope === "admin" ? undefined : tenant),
  ]);
  return {
    ports,
    nodes: nodes.map((n) => ({ name: n.name, underlayIp: n.underlayIp })),
    routers: routers.map(routerView),
    groups,
  };
}

/** The report with every node's underlay address replaced by its node's name. */
function withoutUnderlay<T>(report: T, model: TraceModel): T {
  let text = JSON.stringify(report);
  for (const n of model.nodes) {
    const ip = n.underlayIp.replaceAll(".", "\\.");
    text = text.replace(new RegExp(`(?<![\\d.])${ip}(?![\\d.])`, "g"), `node ${n.name}`);
  }
  return JSON.parse(text);
}
