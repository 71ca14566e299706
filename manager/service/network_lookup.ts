/**
 * Finding the network a request names: the path tenant's own, else a public network of that name,
 * through this process's caches (`fresh` bypasses them, after a lost race).
 */
import { checkNetworkReach, type Principal } from "../auth.ts";
import { notFound } from "../errors.ts";
import { keys, type NetworkRecord } from "../model.ts";
import type { Ctx } from "./context.ts";
import { getTenantEntry } from "./tenants.ts";

/** A network record with the version it was read at: port commits check it, so a network
 * deleted (or re-created) under an allocation makes the allocation retry instead of orphaning. */
export interface NetworkRef {
  net: NetworkRecord;
  version: string;
}

/** The network a request names: who asks, in which tenant's path, by which name. */
export interface NetworkName {
  principal: Principal;
  tenant: string;
  network: string;
  /** Bypass the caches (after a lost race, or to read what an admin just changed). */
  fresh?: boolean;
}

/**
 * The network a request names: the path tenant's own, else a public network of that name. A tenant
 * token reaching into another tenant's path finds only public networks; private ones are 404, so
 * their existence does not leak.
 */
export async function resolveNetworkRef(ctx: Ctx, name: NetworkName): Promise<NetworkRef> {
  const ref = await resolveForTenant(ctx, name);
  checkNetworkReach(name.principal, ref.net);
  return ref;
}

export async function resolveNetwork(ctx: Ctx, name: NetworkName): Promise<NetworkRecord> {
  return (await resolveNetworkRef(ctx, name)).net;
}

/** Drops what this process remembers of a network (after deleting it, or losing a race). */
export function forgetNetwork(ctx: Ctx, net: NetworkRecord): void {
  const c = ctx.cache;
  c.networks.delete(`${net.tenant}/${net.name}`);
  if (net.public) c.publics.delete(net.name);
  ctx.pools.forgetNetwork(net);
}

/** Every public network, wherever its tenant. */
export async function publicNetworks(ctx: Ctx): Promise<NetworkRecord[]> {
  const out: NetworkRecord[] = [];
  for await (const e of ctx.store.list<{ tenant: string }>(keys.publicNetworks())) {
    const name = e.key[e.key.length - 1] as string;
    const n = await ctx.store.get<NetworkRecord>(keys.network(e.value!.tenant, name));
    if (n.value) out.push(n.value);
  }
  return out;
}

async function resolveForTenant(ctx: Ctx, name: NetworkName): Promise<NetworkRef> {
  const { principal, tenant, network } = name;
  const fresh = name.fresh ?? false;
  if (principal.scope === "tenant" && principal.tenant !== tenant) {
    const ref = await lookup(ctx, tenant, network, fresh);
    if (ref?.net.public) return ref;
    throw notFound(`Network "${network}" does not exist in tenant "${tenant}"`);
  }
  const own = await lookup(ctx, tenant, network, fresh);
  if (own) return own;
  const owner = await publicOwner(ctx, network, fresh);
  // The path's tenant must exist even when the network is another's: it owns the ports made here.
  await tenantExists(ctx, tenant, fresh);
  if (owner !== null) {
    const ref = await lookup(ctx, owner, network, fresh);
    if (ref) return ref;
  }
  throw notFound(
    `Network "${network}" does not exist in tenant "${tenant}" nor among the public networks`,
  );
}

async function lookup(
  ctx: Ctx,
  tenant: string,
  name: string,
  fresh: boolean,
): Promise<NetworkRef | null> {
  const id = `${tenant}/${name}`;
  const { networks } = ctx.cache;
  if (!fresh) {
    const hit = networks.get(id);
    if (hit) return hit;
  }
  const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
  if (!e.value) {
    networks.delete(id);
    return null;
  }
  const ref = { net: e.value, version: e.version! };
  networks.set(id, ref);
  return ref;
}

async function publicOwner(ctx: Ctx, name: string, fresh: boolean): Promise<string | null> {
  const { publics } = ctx.cache;
  if (!fresh && publics.has(name)) return publics.get(name)!;
  const e = await ctx.store.get<{ tenant: string }>(keys.publicNetwork(name));
  if (e.value) publics.set(name, e.value.tenant);
  else publics.delete(name);
  return e.value?.tenant ?? null;
}

async function tenantExists(ctx: Ctx, tenant: string, fresh: boolean): Promise<void> {
  const { tenants } = ctx.cache;
  if (!fresh && tenants.has(tenant)) return;
  await getTenantEntry(ctx, tenant);
  tenants.add(tenant);
}
