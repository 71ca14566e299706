/**
 * Floating addresses: a tenant takes an address of an admin's floating pool (floating_pools.ts),
 * charged to its `floatingIps` quota, and binds it to one of its own ports by the port's ID (one per
 * port). The binding is kept under the port's ID and copied into the port's record whenever a port
 * of that ID is made, so it follows the port: a pod deleted and made again on another node with the
 * same port ID carries it there, and the feed tells that node (agent/README.md, "Floating
 * addresses": 1:1 NAT both ways). Unbinding keeps the address the tenant's; releasing it (DELETE)
 * puts it in quarantine for `settings.quarantineMs`, as a port's address.
 *
 * A tenant reaches only its own addresses and ports: another tenant's address or port is "not
 * found" (neither is named), so nothing leaks of who holds what.
 *
 * @module
 */
import type { z } from "zod";
import { type Cidr, cidrContains, formatIp, parseCidr, parseIp } from "@knitter/common/address";
import type { Principal } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import { type FloatingIpRecord, keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { FloatingIpBind, FloatingIpCreate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx, listValues, now, retry } from "./context.ts";
import { getFloatingPool } from "./floating_pools.ts";
import { resolveNetwork } from "./network_lookup.ts";
import { keyId, portView } from "./ports/mod.ts";
import { QuotaCharges } from "./quotas.ts";
import { getTenantEntry } from "./tenants.ts";

/** A floating address as answered. */
export interface FloatingIpView {
  address: string;
  pool: string;
  tenant: string;
  createdAt: string;
  port?: { network: string; id: string };
}

/** A request on one of a tenant's floating addresses. */
export interface FloatingTarget {
  principal: Principal;
  tenant: string;
  address: string;
}

function view(r: FloatingIpRecord): FloatingIpView {
  const out: FloatingIpView = {
    address: r.address,
    pool: r.pool,
    tenant: r.tenant!,
    createdAt: r.createdAt,
  };
  if (r.port) out.port = { network: r.port.network, id: r.port.id };
  return out;
}

/** Takes an address of the pool: the one asked for, or the pool's first free one. */
export async function createFloatingIp(
  ctx: Ctx,
  req: { tenant: string; body: z.infer<typeof FloatingIpCreate> },
): Promise<FloatingIpView> {
  const { tenant, body } = req;
  const pool = await getFloatingPool(ctx, body.pool);
  const cidrs = pool.cidrs.map((c) => parseCidr(c) as Cidr);
  const asked = body.address === undefined ? undefined : askedAddress(body.address, pool, cidrs);
  const record = await retry(ctx, async (tx) => {
    // A tenant deleted meanwhile takes nothing.
    tx.check(await getTenantEntry(ctx, tenant));
    const address = asked ?? await firstFree(ctx, pool.name, cidrs);
    const e = await ctx.store.get<FloatingIpRecord>(keys.floatingIp(address));
    if (e.value) refuseTaken(ctx, e.value);
    const charges = new QuotaCharges(ctx, tx);
    await charges.charge(tenant, { floatingIps: 1 });
    charges.flush();
    const r: FloatingIpRecord = { address, pool: pool.name, tenant, createdAt: now() };
    tx.check(e).set(e.key, r).set(keys.floatingIpOfTenant(tenant, address), { address });
    return r;
  });
  return view(record);
}

function askedAddress(text: string, pool: { name: string }, cidrs: Cidr[]): string {
  const ip = parseIp(text);
  if (!ip || ip.family !== 4) throw invalid("address", `"${text}" is not an IPv4 address`);
  if (!cidrs.some((c) => usable(c, ip.value))) {
    throw invalid(
      "address",
      `${text} is outside floating pool "${pool.name}" (${cidrs.map(cidrText).join(", ")}): ` +
        `ask for one of its addresses, or leave address out for the first free one`,
    );
  }
  return formatIp(ip);
}

const cidrText = (c: Cidr) => `${formatIp({ family: 4, value: c.base })}/${c.prefix}`;

/** In the CIDR, and not its network or broadcast address (kept off in a /30 or wider). */
function usable(c: Cidr, value: bigint): boolean {
  if (!cidrContains(c, { family: 4, value })) return false;
  if (c.prefix >= 31) return true;
  return value !== c.base && value !== c.base + c.size - 1n;
}

/** 409 for an address held, or in quarantine; one past its quarantine is free again. */
function refuseTaken(ctx: Ctx, r: FloatingIpRecord): void {
  if (r.tenant === undefined && Date.parse(r.quarantineUntil!) <= clockMs(ctx)) return;
  throw new ApiError(
    "address_taken",
    r.tenant === undefined
      ? `${r.address} was released at ${r.releasedAt} and is in quarantine until ` +
        `${r.quarantineUntil}; ask for another address`
      : `${r.address} is held; ask for another address, or leave address out`,
    "address",
  );
}

/** The pool's first address neither held nor in quarantine (409 when there is none). */
async function firstFree(ctx: Ctx, pool: string, cidrs: Cidr[]): Promise<string> {
  const taken = new Set<string>();
  const at = clockMs(ctx);
  for (const r of await listValues<FloatingIpRecord>(ctx.store, keys.floatingIps())) {
    const quarantined = r.tenant === undefined && Date.parse(r.quarantineUntil!) > at;
    if (r.tenant !== undefined || quarantined) taken.add(r.address);
  }
  for (const c of cidrs) {
    for (let v = c.base; v < c.base + c.size; v++) {
      const address = formatIp({ family: 4, value: v });
      if (usable(c, v) && !taken.has(address)) return address;
    }
  }
  throw new ApiError(
    "pool_exhausted",
    `Floating pool "${pool}" has no free address (held or in quarantine); release one, ` +
      `or ask the admin to add a range to the pool`,
  );
}

/** The tenant's floating addresses. */
export async function listFloatingIps(ctx: Ctx, tenant: string): Promise<FloatingIpView[]> {
  await getTenantEntry(ctx, tenant);
  const out: FloatingIpView[] = [];
  for await (const e of ctx.store.list<{ address: string }>(keys.floatingIpsOfTenant(tenant))) {
    const r = await ctx.store.get<FloatingIpRecord>(keys.floatingIp(e.value!.address));
    if (r.value?.tenant === tenant) out.push(view(r.value));
  }
  return out;
}

export async function getFloatingIp(ctx: Ctx, target: FloatingTarget): Promise<FloatingIpView> {
  return view((await heldBy(ctx, target)).value!);
}

/** The tenant's own address, or 404 (another tenant's is not found either). */
async function heldBy(ctx: Ctx, target: FloatingTarget): Promise<Entry<FloatingIpRecord>> {
  const e = await ctx.store.get<FloatingIpRecord>(keys.floatingIp(target.address));
  if (e.value?.tenant !== target.tenant) {
    throw notFound(
      `Tenant "${target.tenant}" holds no floating address ${target.address}; take one with ` +
        `POST /tenants/${target.tenant}/floating-ips`,
    );
  }
  return e;
}

/**
 * Binds the address to a port of the tenant's, by the port's ID: the port must exist now (on the
 * tenant's network or a public one), have no floating address, and the address no port.
 */
export async function bindFloatingIp(
  ctx: Ctx,
  target: FloatingTarget & { body: z.infer<typeof FloatingIpBind> },
): Promise<FloatingIpView> {
  const { tenant, body } = target;
  const net = await resolveNetwork(ctx, { ...target, network: body.network, fresh: true });
  const id = keyId(net.tenant, tenant, body.port);
  const { record, port } = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const r = e.value!;
    if (r.port?.networkId === net.id && r.port.id === id) return { record: r, port: null };
    if (r.port) {
      throw new ApiError(
        "in_use",
        `${r.address} is bound to port "${r.port.id}" of network "${r.port.network}"; unbind ` +
          `it first (POST .../floating-ips/${r.address}/unbind)`,
      );
    }
    const pe = await ownPort(ctx, { net, tenant, id: body.port, keyId: id });
    const index = await ctx.store.get<{ address: string }>(keys.floatingOfPort(net.id, id));
    if (index.value) {
      throw new ApiError(
        "in_use",
        `Port "${body.port}" has floating address ${index.value.address} already (one per ` +
          `port address); unbind that one first`,
        "port",
      );
    }
    const bound: FloatingIpRecord = {
      ...r,
      port: { network: net.name, networkId: net.id, id },
    };
    const withFloating: PortRecord = { ...pe.value!, floating: r.address };
    tx.check(e).set(e.key, bound);
    tx.checkAbsent(index.key).set(index.key, { address: r.address });
    tx.check(pe).set(pe.key, withFloating);
    return { record: bound, port: withFloating };
  });
  if (port) publish(ctx, net, port);
  return view(record);
}

/** The tenant's port of that ID on `net`, or 404 (another tenant's is not found either). */
async function ownPort(
  ctx: Ctx,
  p: { net: NetworkRecord; tenant: string; id: string; keyId: string },
): Promise<Entry<PortRecord>> {
  const e = await ctx.store.get<PortRecord>(keys.port(p.net.id, p.keyId));
  if (e.value?.tenant !== p.tenant) {
    throw notFound(
      `Tenant "${p.tenant}" has no port "${p.id}" on network "${p.net.name}": a floating ` +
        `address binds to one of the tenant's own ports, by its ID`,
    );
  }
  return e;
}

function publish(ctx: Ctx, net: NetworkRecord, port: PortRecord): void {
  ctx.feed.publish({ type: "port", op: "put", port: portView(net, port) });
}

/** Takes the address off its port; it stays the tenant's. Unbound already: as it is. */
export async function unbindFloatingIp(
  ctx: Ctx,
  target: FloatingTarget,
): Promise<FloatingIpView> {
  const { record, port } = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const { port: _port, ...rest } = e.value!;
    tx.check(e).set(e.key, rest);
    return { record: rest as FloatingIpRecord, port: await unbindIn(ctx, tx, e.value!) };
  });
  if (port) await publishOf(ctx, port);
  return view(record);
}

/**
 * Adds the end of `r`'s binding to the commit: the index under the port's ID goes, and the port's
 * record (when a port of that ID exists) loses the address. Answers that port as changed.
 */
async function unbindIn(ctx: Ctx, tx: Tx, r: FloatingIpRecord): Promise<PortRecord | null> {
  if (!r.port) return null;
  const index = await ctx.store.get(keys.floatingOfPort(r.port.networkId, r.port.id));
  if (index.value) tx.check(index).delete(index.key);
  const pe = await ctx.store.get<PortRecord>(keys.port(r.port.networkId, r.port.id));
  if (pe.value?.floating !== r.address) return null;
  const { floating: _f, ...rest } = pe.value;
  tx.check(pe).set(pe.key, rest);
  return rest;
}

/** Tells the feed of a port changed by a binding (its network read for the port's view). */
async function publishOf(ctx: Ctx, port: PortRecord): Promise<void> {
  const net = await ctx.store.get<NetworkRecord>(keys.network(port.networkTenant, port.network));
  if (net.value?.id === port.networkId) publish(ctx, net.value, port);
}

/** Releases the address: unbound, refunded, and in quarantine for `settings.quarantineMs`. */
export async function deleteFloatingIp(ctx: Ctx, target: FloatingTarget): Promise<void> {
  const port = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const r = e.value!;
    const at = clockMs(ctx);
    const released: FloatingIpRecord = {
      address: r.address,
      pool: r.pool,
      createdAt: r.createdAt,
      releasedAt: new Date(at).toISOString(),
      quarantineUntil: new Date(at + ctx.settings.quarantineMs).toISOString(),
    };
    const charges = new QuotaCharges(ctx, tx);
    await charges.charge(target.tenant, { floatingIps: -1 });
    charges.flush();
    tx.check(e).set(e.key, released).delete(keys.floatingIpOfTenant(target.tenant, r.address));
    return await unbindIn(ctx, tx, r);
  });
  if (port) await publishOf(ctx, port);
}
