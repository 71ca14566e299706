/**
 * Routers: a tenant's choice to route between some of its own networks (agent/PIPELINE.md,
 * "Routing"). The agents compute the flows on every node; the manager keeps the record, checks it
 * and announces it on the change feed. A router connects only networks of its own tenant that are
 * private and have a gateway, whose CIDRs do not overlap within a family (a destination address
 * must name one network); a network is on one router at most. It routes IPv4 between the networks'
 * IPv4 subnets and IPv6 between their IPv6 ones (an IPv6-only network's cidr, a dual-stack one's
 * cidr6 with its gateway6). A static route sends a destination to an address of its family of a
 * port on one of them (a pod that routes or filters: a CNF).
 */
import type { z } from "zod";
import type { RouterInfo } from "@knitter/common";
import {
  type Cidr,
  cidrContains,
  cidrsOverlap,
  formatCidr,
  formatIp,
  parseCidr,
  parseIp,
} from "@knitter/common/address";
import { ApiError, invalid, notFound } from "../errors.ts";
import { keys, type NetworkRecord, type RouterRecord } from "../model.ts";
import type { RouterCreate, RouterUpdate } from "../schemas.ts";
import type { Tx } from "../store/tx.ts";
import type { Principal } from "../auth.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { cidrOf } from "./network_fields.ts";
import { networkChecks } from "./node_reach.ts";
import {
  advertiseByRouter,
  checkRouterAdvertiseAllowed,
  publishAdvertised,
} from "./router_advertise.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";

/** What a router says, as the API and the feed carry it. */
export function routerView(r: RouterRecord): RouterInfo {
  const view: RouterInfo = {
    name: r.name,
    tenant: r.tenant,
    networks: r.networks,
    routes: r.routes,
    createdAt: r.createdAt,
    advertise: r.advertise === true,
  };
  if (r.description !== undefined) view.description = r.description;
  return view;
}

type Body = z.infer<typeof RouterUpdate>;

/** The tenant's own networks the body names, checked, with the versions they were read at. */
async function connected(ctx: Ctx, tenant: string, body: Body) {
  const seen = new Set<string>();
  const out: { net: NetworkRecord; version: string }[] = [];
  for (const [i, name] of body.networks.entries()) {
    const field = `networks[${i}]`;
    if (seen.has(name)) throw invalid(field, `network "${name}" is listed twice`);
    seen.add(name);
    // Only the path tenant's own networks: never another tenant's, public or not.
    const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
    if (!e.value) {
      throw new ApiError(
        "not_found",
        `Network "${name}" does not exist in tenant "${tenant}"`,
        field,
      );
    }
    const net = e.value;
    if (net.public) {
      throw invalid(
        field,
        `network "${name}" is public: other tenants' pods have ports on it, and a router would open the tenant's other networks to them; connect private networks only`,
      );
    }
    if (net.dataPlane === "external") {
      throw invalid(
        field,
        `network "${name}" has the external data plane: its pods' interfaces are another plugin's and never reach Knitter's flows, where a router is; connect networks with the Open vSwitch data plane`,
      );
    }
    if (net.gateway === undefined) {
      throw invalid(
        field,
        `network "${name}" has no gateway: pods reach a router through their gateway; give the network a gateway (or connect another)`,
      );
    }
    out.push({ net, version: e.version! });
  }
  for (let j = 0; j < out.length; j++) {
    for (let i = 0; i < j; i++) {
      const [a, b] = [out[i].net, out[j].net];
      const clash = routedSubnets(a).flatMap((x) =>
        routedSubnets(b).filter((y) =>
          cidrsOverlap(x.cidr, y.cidr)
        ).map((y) => [x.text, y.text])
      )[0];
      if (clash) {
        throw new ApiError(
          "conflict",
          `Networks "${a.name}" (${clash[0]}) and "${b.name}" (${
            clash[1]
          }) overlap: a router could not tell their addresses apart; connect networks whose CIDRs are disjoint in each family`,
          `networks[${j}]`,
        );
      }
    }
  }
  return out;
}

/**
 * The subnets a router routes of a network, with their gateways: its cidr with its gateway, and a
 * dual-stack network's cidr6 with its gateway6 (without one, its IPv6 side is not routed).
 */
function routedSubnets(n: NetworkRecord): { cidr: Cidr; text: string; gateway: string }[] {
  const out = [{ cidr: cidrOf(n), text: n.cidr, gateway: n.gateway! }];
  if (n.cidr6 !== undefined && n.gateway6 !== undefined) {
    out.push({ cidr: parseCidr(n.cidr6) as Cidr, text: n.cidr6, gateway: n.gateway6 });
  }
  return out;
}

/** The static routes, canonical: each next hop a port address of a connected network. */
function staticRoutes(body: Body, nets: NetworkRecord[]): RouterRecord["routes"] {
  const seen = new Set<string>();
  return (body.routes ?? []).map((r, i) => {
    const field = `routes[${i}]`;
    const dst = parseCidr(r.dst);
    if ("error" in dst) throw invalid(`${field}.dst`, dst.error);
    const text = formatCidr(dst);
    if (seen.has(text)) throw invalid(`${field}.dst`, `${text} is routed twice`);
    seen.add(text);
    const via = parseIp(r.via);
    if (via && via.family !== dst.family) {
      throw invalid(
        `${field}.via`,
        `${r.via} is IPv${via.family} but dst ${text} is IPv${dst.family}: the next hop of a route is an address of its destination's family`,
      );
    }
    const subnets = nets.flatMap((n) => routedSubnets(n).map((s) => ({ ...s, net: n })));
    const on = via && subnets.find((s) => cidrContains(s.cidr, via));
    if (!via || !on) {
      throw invalid(
        `${field}.via`,
        `${r.via} is not an address in a connected network (${
          subnets.map((s) => s.text).join(", ")
        }); the next hop is a pod's address on one of them`,
      );
    }
    const hop = formatIp(via);
    if (hop === on.gateway) {
      throw invalid(
        `${field}.via`,
        `${hop} is the gateway of network "${on.net.name}", the router itself`,
      );
    }
    if (cidrContains(dst, via)) {
      throw invalid(`${field}.via`, `${hop} lies inside ${text}: the route would lead to itself`);
    }
    return { dst: text, via: hop };
  });
}

/** A connected network as the router names it: its subnets and gateways. */
function routerNetwork(n: NetworkRecord): RouterRecord["networks"][number] {
  const out: RouterRecord["networks"][number] = {
    name: n.name,
    id: n.id,
    cidr: n.cidr,
    gateway: n.gateway!,
  };
  if (n.cidr6 !== undefined && n.gateway6 !== undefined) {
    out.cidr6 = n.cidr6;
    out.gateway6 = n.gateway6;
  }
  return out;
}

/** Claims each connected network for the router (one router per network), releases the rest. */
async function index(
  ctx: Ctx,
  tx: Tx,
  tenant: string,
  name: string,
  nets: NetworkRecord[],
  before: RouterRecord | null,
): Promise<void> {
  for (const [i, net] of nets.entries()) {
    const e = await ctx.store.get<{ tenant: string; name: string }>(keys.routerOfNetwork(net.id));
    if (e.value && e.value.name !== name) {
      throw new ApiError(
        "in_use",
        `Network "${net.name}" is already connected by router "${e.value.name}"; a network is on one router at most: add the other networks to that router`,
        `networks[${i}]`,
      );
    }
    tx.check(e).set(e.key, { tenant, name });
  }
  const kept = new Set(nets.map((n) => n.id));
  for (const n of before?.networks ?? []) {
    if (!kept.has(n.id)) tx.delete(keys.routerOfNetwork(n.id));
  }
}

/**
 * The record a body makes, after every check, and the networks its advertise changed; throws on
 * the first failed check.
 */
async function build(
  ctx: Ctx,
  tx: Tx,
  req: { tenant: string; name: string; body: Body; principal?: Principal },
  before: RouterRecord | null,
): Promise<{ record: RouterRecord; advertised: NetworkRecord[] }> {
  const { tenant, name, body } = req;
  checkRouterAdvertiseAllowed(req.principal, body, before ?? {});
  const t = await getTenantEntry(ctx, tenant);
  const refs = await connected(ctx, tenant, body);
  const nets = refs.map((r) => r.net);
  const routes = staticRoutes(body, nets);
  // The networks must still be the ones checked when this commits.
  tx.check(t);
  for (const r of refs) tx.check({ key: keys.network(tenant, r.net.name), version: r.version });
  await index(ctx, tx, tenant, name, nets, before);
  const advertise = body.advertise ?? before?.advertise === true;
  const advertised = await advertiseByRouter(ctx, tx, {
    tenant,
    router: name,
    advertise,
    nets: refs,
    before,
  });
  const record: RouterRecord = {
    name,
    tenant,
    networks: nets.map(routerNetwork),
    routes,
    createdAt: before?.createdAt ?? now(),
  };
  const description = body.description ?? before?.description;
  if (description !== undefined) record.description = description;
  if (advertise) record.advertise = true;
  return { record, advertised };
}

export async function createRouter(
  ctx: Ctx,
  req: { tenant: string; body: z.infer<typeof RouterCreate>; principal?: Principal },
): Promise<RouterRecord> {
  const { tenant, body, principal } = req;
  // One at a time with the other checks that read every network (its advertise's overlap).
  const { router, advertised } = await networkChecks(ctx).run(() =>
    retry(ctx, async (tx) => {
      const e = await ctx.store.get(keys.router(tenant, body.name));
      if (e.value) {
        throw new ApiError(
          "already_exists",
          `Router "${body.name}" already exists in tenant "${tenant}"`,
          "name",
        );
      }
      const built = await build(ctx, tx, { tenant, name: body.name, body, principal }, null);
      tx.check(e).set(e.key, built.record);
      return { router: built.record, advertised: built.advertised };
    })
  );
  await publishAdvertised(ctx, advertised);
  ctx.feed.publish({ type: "router", op: "put", router: routerView(router) });
  return router;
}

/** Replaces what a router connects and routes. */
export async function updateRouter(
  ctx: Ctx,
  req: { tenant: string; name: string; body: Body; principal?: Principal },
): Promise<RouterRecord> {
  const { tenant, name } = req;
  const { router, advertised } = await networkChecks(ctx).run(() =>
    retry(ctx, async (tx) => {
      const e = await ctx.store.get<RouterRecord>(keys.router(tenant, name));
      if (!e.value) throw notFound(`Router "${name}" does not exist in tenant "${tenant}"`);
      const built = await build(ctx, tx, req, e.value);
      tx.check(e).set(e.key, built.record);
      return { router: built.record, advertised: built.advertised };
    })
  );
  await publishAdvertised(ctx, advertised);
  ctx.feed.publish({ type: "router", op: "put", router: routerView(router) });
  return router;
}

export async function deleteRouter(ctx: Ctx, tenant: string, name: string): Promise<void> {
  const { router, advertised } = await retry(ctx, async (tx) => {
    const e = await ctx.store.get<RouterRecord>(keys.router(tenant, name));
    if (!e.value) {
      return await missingInTenant(ctx, tenant, `Router "${name}"`);
    }
    tx.check(e).delete(e.key);
    for (const n of e.value.networks) tx.delete(keys.routerOfNetwork(n.id));
    // Its networks are withdrawn with it.
    const change = { tenant, router: name, advertise: false, nets: [], before: e.value };
    return { router: e.value, advertised: await advertiseByRouter(ctx, tx, change) };
  });
  await publishAdvertised(ctx, advertised);
  ctx.feed.publish({ type: "router", op: "delete", router: routerView(router) });
}

export async function getRouter(ctx: Ctx, tenant: string, name: string): Promise<RouterRecord> {
  const r = (await ctx.store.get<RouterRecord>(keys.router(tenant, name))).value;
  if (!r) {
    return await missingInTenant(ctx, tenant, `Router "${name}"`);
  }
  return r;
}

/** A tenant's routers, or every tenant's (the agents' list). */
export async function listRouters(ctx: Ctx, tenant?: string): Promise<RouterRecord[]> {
  if (tenant !== undefined) await getTenantEntry(ctx, tenant);
  return await listValues<RouterRecord>(ctx.store, keys.routers(tenant));
}
