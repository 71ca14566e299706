/**
 * Floating pools: an admin's external ranges, IPv4 or IPv6 (addresses the fabric routes to the
 * nodes, or a flat external network's), from which tenants take floating addresses
 * (floating_ips.ts). A pool is of one family; pools never overlap one another, so an address has
 * one pool; one is deleted only when no tenant holds an address of it.
 *
 * @module
 */
import type { z } from "zod";
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
import { type FloatingIpRecord, type FloatingPoolRecord, keys } from "../model.ts";
import type { FloatingPoolCreate } from "../schemas.ts";
import { Tx } from "../store/tx.ts";
import { clockMs, type Ctx, listValues, now } from "./context.ts";

/** The widest pool CIDR per family (as many addresses each): allocation walks a pool's addresses. */
export const WIDEST_POOL_PREFIX = { 4: 16, 6: 112 } as const;

export async function createFloatingPool(
  ctx: Ctx,
  body: z.infer<typeof FloatingPoolCreate>,
): Promise<FloatingPoolRecord> {
  const cidrs = body.cidrs.map(poolCidr);
  if (cidrs.some((c) => c.family !== cidrs[0].family)) {
    throw invalid("cidrs", "mixes IPv4 and IPv6: a pool is of one family; make one pool of each");
  }
  const others = await listValues<FloatingPoolRecord>(ctx.store, keys.floatingPools());
  for (const other of others) {
    const clash = cidrs.find((c) => other.cidrs.some((o) => cidrsOverlap(c, parseCidr(o) as Cidr)));
    if (clash === undefined) continue;
    throw new ApiError(
      "conflict",
      `cidrs: ${formatCidr(clash)} overlaps floating pool "${other.name}": an address has one ` +
        `pool; choose another range, or add it to that pool's`,
      "cidrs",
    );
  }
  const record: FloatingPoolRecord = {
    name: body.name,
    cidrs: cidrs.map(formatCidr),
    createdAt: now(),
  };
  if (body.description !== undefined) record.description = body.description;
  const key = keys.floatingPool(body.name);
  if (!await new Tx().checkAbsent(key).set(key, record).commit(ctx.store)) {
    throw new ApiError("already_exists", `Floating pool "${body.name}" exists`, "name");
  }
  return record;
}

/** A CIDR no wider than its family's widest (a /16, a /112), given as its network address. */
function poolCidr(text: string): Cidr {
  const c = parseCidr(text);
  if ("error" in c) throw invalid("cidrs", c.error);
  const widest = WIDEST_POOL_PREFIX[c.family];
  if (c.prefix < widest) {
    throw invalid("cidrs", `"${text}" is wider than a /${widest}; split it into /${widest}s`);
  }
  return c;
}

/**
 * Whether a tenant may get `value` of the CIDR: in it, and not an address that is no one's (IPv4:
 * a network or broadcast address, kept off in a /30 or wider; IPv6: the subnet-router anycast
 * address, kept off in a /126 or wider).
 */
export function usableIn(c: Cidr, value: bigint): boolean {
  if (!cidrContains(c, { family: c.family, value })) return false;
  if (c.prefix >= RESERVED_FROM[c.family]) return true;
  return value !== c.base && (c.family === 6 || value !== c.base + c.size - 1n);
}

/**
 * An address of a path as the store keeps it (an IPv6 one has many spellings: `2001:DB8::0:1` is
 * `2001:db8::1`); anything else as it is (not found).
 */
export function storedAddress(text: string): string {
  const ip = parseIp(text);
  return ip ? formatIp(ip) : text;
}

/** The prefix length from which a CIDR keeps no address off (see usableIn). */
const RESERVED_FROM = { 4: 31, 6: 127 } as const;

export function listFloatingPools(ctx: Ctx): Promise<FloatingPoolRecord[]> {
  return listValues<FloatingPoolRecord>(ctx.store, keys.floatingPools());
}

/** How a pool's addresses are used: held by tenants, in quarantine, free. */
export interface FloatingPoolUsage {
  total: number;
  held: number;
  quarantined: number;
  free: number;
}

/**
 * The pools with their usage (the admin's view: it counts every tenant's addresses). Total: the
 * addresses a tenant may get (floating_ips.ts, not a CIDR's network or broadcast address).
 */
export async function listFloatingPoolsWithUsage(
  ctx: Ctx,
): Promise<(FloatingPoolRecord & { usage: FloatingPoolUsage })[]> {
  const counts = new Map<string, { held: number; quarantined: number }>();
  const at = clockMs(ctx);
  for (const r of await listValues<FloatingIpRecord>(ctx.store, keys.floatingIps())) {
    const c = counts.get(r.pool) ?? { held: 0, quarantined: 0 };
    if (r.tenant !== undefined) c.held++;
    else if (Date.parse(r.quarantineUntil!) > at) c.quarantined++;
    counts.set(r.pool, c);
  }
  return (await listFloatingPools(ctx)).map((p) => {
    const total = p.cidrs.reduce((n, c) => n + usableCount(parseCidr(c) as Cidr), 0);
    const { held, quarantined } = counts.get(p.name) ?? { held: 0, quarantined: 0 };
    return { ...p, usage: { total, held, quarantined, free: total - held - quarantined } };
  });
}

/** The addresses of a CIDR a tenant may get (usableIn): all, or less the one or two kept off. */
function usableCount(c: Cidr): number {
  if (c.prefix >= RESERVED_FROM[c.family]) return Number(c.size);
  return Number(c.size - (c.family === 4 ? 2n : 1n));
}

export async function getFloatingPool(ctx: Ctx, name: string): Promise<FloatingPoolRecord> {
  const e = await ctx.store.get<FloatingPoolRecord>(keys.floatingPool(name));
  if (!e.value) throw notFound(`Floating pool "${name}" not found`);
  return e.value;
}

/** Deletes a pool whose addresses no tenant holds (its quarantined ones go with it). */
export async function deleteFloatingPool(ctx: Ctx, name: string): Promise<void> {
  const e = await ctx.store.get<FloatingPoolRecord>(keys.floatingPool(name));
  if (!e.value) throw notFound(`Floating pool "${name}" not found`);
  const tx = new Tx().check(e).delete(e.key);
  for await (const f of ctx.store.list<FloatingIpRecord>(keys.floatingIps())) {
    if (f.value!.pool !== name) continue;
    if (f.value!.tenant !== undefined) {
      throw new ApiError(
        "in_use",
        `Floating pool "${name}" has addresses held by tenants (${f.value!.address} first): ` +
          `they release them first (DELETE .../floating-ips/{address})`,
      );
    }
    tx.check(f).delete(f.key);
  }
  if (!await tx.commit(ctx.store)) {
    throw new ApiError("store_conflict", `Floating pool "${name}" changed meanwhile; try again`);
  }
}
