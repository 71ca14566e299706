/**
 * Ports: one address of a network, bound to a pod's interface. PUT is idempotent: the same port ID
 * always gets the same answer, so an agent may retry or restart at any point.
 *
 * This file holds the PUT's entry and the reads; the rest is one concept per file:
 * port_access.ts (who may do what), port_batch.ts (new ports committed together),
 * port_retry.ts (the careful path: lost races and restarts), port_allocation.ts (an address, a
 * MAC, the record), port_binding.ts (second PUTs and unbind), port_release.ts (DELETE) and
 * port_records.ts (the record, its keys, indexes and view).
 */
import type { Port } from "@knitter/common";
import type { z } from "zod";
import { type Principal, seesPort } from "../auth.ts";
import { notFound } from "../errors.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { PortQuery } from "../schemas.ts";
import type { Key } from "../store/store.ts";
import { type Ctx, listGivingWay, listValues } from "./context.ts";
import { resolveNetwork, resolveNetworkRef } from "./networks.ts";
import { authorizePut, checkPlacement, ownerOf, visible } from "./port_access.ts";
import { batchedPut } from "./port_batch.ts";
import { carefulPut, portGuards } from "./port_retry.ts";
import { keyId, podKey, type PortBody, portView, type PutResult } from "./port_records.ts";

export type { PortBody, PutResult } from "./port_records.ts";
export { keyId, macFor, portKeyId, portView } from "./port_records.ts";
export { unbindPort } from "./port_binding.ts";
export { deletePort } from "./port_release.ts";

export async function putPort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
  request: PortBody,
): Promise<PutResult> {
  const owner = ownerOf(principal, tenant);
  const body = authorizePut(principal, { owner, id }, request);
  const guards = await portGuards(ctx, owner, id, body);
  const ref = await resolveNetworkRef(ctx, principal, tenant, networkName);
  await checkPlacement(ctx, principal, { owner, id, net: ref.net });
  const plain = body.ip === undefined && body.ipGroup === undefined && body.mac === undefined;
  // A port naming security groups checks each in its commit: too many checks for a batch's.
  if (plain && !body.securityGroups?.length) {
    const batched = await batchedPut(ctx, { ref, owner, id, body, guard: guards[0] ?? null });
    if (batched) return counted(ctx, batched);
  }
  // The careful path: fixed addresses, IP groups, security groups, and whatever the batch could
  // not settle.
  return counted(
    ctx,
    await carefulPut(ctx, { principal, tenant, networkName, ref, owner, id, body, guards }),
  );
}

function counted(ctx: Ctx, r: PutResult): PutResult {
  if (r.created) ctx.metrics.allocations.inc({ kind: "ip" });
  if (r.changed) ctx.feed.publish({ type: "port", op: "put", port: r.port });
  return r;
}

export async function getPort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
): Promise<Port> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName);
  const owner = ownerOf(principal, tenant);
  const port = (await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, owner, id))))
    .value;
  if (!port || !visible(principal, port)) {
    throw notFound(`Port "${id}" does not exist on network "${networkName}"`);
  }
  return portView(net, port);
}

export async function listNetworkPorts(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  query: z.infer<typeof PortQuery>,
): Promise<Port[]> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName, true);
  const ports = await listGivingWay<PortRecord>(ctx, keys.ports(net.id));
  return ports.filter((p) => matches(principal, p, query)).map((p) => portView(net, p));
}

/** Ports across networks, through the narrowest index that answers the query. */
export async function listPorts(
  ctx: Ctx,
  principal: Principal,
  query: z.infer<typeof PortQuery>,
): Promise<Port[]> {
  // A tenant token only ever reads its own ports.
  const tenant = principal.scope === "tenant" ? principal.tenant : query.tenant;
  let ports: PortRecord[];
  if (query.node !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfNode(query.node));
  } else if (query.pod !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfPod(...(query.pod.split("/") as [string, string])));
  } else if (tenant !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfForeignNetworks(tenant));
    for (const n of await listValues<NetworkRecord>(ctx.store, keys.networks(tenant))) {
      ports.push(...await listGivingWay<PortRecord>(ctx, keys.ports(n.id)));
    }
  } else {
    ports = await listGivingWay<PortRecord>(ctx, keys.ports());
  }
  const nets = new Map<string, NetworkRecord | null>();
  const out: Port[] = [];
  for (const p of ports) {
    if (!matches(principal, p, query)) continue;
    if (!nets.has(p.networkId)) {
      nets.set(
        p.networkId,
        (await ctx.store.get<NetworkRecord>(keys.network(p.networkTenant, p.network))).value,
      );
    }
    const net = nets.get(p.networkId);
    // A port outlives its network only mid-delete; it is not shown then.
    if (net?.id !== p.networkId) continue;
    const view = portView(net, p);
    if (seesPort(principal, view)) out.push(view);
  }
  return out;
}

/** The ports an index (keys ending in network ID and port ID) points at. */
async function throughIndex(ctx: Ctx, prefix: Key): Promise<PortRecord[]> {
  const portKeys: Key[] = [];
  for await (const e of ctx.store.list(prefix)) {
    portKeys.push(keys.port(e.key.at(-2) as string, e.key.at(-1) as string));
  }
  return (await ctx.store.getMany<PortRecord>(portKeys)).flatMap((e) => (e.value ? [e.value] : []));
}

function matches(principal: Principal, p: PortRecord, q: z.infer<typeof PortQuery>): boolean {
  if (!visible(principal, p)) return false;
  if (q.node !== undefined && p.node !== q.node) return false;
  if (q.tenant !== undefined && p.tenant !== q.tenant) return false;
  if (q.pod !== undefined && podKey(p) !== q.pod) return false;
  return true;
}
