/** Nodes: each agent registers its name and tunnel endpoint; overlay flows follow these. */
import type { z } from "zod";
import type { Principal } from "../auth.ts";
import { invalid, notFound } from "../errors.ts";
import { formatIp, parseIp } from "@knitter/common/address";
import { keys, type NodeRecord } from "../model.ts";
import type { NodeRegister } from "../schemas.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { DEFAULT_CLUSTER, unscoped } from "./cluster_names.ts";
import { clusterGuard } from "./clusters.ts";
import { dropNodeReport } from "./conflict_records.ts";

/**
 * What a principal sees of a node: a tenant its name only (no underlay address, no labels), as
 * the API and the console's feed answer it.
 */
export function nodeFor(principal: Principal, n: NodeRecord): NodeRecord | { name: string } {
  return principal.scope === "tenant" ? { name: n.name } : n;
}

export async function registerNode(
  ctx: Ctx,
  name: string,
  body: z.infer<typeof NodeRegister>,
): Promise<{ node: NodeRecord; created: boolean }> {
  const ip = parseIp(body.underlayIp);
  if (!ip) throw invalid("underlayIp", `"${body.underlayIp}" is not an IP address`);
  const result = await retry(ctx, async (tx) => {
    // Its cluster's record, checked by the commit as a port's is: a node never goes in after its
    // cluster's delete listed the nodes it takes along (the delete marks the record first).
    const guard = await clusterGuard(ctx, name);
    if (guard) tx.check(guard);
    const e = await ctx.store.get<NodeRecord>(keys.node(name));
    const t = now();
    const node: NodeRecord = {
      name,
      underlayIp: formatIp(ip),
      labels: body.labels ?? e.value?.labels ?? {},
      registeredAt: e.value?.registeredAt ?? t,
      updatedAt: t,
    };
    const { cluster } = unscoped(name);
    if (cluster !== DEFAULT_CLUSTER) node.cluster = cluster;
    tx.check(e).set(e.key, node);
    return { node, created: e.value === null };
  });
  ctx.feed.publish({ type: "node", op: "put", node: result.node });
  return result;
}

export async function getNode(ctx: Ctx, name: string): Promise<NodeRecord> {
  const n = (await ctx.store.get<NodeRecord>(keys.node(name))).value;
  if (!n) throw notFound(`Node "${name}" is not registered`);
  return n;
}

export function listNodes(ctx: Ctx): Promise<NodeRecord[]> {
  return listValues<NodeRecord>(ctx.store, keys.nodes());
}

/**
 * Forgets a node, and its conflict report (service/conflicts.ts) in the same commit: a report
 * outliving its node would keep marking ports, and a retry of the DELETE would answer 404. The
 * report's entries, which no head names any more, go after it.
 */
export async function deleteNode(ctx: Ctx, name: string): Promise<void> {
  const node = await retry(ctx, async (tx) => {
    const [e, conflicts] = await ctx.store.getMany<unknown>([
      keys.node(name),
      keys.conflicts(name),
    ]);
    if (!e.value) throw notFound(`Node "${name}" is not registered`);
    tx.check(e).delete(e.key);
    if (conflicts.value) {
      tx.check(conflicts).delete(conflicts.key).set(keys.conflictsChanged(), now());
    }
    return e.value as NodeRecord;
  });
  await dropNodeReport(ctx.store, name);
  ctx.feed.publish({ type: "node", op: "delete", node });
}
