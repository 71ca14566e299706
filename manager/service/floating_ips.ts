/**
 * Floating addresses: a tenant takes an address of an admin's floating pool (floating_pools.ts),
 * charged to its `floatingIps` quota, and binds it to one of its own ports by the port's ID, one
 * per address of the port: an IPv4 one to the port's IPv4 address (`floating`), one of an IPv6 pool
 * to its IPv6 address (`floating6`; a port without one is a 400). The binding is kept under the
 * port's ID and copied into the port's record whenever a port of that ID is made, so it follows the
 * port: a pod deleted and made again on another node with the
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
import { type Cidr, formatCidr, formatIp, parseCidr, parseIp } from "@knitter/common/address";
import type { Principal } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import {
  FLOATING_FIELD,
  type FloatingIpRecord,
  keys,
  type NetworkRecord,
  type PortRecord,
} from "../model.ts";
import type { FloatingIpBind, FloatingIpCreate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx, listValues, now, retry } from "./context.ts";
import { claimEntry } from "./claims.ts";
import { closeFloatingStint, openFloatingStint } from "./floating_history.ts";
import { getFloatingPool, storedAddress, usableIn } from "./floating_pools.ts";
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
  claim?: { network: string; name: string };
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
  if (r.claim) out.claim = { network: r.claim.network, name: r.claim.name };
  return out;
}

/** Now, for a stint that follows the open one: never at its very start (its key is its start). */
function stintTime(ctx: Ctx, r: FloatingIpRecord): number {
  return Math.max(clockMs(ctx), (r.stintFrom ?? -1) + 1);
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
    const taken: FloatingIpRecord = { address, pool: pool.name, tenant, createdAt: now() };
    const r = openFloatingStint(ctx, tx, { record: taken, atMs: clockMs(ctx) });
    tx.check(e).set(e.key, r).set(keys.floatingIpOfTenant(tenant, address), { address });
    return r;
  });
  return view(record);
}

/** The address asked for, as the pool's family writes it (a pool is of one family). */
function askedAddress(text: string, pool: { name: string }, cidrs: Cidr[]): string {
  const ip = parseIp(text);
  const family = cidrs[0].family;
  if (!ip || ip.family !== family) {
    throw invalid(
      "address",
      `"${text}" is not an IPv${family} address: floating pool "${pool.name}" is IPv${family}`,
    );
  }
  if (!cidrs.some((c) => usableIn(c, ip.value))) {
    throw invalid(
      "address",
      `${text} is outside floating pool "${pool.name}" (${cidrs.map(formatCidr).join(", ")}): ` +
        `ask for one of its addresses, or leave address out for the first free one`,
    );
  }
  return formatIp(ip);
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
      const address = formatIp({ family: c.family, value: v });
      if (usableIn(c, v) && !taken.has(address)) return address;
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
  const e = await ctx.store.get<FloatingIpRecord>(
    keys.floatingIp(storedAddress(target.address)),
  );
  if (e.value?.tenant !== target.tenant) {
    throw notFound(
      `Tenant "${target.tenant}" holds no floating address ${target.address}; take one with ` +
        `POST /tenants/${target.tenant}/floating-ips`,
    );
  }
  return e;
}

/** What a binding names: a port by its key's ID, or a claim; and the index that keeps it. */
type Bound =
  | { kind: "port"; net: NetworkRecord; id: string; asked: string }
  | { kind: "claim"; net: NetworkRecord; name: string };

function boundOf(net: NetworkRecord, tenant: string, body: z.infer<typeof FloatingIpBind>): Bound {
  if ((body.port === undefined) === (body.claim === undefined)) {
    throw invalid(
      "port",
      "name the port (port: its ID) or the claim (claim: its name) to bind the address to, one of them",
    );
  }
  return body.port !== undefined
    ? { kind: "port", net, id: keyId(net.tenant, tenant, body.port), asked: body.port }
    : { kind: "claim", net, name: body.claim! };
}

function indexKey(tenant: string, b: Bound, family: 4 | 6) {
  return b.kind === "port"
    ? keys.floatingOfPort(b.net.id, b.id, family)
    : keys.floatingOfClaim(b.net.id, tenant, b.name, family);
}

/** The family of a floating address (as stored: one of its pool's). */
function familyOf(address: string): 4 | 6 {
  return address.includes(":") ? 6 : 4;
}

/** 400 when the port or claim has no address of the floating address's family to stand for. */
function refuseFamily(b: Bound, address: string, hasIp6: boolean): void {
  if (familyOf(address) === 4 || hasIp6) return;
  const what = b.kind === "port" ? `Port "${b.asked}"` : `Claim "${b.name}"`;
  throw invalid(
    b.kind,
    `${address} is IPv6 and ${what} of network "${b.net.name}" has no IPv6 address (its network ` +
      `has no cidr6): bind an address of an IPv4 pool, or use a port of a dual-stack network`,
  );
}

function sameBinding(r: FloatingIpRecord, b: Bound): boolean {
  return b.kind === "port"
    ? r.port?.networkId === b.net.id && r.port.id === b.id
    : r.claim?.networkId === b.net.id && r.claim.name === b.name;
}

/**
 * Binds the address to a port of the tenant's, by the port's ID, or to a claim of the tenant's (its
 * active port has the traffic, through a live migration): the port or claim must exist now (on the
 * tenant's network or a public one), have no floating address, and the address no binding.
 */
export async function bindFloatingIp(
  ctx: Ctx,
  target: FloatingTarget & { body: z.infer<typeof FloatingIpBind> },
): Promise<FloatingIpView> {
  const { tenant, body } = target;
  const net = await resolveNetwork(ctx, { ...target, network: body.network, fresh: true });
  const b = boundOf(net, tenant, body);
  const { record, ports } = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const r = e.value!;
    if (sameBinding(r, b)) return { record: r, ports: [] };
    if (r.port || r.claim) {
      const what = r.port ? `port "${r.port.id}"` : `claim "${r.claim!.name}"`;
      throw new ApiError(
        "in_use",
        `${r.address} is bound to ${what} of network "${(r.port ?? r.claim)!.network}"; ` +
          `unbind it first (POST .../floating-ips/${r.address}/unbind)`,
      );
    }
    const { targets, hasIp6 } = b.kind === "port"
      ? await ownPortTarget(ctx, { net, tenant, id: b.asked, keyId: b.id })
      : await claimPortsOf(ctx, tx, { net, tenant, name: b.name });
    refuseFamily(b, r.address, hasIp6);
    const family = familyOf(r.address);
    const field = FLOATING_FIELD[family];
    const index = await ctx.store.get<{ address: string }>(indexKey(tenant, b, family));
    const taken = index.value?.address ?? targets.find((p) => p.value?.[field])?.value?.[field];
    if (taken !== undefined) {
      throw new ApiError(
        "in_use",
        `${b.kind === "port" ? `Port "${b.asked}"` : `Claim "${b.name}"`} has floating address ` +
          `${taken} already (one per port address); unbind that one first`,
        b.kind,
      );
    }
    const bound: FloatingIpRecord = b.kind === "port"
      ? { ...r, port: { network: net.name, networkId: net.id, id: b.id } }
      : { ...r, claim: { network: net.name, networkId: net.id, name: b.name } };
    const at = stintTime(ctx, r);
    await closeFloatingStint(ctx, tx, { record: r, atMs: at, ended: "bound" });
    tx.check(e).set(e.key, openFloatingStint(ctx, tx, { record: bound, atMs: at }));
    tx.checkAbsent(index.key).set(index.key, { address: r.address });
    tx.set(keys.floatingMarked(net.id), { address: r.address });
    const changed: PortRecord[] = [];
    for (const pe of targets) {
      if (!pe.value) continue;
      const withFloating: PortRecord = { ...pe.value, [field]: r.address };
      tx.check(pe).set(pe.key, withFloating);
      changed.push(withFloating);
    }
    return { record: bound, ports: changed };
  });
  for (const port of ports) publish(ctx, net, port);
  return view(record);
}

/** The tenant's port of that ID on `net` as a bind's target, and whether it has an IPv6 address. */
async function ownPortTarget(
  ctx: Ctx,
  p: { net: NetworkRecord; tenant: string; id: string; keyId: string },
): Promise<{ targets: Entry<PortRecord>[]; hasIp6: boolean }> {
  const e = await ownPort(ctx, p);
  return { targets: [e], hasIp6: e.value!.ip6 !== undefined };
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

/**
 * The ports of the tenant's claim on `net` (404 when it has none of that name); the commit checks
 * the claim, so a port that joins it meanwhile makes the bind read again.
 */
async function claimPortsOf(
  ctx: Ctx,
  tx: Tx,
  c: { net: NetworkRecord; tenant: string; name: string },
): Promise<{ targets: Entry<PortRecord>[]; hasIp6: boolean }> {
  const ce = await claimEntry(ctx, { tenant: c.tenant, networkId: c.net.id, name: c.name });
  if (!ce.value) {
    throw notFound(
      `Tenant "${c.tenant}" has no claim "${c.name}" on network "${c.net.name}": a floating ` +
        `address binds to one of the tenant's own claims`,
    );
  }
  tx.check(ce);
  const targets = await ctx.store.getMany<PortRecord>(
    ce.value.ports.map((id) => keys.port(c.net.id, keyId(c.net.tenant, c.tenant, id))),
  );
  return { targets, hasIp6: ce.value.ip6 !== undefined };
}

function publish(ctx: Ctx, net: NetworkRecord, port: PortRecord): void {
  ctx.feed.publish({ type: "port", op: "put", port: portView(net, port) });
}

/** Takes the address off its port or claim; it stays the tenant's. Unbound already: as it is. */
export async function unbindFloatingIp(
  ctx: Ctx,
  target: FloatingTarget,
): Promise<FloatingIpView> {
  const { record, ports } = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const r = e.value!;
    if (!r.port && !r.claim) return { record: r, ports: [] };
    const { port: _port, claim: _claim, ...rest } = r;
    const at = stintTime(ctx, r);
    await closeFloatingStint(ctx, tx, { record: r, atMs: at, ended: "unbound" });
    const unbound = openFloatingStint(ctx, tx, { record: rest, atMs: at });
    tx.check(e).set(e.key, unbound);
    return { record: unbound, ports: await unbindIn(ctx, tx, r) };
  });
  for (const port of ports) await publishOf(ctx, port);
  return view(record);
}

/**
 * Adds the end of `r`'s binding to the commit: its index goes, and the ports that carry it (the
 * port of that ID, or the claim's) lose the address. Answers those ports as changed.
 */
async function unbindIn(ctx: Ctx, tx: Tx, r: FloatingIpRecord): Promise<PortRecord[]> {
  const at = r.port ?? r.claim;
  if (!at || !r.tenant) return [];
  const family = familyOf(r.address);
  const field = FLOATING_FIELD[family];
  const index = await ctx.store.get(
    r.port
      ? keys.floatingOfPort(r.port.networkId, r.port.id, family)
      : keys.floatingOfClaim(r.claim!.networkId, r.tenant, r.claim!.name, family),
  );
  if (index.value) tx.check(index).delete(index.key);
  let portKeys = r.port ? [keys.port(r.port.networkId, r.port.id)] : [];
  if (r.claim) {
    const ce = await claimEntry(ctx, {
      tenant: r.tenant,
      networkId: r.claim.networkId,
      name: r.claim.name,
    });
    if (ce.value) tx.check(ce);
    portKeys = (ce.value?.ports ?? []).map((id) =>
      keys.port(ce.value!.networkId, keyId(ce.value!.networkTenant, ce.value!.tenant, id))
    );
  }
  const changed: PortRecord[] = [];
  for (const pe of await ctx.store.getMany<PortRecord>(portKeys)) {
    if (pe.value?.[field] !== r.address) continue;
    const rest = { ...pe.value };
    delete rest[field];
    tx.check(pe).set(pe.key, rest);
    changed.push(rest);
  }
  return changed;
}

/** Tells the feed of a port changed by a binding (its network read for the port's view). */
async function publishOf(ctx: Ctx, port: PortRecord): Promise<void> {
  const net = await ctx.store.get<NetworkRecord>(keys.network(port.networkTenant, port.network));
  if (net.value?.id === port.networkId) publish(ctx, net.value, port);
}

/** Releases the address: unbound, refunded, and in quarantine for `settings.quarantineMs`. */
export async function deleteFloatingIp(ctx: Ctx, target: FloatingTarget): Promise<void> {
  const ports = await retry(ctx, async (tx) => {
    const e = await heldBy(ctx, target);
    const r = e.value!;
    const at = stintTime(ctx, r);
    await closeFloatingStint(ctx, tx, { record: r, atMs: at, ended: "released" });
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
  for (const port of ports) await publishOf(ctx, port);
}
