/** Tenants: the owners of networks and IP groups (under Kubernetes, one per namespace). */
import type { z } from "zod";
import { ApiError, notFound } from "../errors.ts";
import { keys, type TenantRecord } from "../model.ts";
import type { TenantCreate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import { clockMs, type Ctx, listValues, retry } from "./context.ts";
import { readShares } from "./quota_shares.ts";

export async function createTenant(
  ctx: Ctx,
  body: z.infer<typeof TenantCreate>,
): Promise<TenantRecord> {
  const record = newTenant(ctx, body.name);
  // Read first: a blind checkAbsent would fail every attempt for an existing tenant, counting each
  // as a store conflict before the answer.
  return await retry(ctx, async (tx) => {
    const e = await ctx.store.get(keys.tenant(body.name));
    if (e.value) {
      throw new ApiError("already_exists", `Tenant "${body.name}" already exists`, "name");
    }
    tx.check(e).set(e.key, record);
    return record;
  });
}

/**
 * A tenant as made now, on the manager's clock: the address history hides from a tenant what
 * happened before its createdAt, which was another tenant of the same name.
 */
function newTenant(ctx: Ctx, name: string): TenantRecord {
  return { name, createdAt: new Date(clockMs(ctx)).toISOString(), networks: 0, ipGroups: 0 };
}

/** Creates the tenant unless it exists; used for the built-in admin tenant. */
export async function ensureTenant(ctx: Ctx, name: string): Promise<void> {
  const e = await ctx.store.get(keys.tenant(name));
  if (e.value) return;
  const record = newTenant(ctx, name);
  await ctx.store.commit([{ key: keys.tenant(name), version: null }], [{
    type: "set",
    key: keys.tenant(name),
    value: record,
  }]);
}

export async function getTenantEntry(ctx: Ctx, name: string): Promise<Entry<TenantRecord>> {
  const e = await ctx.store.get<TenantRecord>(keys.tenant(name));
  if (!e.value) throw notFound(`Tenant "${name}" does not exist`);
  return e;
}

/**
 * A tenant's `what` (e.g. `Router "r1"`) is not there: the tenant's own 404 when it is the tenant
 * that is missing, else the thing's.
 */
export async function missingInTenant(ctx: Ctx, tenant: string, what: string): Promise<never> {
  await getTenantEntry(ctx, tenant);
  throw notFound(`${what} does not exist in tenant "${tenant}"`);
}

export async function getTenant(ctx: Ctx, name: string): Promise<TenantRecord> {
  return (await getTenantEntry(ctx, name)).value!;
}

export function listTenants(ctx: Ctx): Promise<TenantRecord[]> {
  return listValues<TenantRecord>(ctx.store, keys.tenants());
}

export async function deleteTenant(ctx: Ctx, name: string): Promise<void> {
  await retry(ctx, async (tx) => {
    const e = await getTenantEntry(ctx, name);
    const t = e.value!;
    const ports: string[] = [];
    for await (const p of ctx.store.list(keys.portsOfForeignNetworks(name), { limit: 5 })) {
      ports.push(`"${p.key.at(-1)}"`);
    }
    if (ports.length > 0) {
      throw new ApiError(
        "in_use",
        `Cannot delete tenant "${name}": it still has ports (${
          ports.join(", ")
        }), on public networks too; release them first`,
      );
    }
    // Security groups are not counted in the record: a tenant made again must not find them.
    const secGroups = (await listValues<{ name: string }>(ctx.store, keys.securityGroups(name), 10))
      .map((g) => `"${g.name}"`);
    const mirrors = (await listValues<{ name: string }>(ctx.store, keys.mirrors(name), 10))
      .map((m) => `"${m.name}"`);
    // Its claims on public networks (those on its own networks keep the networks, counted).
    const claims = (await listValues<{ network: string; name: string }>(
      ctx.store,
      keys.claims(name),
      10,
    )).map((c) => `"${c.network}/${c.name}"`);
    // Its floating addresses: released first (they go through quarantine).
    const floating = (await listValues<{ address: string }>(
      ctx.store,
      keys.floatingIpsOfTenant(name),
      10,
    )).map((f) => f.address);
    if (
      t.networks > 0 || t.ipGroups > 0 || secGroups.length > 0 || mirrors.length > 0 ||
      claims.length > 0 || floating.length > 0
    ) {
      const nets = (await listValues<{ name: string }>(ctx.store, keys.networks(name), 10))
        .map((n) => `"${n.name}"`);
      const groups = (await listValues<{ name: string }>(ctx.store, keys.ipGroups(name), 10))
        .map((g) => `"${g.name}"`);
      const owned = [
        nets.length ? `networks ${nets.join(", ")}` : "",
        groups.length ? `IP groups ${groups.join(", ")}` : "",
        secGroups.length ? `security groups ${secGroups.join(", ")}` : "",
        mirrors.length ? `mirrors ${mirrors.join(", ")}` : "",
        claims.length ? `claims ${claims.join(", ")}` : "",
        floating.length ? `floating addresses ${floating.join(", ")}` : "",
      ].filter(Boolean).join(" and ");
      throw new ApiError(
        "in_use",
        `Cannot delete tenant "${name}": it still owns ${owned}; delete them first`,
      );
    }
    // Its quota and its shares go with it (nothing is counted: it holds nothing).
    tx.check(e).delete(e.key).delete(keys.quota(name));
    for (const s of await readShares(ctx.store, name)) tx.delete(s.key);
  });
  ctx.cache.tenants.delete(name);
  ctx.cache.quotas.delete(name);
}
