/**
 * Services: a virtual address (VIP) of one of a tenant's own networks, taken from its pool like a
 * port's address, whose TCP/UDP ports the sending node spreads over backend ports of the same
 * network (agent/PIPELINE.md, "Services"). The manager keeps the record, holds the VIP in the pool
 * and announces the record on the change feed; each agent resolves the backends against the ports
 * it knows (a port bound to a node is an endpoint), so a backend that goes away stops receiving new
 * connections as soon as its port's delete reaches the node, without a service change.
 */
import type { z } from "zod";
import type { ServicePort } from "@knitter/common";
import { formatIp } from "@knitter/common/address";
import type { Principal } from "../auth.ts";
import { ApiError, invalid } from "../errors.ts";
import type { PoolEdit } from "../ipam/bitmap_pool.ts";
import { keys, type NetworkRecord, type PortRecord, type ServiceRecord } from "../model.ts";
import { MAX_SERVICES_PER_TENANT, type ServiceCreate, type ServiceUpdate } from "../schemas.ts";
import type { Tx } from "../store/tx.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { takeAddress } from "./ip_groups.ts";
import { resolveNetworkRef } from "./network_lookup.ts";
import { sweepQuarantine } from "./quarantine.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";
import { claimName, countOneLess } from "./tenant_counts.ts";
import {
  checkVipFamily,
  chosenFamilies,
  type Families,
  familyOf,
  recordFamilies,
  vipsOf,
} from "./service_families.ts";

type Create = z.infer<typeof ServiceCreate>;
type Update = z.infer<typeof ServiceUpdate>;

/** A backend that receives new connections: a port bound to a node. */
export interface ServiceEndpoint {
  port: string;
  ip: string;
  node: string;
}

/**
 * The record as the API answers it: without the pool index, with its families (also of a record
 * stored before services had several) and its endpoints when read.
 */
export function serviceView(s: ServiceRecord, status?: ServiceStatus) {
  const { vipIndex: _, ...rest } = s;
  const view = { ...rest, ...recordFamilies(s) };
  return status ? { ...view, status } : view;
}

export interface ServiceStatus {
  endpoints: ServiceEndpoint[];
  message?: string;
}

export async function createService(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; body: Create },
): Promise<ServiceRecord> {
  const { principal, tenant, body } = req;
  const ports = checkedPorts(body.ports);
  const first = await ownNetwork(ctx, principal, tenant, body.network);
  const families = chosenFamilies(first.net, body);
  if (body.vip !== undefined) checkVipFamily(first.net, families.ipFamilies, body.vip);
  const pool = ctx.pools.addresses(first.net);
  const service = await pool.exclusive(() =>
    retry(ctx, async (tx, attempt) => {
      const { net, version } = attempt === 0
        ? first
        : await ownNetwork(ctx, principal, tenant, body.network);
      if (net.id !== first.net.id) {
        throw new ApiError(
          "store_conflict",
          `Network "${net.name}" was deleted and made again while the service was being created; try again`,
          "network",
        );
      }
      const t = await getTenantEntry(ctx, tenant);
      const e = await claimName(ctx, tx, {
        key: keys.service(tenant, body.name),
        count: keys.serviceCount(tenant),
        most: MAX_SERVICES_PER_TENANT,
        tenant,
        kind: "Service",
        name: body.name,
      });
      const backends = await checkedBackends(ctx, tx, net, tenant, body.backends);
      const edit = await pool.edit(tx);
      const vip = body.vip === undefined
        ? await takeFree(ctx, tx, edit, net)
        : await takeAddress(ctx, tx, { edit, net, tenant, text: body.vip, field: "vip" });
      edit.flush();
      const record: ServiceRecord = {
        name: body.name,
        tenant,
        network: net.name,
        networkId: net.id,
        ...vipFields(net, families, vip.ip),
        vipIndex: vip.index,
        ports,
        backends,
        ...(body.selector ? { selector: body.selector } : {}),
        sessionAffinity: body.sessionAffinity,
        createdAt: now(),
      };
      // The tenant's and the network's versions: no service outlives either.
      tx.check(t).set(e.key, record);
      tx.check({ key: keys.network(net.tenant, net.name), version });
      tx.set(keys.serviceOfNetwork(net.id, tenant, body.name), true);
      return record;
    })
  );
  ctx.metrics.allocations.inc({ kind: "ip" }, 1);
  ctx.feed.publish({ type: "service", op: "put", service: serviceView(service) });
  return service;
}

/** The VIP fields of a record whose pool address is `ip`. */
function vipFields(net: NetworkRecord, families: Families, ip: string) {
  const vips = vipsOf(net, families.ipFamilies, ip);
  return { vip: vips[0], vips, ...families };
}

/** Replaces a service's ports, backends and affinity; its network and VIP stay. */
export async function updateService(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; name: string; body: Update },
): Promise<ServiceRecord> {
  const { principal, tenant, name, body } = req;
  const ports = checkedPorts(body.ports);
  const service = await retry(ctx, async (tx) => {
    const e = await ctx.store.get<ServiceRecord>(keys.service(tenant, name));
    if (!e.value) return await missingInTenant(ctx, tenant, `Service "${name}"`);
    const { net } = await ownNetwork(ctx, principal, tenant, e.value.network);
    const backends = await checkedBackends(ctx, tx, net, tenant, body.backends);
    const { selector: _, ...kept } = e.value;
    const record: ServiceRecord = {
      ...kept,
      ports,
      backends,
      ...(body.selector ? { selector: body.selector } : {}),
      sessionAffinity: body.sessionAffinity,
    };
    tx.check(e).set(e.key, record);
    return record;
  });
  ctx.feed.publish({ type: "service", op: "put", service: serviceView(service) });
  return service;
}

/**
 * The tenant's own network a request names (IPv4, IPv6 or dual-stack). Another tenant's network is refused, public or
 * private alike (a private one answers as missing, as its existence must not leak): a service
 * spreads its clients over the backends of one tenant.
 */
async function ownNetwork(ctx: Ctx, principal: Principal, tenant: string, network: string) {
  const ref = await resolveNetworkRef(ctx, { principal, tenant, network, fresh: true });
  if (ref.net.tenant !== tenant) {
    throw new ApiError(
      "forbidden",
      `Network "${network}" belongs to tenant "${ref.net.tenant}": a service is on a network of its own tenant`,
      "network",
    );
  }
  if (ref.net.dataPlane === "external") {
    throw invalid(
      "network",
      `Network "${network}" is carried by another plugin (dataPlane external): no flows of ours balance it`,
    );
  }
  return ref;
}

/** Ports with their target port filled in, each (protocol, port) once. */
function checkedPorts(specs: Update["ports"]): ServicePort[] {
  const seen = new Set<string>();
  return specs.map((p, i) => {
    const key = `${p.protocol}/${p.port}`;
    if (seen.has(key)) throw invalid(`ports[${i}]`, `${key} is listed twice`);
    seen.add(key);
    const out: ServicePort = {
      protocol: p.protocol,
      port: p.port,
      targetPort: p.targetPort ?? p.port,
    };
    if (p.name !== undefined) out.name = p.name;
    return out;
  });
}

/**
 * The backends, each a port of the tenant on the network, listed once; their entries are checked
 * by the commit (a port deleted meanwhile makes it retry and refuse).
 */
async function checkedBackends(
  ctx: Ctx,
  tx: Tx,
  net: NetworkRecord,
  tenant: string,
  ids: string[],
): Promise<string[]> {
  const seen = new Set<string>();
  for (const [i, id] of ids.entries()) {
    const field = `backends[${i}]`;
    if (seen.has(id)) throw invalid(field, `port "${id}" is listed twice`);
    seen.add(id);
    const e = await ctx.store.get<PortRecord>(keys.port(net.id, id));
    if (!e.value || e.value.tenant !== tenant) {
      throw new ApiError(
        "not_found",
        `Port "${id}" of tenant "${tenant}" does not exist on network "${net.name}": a service's backends are its tenant's ports on its network`,
        field,
      );
    }
    tx.check(e);
  }
  return ids;
}

/** Any free address of the network for the VIP (expired quarantines count as free). */
async function takeFree(ctx: Ctx, tx: Tx, edit: PoolEdit, net: NetworkRecord) {
  await sweepQuarantine(ctx, tx, { edit, net, limit: 1 });
  const index = await edit.allocate(ctx.pools.allowed(net));
  if (index === null) {
    throw new ApiError(
      "pool_exhausted",
      `Network "${net.name}" has no free address for the service's VIP; free one, or name a VIP held by nobody`,
      "vip",
    );
  }
  return {
    ip: formatIp({ family: net.family, value: ctx.pools.space(net).valueAt(index) }),
    index,
  };
}

export async function getService(ctx: Ctx, tenant: string, name: string): Promise<ServiceRecord> {
  const s = (await ctx.store.get<ServiceRecord>(keys.service(tenant, name))).value;
  if (!s) return await missingInTenant(ctx, tenant, `Service "${name}"`);
  return s;
}

/** A tenant's services, or every tenant's (the agents' list). */
export async function listServices(ctx: Ctx, tenant?: string): Promise<ServiceRecord[]> {
  if (tenant !== undefined) await getTenantEntry(ctx, tenant);
  return await listValues<ServiceRecord>(ctx.store, keys.services(tenant));
}

/** Whether a port's labels include every pair of a selector. */
export function selects(
  selector: Record<string, string>,
  labels?: Record<string, string>,
): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/**
 * Which backends are endpoints now (named, or selected: the tenant's ports of the network whose
 * labels match), one per family of the service that the port has an address of, and, when some are
 * not, why.
 */
export async function serviceStatus(ctx: Ctx, s: ServiceRecord): Promise<ServiceStatus> {
  const { ipFamilies } = recordFamilies(s);
  const endpoints: ServiceEndpoint[] = [];
  const away: string[] = [];
  const add = (p: PortRecord & { node: string }) => {
    for (const f of ipFamilies) {
      const ip = addressOf(p, f);
      if (ip !== undefined) endpoints.push({ port: p.id, ip, node: p.node });
      else away.push(`"${p.id}" is no endpoint of the ${f} VIP: it has no ${f} address`);
    }
  };
  const named = new Set(s.backends);
  for (const id of s.backends) {
    const p = (await ctx.store.get<PortRecord>(keys.port(s.networkId, id))).value;
    if (p?.node !== undefined && p.tenant === s.tenant) add(p as PortRecord & { node: string });
    else away.push(`"${id}" (${p ? "bound to no node" : "no such port"})`);
  }
  if (s.selector) {
    for (const p of await listValues<PortRecord>(ctx.store, keys.ports(s.networkId))) {
      if (named.has(p.id) || p.tenant !== s.tenant || !selects(s.selector, p.labels)) continue;
      if (p.node !== undefined) add(p as PortRecord & { node: string });
    }
  }
  if (endpoints.length === 0) {
    const why = s.backends.length === 0
      ? s.selector ? "its selector matches no port bound to a node" : "it names no backend"
      : `of its backends, ${away.join(", ")}`;
    return { endpoints, message: `no endpoints: the VIP answers nothing; ${why}` };
  }
  return away.length ? { endpoints, message: `not endpoints: ${away.join(", ")}` } : { endpoints };
}

/** A port's address of family `f`, if it has one. */
function addressOf(p: Pick<PortRecord, "ip" | "ip6">, f: "IPv4" | "IPv6"): string | undefined {
  if (familyOf(p.ip) === f) return p.ip;
  return f === "IPv6" ? p.ip6 : undefined;
}

export async function deleteService(ctx: Ctx, tenant: string, name: string): Promise<void> {
  const first = await getService(ctx, tenant, name);
  const net = (await ctx.store.get<NetworkRecord>(keys.network(tenant, first.network))).value;
  const release = async (tx: Tx, s: ServiceRecord) => {
    // The network went first only if a store was mended by hand: nothing of its pool is left.
    if (!net || net.id !== s.networkId) return;
    const edit = await ctx.pools.addresses(net).edit(tx);
    await edit.release(s.vipIndex);
    edit.flush();
  };
  const run = () =>
    retry(ctx, async (tx) => {
      const e = await ctx.store.get<ServiceRecord>(keys.service(tenant, name));
      if (!e.value) return await missingInTenant(ctx, tenant, `Service "${name}"`);
      tx.check(e).delete(e.key);
      tx.delete(keys.serviceOfNetwork(e.value.networkId, tenant, name));
      await countOneLess(ctx, tx, keys.serviceCount(tenant));
      await release(tx, e.value);
      return e.value;
    });
  const service = net ? await ctx.pools.addresses(net).exclusive(run) : await run();
  ctx.feed.publish({ type: "service", op: "delete", service: serviceView(service) });
}
