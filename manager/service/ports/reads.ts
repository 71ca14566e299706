/** Reading ports: one by its ID, a network's, and across networks through the narrowest index. */
import type { Port } from "@knitter/common";
import type { z } from "zod";
import { type Principal, seesPort } from "../../auth.ts";
import { notFound } from "../../errors.ts";
import { keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { PortQuery } from "../../schemas.ts";
import type { Key } from "../../store/store.ts";
import { type Ctx, listGivingWay, listValues } from "../context.ts";
import { resolveNetwork } from "../network_lookup.ts";
import { ownerOf, visible } from "./access.ts";
import { keyId, podKey, type PortTarget, portView } from "./records.ts";

type Query = z.infer<typeof PortQuery>;

export async function getPort(ctx: Ctx, target: PortTarget): Promise<Port> {
  const { principal, id } = target;
  const net = await resolveNetwork(ctx, target);
  const owner = ownerOf(principal, target.tenant);
  const port = (await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, owner, id))))
    .value;
  if (!port || !visible(principal, port)) {
    throw notFound(`Port "${id}" does not exist on network "${target.network}"`);
  }
  return portView(net, port);
}

export async function listNetworkPorts(
  ctx: Ctx,
  req: Omit<PortTarget, "id"> & { query: Query },
): Promise<Port[]> {
  const net = await resolveNetwork(ctx, { ...req, fresh: true });
  const ports = await listGivingWay<PortRecord>(ctx, keys.ports(net.id));
  return ports.filter((p) => matches(req.principal, p, req.query)).map((p) => portView(net, p));
}

/** Ports across networks, through the narrowest index that answers the query. */
export async function listPorts(ctx: Ctx, principal: Principal, query: Query): Promise<Port[]> {
  // A tenant token only ever reads its own ports.
  const tenant = principal.scope === "tenant" ? principal.tenant : query.tenant;
  let ports: PortRecord[];
  // A node's ports are not indexed (an allocation would write the key): they are the listing's,
  // filtered (matches), as every agent's own listing reads them.
  if (query.pod !== undefined) {
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

function matches(principal: Principal, p: PortRecord, q: Query): boolean {
  if (!visible(principal, p)) return false;
  if (q.node !== undefined && p.node !== q.node) return false;
  if (q.tenant !== undefined && p.tenant !== q.tenant) return false;
  if (q.pod !== undefined && podKey(p) !== q.pod) return false;
  return true;
}
