/**
 * IP groups: a tenant's named set of addresses of one network, held back from the pool so that
 * pods asking for the group get one of them, and get it again when they come back.
 */
import type { z } from "zod";
import { actsAsOperator, type Principal } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import type { PoolEdit } from "../ipam/bitmap_pool.ts";
import { formatIp } from "@knitter/common/address";
import { type IpGroupAddress, type IpGroupRecord, keys, type NetworkRecord } from "../model.ts";
import type { IpGroupCreate, IpGroupUpdate } from "../schemas.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { holderOf } from "./holders.ts";
import { readGroup, withMembers, writeGroup } from "./ip_group_members.ts";
import { sweepQuarantine, takeAsked } from "./quarantine.ts";
import type { Tx } from "../store/tx.ts";
import { QuotaCharges } from "./quotas.ts";
import { cidrOf, parseAddrField } from "./network_fields.ts";
import { requestedIp4 } from "./dual_stack.ts";
import { resolveNetwork, resolveNetworkRef } from "./network_lookup.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";

export function groupView(g: IpGroupRecord) {
  return {
    name: g.name,
    tenant: g.tenant,
    network: g.network,
    networkTenant: g.networkTenant,
    size: g.addresses.length,
    used: g.addresses.filter((a) => a.port).length,
    addresses: g.addresses.map((a) => (a.port ? { ip: a.ip, port: a.port } : { ip: a.ip })),
    createdAt: g.createdAt,
  };
}

/** An IP group a request names: who asks, the group's tenant and name. */
export interface IpGroupName {
  principal: Principal;
  tenant: string;
  name: string;
}

export async function createIpGroup(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; body: z.infer<typeof IpGroupCreate> },
): Promise<IpGroupRecord> {
  const { principal, tenant, body } = req;
  if ((body.addresses === undefined) === (body.size === undefined)) {
    throw invalid("addresses", "give either addresses or size, not both and not neither");
  }
  let ref = await resolveNetworkRef(ctx, { principal, tenant, network: body.network, fresh: true });
  const net = ref.net;
  if (net.tenant !== tenant && !actsAsOperator(principal)) {
    throw new ApiError(
      "forbidden",
      `Network "${net.name}" belongs to tenant "${net.tenant}"; only an admin may hold its addresses in a group`,
      "network",
    );
  }
  const pool = ctx.pools.addresses(net);
  const group = await pool.exclusive(() =>
    retry(ctx, async (tx, attempt) => {
      if (attempt > 0) {
        // Lost a race: the network may have changed (read it again), gone (404) or been made anew.
        ref = await resolveNetworkRef(ctx, {
          principal,
          tenant,
          network: body.network,
          fresh: true,
        });
        if (ref.net.id !== net.id) {
          throw new ApiError(
            "store_conflict",
            `Network "${net.name}" was deleted and made again while the IP group was being created; try again`,
            "network",
          );
        }
      }
      const t = await getTenantEntry(ctx, tenant);
      const ge = await ctx.store.get(keys.ipGroup(tenant, body.name));
      if (ge.value) {
        throw new ApiError(
          "already_exists",
          `IP group "${body.name}" already exists in tenant "${tenant}"`,
          "name",
        );
      }
      tx.check(ge).check(t).set(t.key, { ...t.value!, ipGroups: t.value!.ipGroups + 1 });
      const edit = await pool.edit(tx);
      // The network must still be the one resolved: a group must not outlive it.
      tx.check({ key: keys.network(net.tenant, net.name), version: ref.version });
      const charges = new QuotaCharges(ctx, tx);
      await charges.charge(tenant, { addresses: body.addresses?.length ?? body.size! });
      const addresses = body.addresses
        ? await takeListed(ctx, tx, edit, ref.net, tenant, body.addresses, [], "addresses")
        : await takeAny(ctx, tx, edit, ref.net, body.size!);
      edit.flush();
      charges.flush();
      const group: IpGroupRecord = {
        name: body.name,
        tenant,
        network: net.name,
        networkTenant: net.tenant,
        networkId: net.id,
        addresses,
        cursor: 0,
        createdAt: now(),
      };
      writeGroup(tx, null, group);
      tx.set(keys.ipGroupOfNetwork(net.id, tenant, body.name), true);
      return group;
    })
  );
  ctx.metrics.allocations.inc({ kind: "ip" }, group.addresses.length);
  return group;
}

async function takeListed(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  net: NetworkRecord,
  tenant: string,
  texts: string[],
  held: IpGroupAddress[],
  field: string,
): Promise<IpGroupAddress[]> {
  const out: IpGroupAddress[] = [];
  const seen = new Set<string>();
  for (const [i, text] of texts.entries()) {
    const f = `${field}[${i}]`;
    const { ip } = requested(net, text, f);
    if (seen.has(ip)) throw invalid(f, `${ip} is listed twice`);
    seen.add(ip);
    out.push(
      held.find((a) => a.ip === ip) ??
        await takeAddress(ctx, tx, { edit, net, tenant, text, field: f }),
    );
  }
  return out;
}

/** An address of the network that a request names, checked in its CIDR, and its canonical text. */
function requested(net: NetworkRecord, text: string, field: string) {
  // On a dual-stack network an address may be listed by its IPv6 pair.
  const value = parseAddrField(field, requestedIp4(net, text, field), cidrOf(net)).value;
  return { ip: formatIp({ family: net.family, value }), value };
}

/**
 * Takes one address a request names from the network's pool: refused when outside the pools,
 * reserved, in quarantine or held (naming the holder).
 */
export async function takeAddress(
  ctx: Ctx,
  tx: Tx,
  ask: { edit: PoolEdit; net: NetworkRecord; tenant: string; text: string; field: string },
): Promise<IpGroupAddress> {
  const { edit, net, tenant, text, field } = ask;
  const { ip, value } = requested(net, text, field);
  const index = ctx.pools.space(net).indexOf(value);
  if (index < 0) {
    throw invalid(field, `${ip} is outside the allocation pools of network "${net.name}"`);
  }
  const reserved = ctx.pools.reservedWhy(net, index);
  if (reserved !== null) {
    throw new ApiError("address_taken", `${ip} of network "${net.name}" is ${reserved}`, field);
  }
  const taken = await takeAsked(ctx, tx, { edit, net, index });
  if (taken !== true) {
    const who = taken
      ? `in quarantine until ${taken.until} (released at ${taken.releasedAt})`
      : await holderOf(ctx, { net, ip, asker: tenant });
    throw new ApiError("address_taken", `${ip} of network "${net.name}" is ${who}`, field);
  }
  return { ip, index };
}

async function takeAny(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  net: NetworkRecord,
  n: number,
): Promise<IpGroupAddress[]> {
  // Expired quarantines are free: as many end as the group may need, bounded by its size.
  await sweepQuarantine(ctx, tx, { edit, net, limit: n, force: true });
  const out: IpGroupAddress[] = [];
  for (let k = 0; k < n; k++) {
    const index = await edit.allocate(ctx.pools.allowed(net));
    if (index === null) {
      throw new ApiError(
        "pool_exhausted",
        `Network "${net.name}" has only ${k} free address(es); the group asks for ${n}`,
        "size",
      );
    }
    out.push({
      ip: formatIp({ family: net.family, value: ctx.pools.space(net).valueAt(index) }),
      index,
    });
  }
  return out;
}

export async function getIpGroup(ctx: Ctx, tenant: string, name: string): Promise<IpGroupRecord> {
  const g = (await readGroup(ctx.store, tenant, name)).value;
  if (!g) {
    return await missingInTenant(ctx, tenant, `IP group "${name}"`);
  }
  return g;
}

export async function listIpGroups(ctx: Ctx, tenant: string): Promise<IpGroupRecord[]> {
  await getTenantEntry(ctx, tenant);
  const stored = await listValues<IpGroupRecord>(ctx.store, keys.ipGroups(tenant));
  return await Promise.all(stored.map((g) => withMembers(ctx.store, g)));
}

/** Grows or shrinks a group; addresses in use never leave it. */
export async function updateIpGroup(
  ctx: Ctx,
  req: IpGroupName & { body: z.infer<typeof IpGroupUpdate> },
): Promise<IpGroupRecord> {
  const { principal, tenant, name, body } = req;
  if ((body.addresses === undefined) === (body.size === undefined)) {
    throw invalid("addresses", "give either addresses or size, not both and not neither");
  }
  const first = await getIpGroup(ctx, tenant, name);
  const net = await resolveNetwork(ctx, {
    principal,
    tenant: first.networkTenant,
    network: first.network,
    fresh: true,
  });
  const pool = ctx.pools.addresses(net);
  return await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const ge = await readGroup(ctx.store, tenant, name);
      if (!ge.value) throw notFound(`IP group "${name}" does not exist in tenant "${tenant}"`);
      const g = ge.value;
      const edit = await pool.edit(tx);
      let next: IpGroupAddress[];
      if (body.addresses) {
        next = await takeListed(
          ctx,
          tx,
          edit,
          net,
          tenant,
          body.addresses,
          g.addresses,
          "addresses",
        );
      } else if (body.size! >= g.addresses.length) {
        const more = await takeAny(ctx, tx, edit, net, body.size! - g.addresses.length);
        next = [...g.addresses, ...more];
      } else {
        const free = g.addresses.filter((a) => !a.port);
        const drop = g.addresses.length - body.size!;
        if (free.length < drop) {
          throw new ApiError(
            "in_use",
            `Cannot shrink IP group "${name}" to ${body.size}: ${
              g.addresses.length - free.length
            } of its addresses are in use`,
            "size",
          );
        }
        const dropped = new Set(free.slice(free.length - drop).map((a) => a.ip));
        next = g.addresses.filter((a) => !dropped.has(a.ip));
      }
      const kept = new Set(next.map((a) => a.ip));
      const removed = g.addresses.filter((a) => !kept.has(a.ip));
      const busy = removed.filter((a) => a.port);
      if (busy.length > 0) {
        throw new ApiError(
          "in_use",
          `Cannot remove ${
            busy.map((a) => `${a.ip} (port "${a.port}")`).join(", ")
          } from IP group "${name}": in use`,
          "addresses",
        );
      }
      await releaseAll(edit, removed);
      edit.flush();
      // Charged once the new size is known; a refusal here aborts the whole commit.
      const charges = new QuotaCharges(ctx, tx);
      await charges.charge(tenant, { addresses: next.length - g.addresses.length });
      charges.flush();
      const updated = { ...g, addresses: next, cursor: 0 };
      tx.check(ge);
      writeGroup(tx, g, updated);
      return updated;
    })
  );
}

async function releaseAll(edit: PoolEdit, addrs: IpGroupAddress[]) {
  for (const a of addrs) await edit.release(a.index);
}

export async function deleteIpGroup(ctx: Ctx, req: IpGroupName): Promise<void> {
  const { principal, tenant, name } = req;
  const first = await getIpGroup(ctx, tenant, name);
  const net = await resolveNetwork(ctx, {
    principal,
    tenant: first.networkTenant,
    network: first.network,
    fresh: true,
  });
  const pool = ctx.pools.addresses(net);
  await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const ge = await readGroup(ctx.store, tenant, name);
      if (!ge.value) throw notFound(`IP group "${name}" does not exist in tenant "${tenant}"`);
      const busy = ge.value.addresses.filter((a) => a.port);
      if (busy.length > 0) {
        throw new ApiError(
          "in_use",
          `Cannot delete IP group "${name}": ${
            busy.map((a) => `${a.ip} (port "${a.port}")`).join(", ")
          } in use`,
        );
      }
      const t = await getTenantEntry(ctx, tenant);
      tx.check(t).set(t.key, { ...t.value!, ipGroups: t.value!.ipGroups - 1 });
      const edit = await pool.edit(tx);
      await releaseAll(edit, ge.value.addresses);
      edit.flush();
      const charges = new QuotaCharges(ctx, tx);
      await charges.charge(tenant, { addresses: -ge.value.addresses.length });
      charges.flush();
      tx.check(ge).delete(ge.key).delete(keys.ipGroupOfNetwork(net.id, tenant, name));
    })
  );
}
