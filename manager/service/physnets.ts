/** Physical networks: the underlay segments that vlan and flat networks ride on. */
import type { z } from "zod";
import { ApiError, invalid, notFound } from "../errors.ts";
import { keys, type PhysnetRecord } from "../model.ts";
import type { PhysnetCreate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";

export interface PhysnetView extends PhysnetRecord {
  usage: { total: number; used: number; free: number };
}

export async function createPhysnet(
  ctx: Ctx,
  body: z.infer<typeof PhysnetCreate>,
): Promise<PhysnetView> {
  const ranges = [...body.vlanRanges].sort((a, b) => a.start - b.start);
  ranges.forEach((r, i) => {
    if (r.start > r.end) invalidRange(i, `start ${r.start} is after end ${r.end}`);
    if (i > 0 && r.start <= ranges[i - 1].end) {
      invalidRange(i, `${r.start}-${r.end} overlaps ${ranges[i - 1].start}-${ranges[i - 1].end}`);
    }
  });
  const record: PhysnetRecord = {
    name: body.name,
    vlanRanges: ranges,
    description: body.description,
    createdAt: now(),
    networks: 0,
  };
  await retry(ctx, async (tx) => {
    const e = await ctx.store.get(keys.physnet(body.name));
    if (e.value) {
      throw new ApiError("already_exists", `Physnet "${body.name}" already exists`, "name");
    }
    tx.check(e).set(e.key, record);
  });
  return await view(ctx, record);
}

function invalidRange(i: number, why: string): never {
  throw invalid(`vlanRanges[${i}]`, why);
}

export async function getPhysnetEntry(ctx: Ctx, name: string): Promise<Entry<PhysnetRecord>> {
  const e = await ctx.store.get<PhysnetRecord>(keys.physnet(name));
  if (!e.value) throw notFound(`Physnet "${name}" does not exist`);
  return e;
}

export async function getPhysnet(ctx: Ctx, name: string): Promise<PhysnetView> {
  return await view(ctx, (await getPhysnetEntry(ctx, name)).value!);
}

export async function listPhysnets(ctx: Ctx): Promise<PhysnetView[]> {
  const all = await listValues<PhysnetRecord>(ctx.store, keys.physnets());
  return await Promise.all(all.map((p) => view(ctx, p)));
}

export async function deletePhysnet(ctx: Ctx, name: string): Promise<void> {
  const pool = ctx.pools.vlan(name);
  await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const e = await getPhysnetEntry(ctx, name);
      if (e.value!.networks > 0) {
        throw new ApiError(
          "in_use",
          `Cannot delete physnet "${name}": ${
            e.value!.networks
          } network(s) use it; delete them first`,
        );
      }
      tx.check(e).delete(e.key);
      (await pool.edit(tx)).destroy();
    })
  );
  ctx.pools.forget(keys.vlanPool(name));
}

/** VLAN ID index ranges [start, end) of a physnet, for allocation. */
export function vlanIndexRanges(p: PhysnetRecord): [number, number][] {
  return p.vlanRanges.map((r) => [r.start, r.end + 1]);
}

async function view(ctx: Ctx, p: PhysnetRecord): Promise<PhysnetView> {
  // Only IDs inside the ranges count: an explicitly given ID outside them is not from the pool.
  const pool = ctx.pools.vlan(p.name);
  let total = 0;
  let used = 0;
  for (const [start, end] of vlanIndexRanges(p)) {
    total += end - start;
    used += await pool.count(start, end);
  }
  return { ...p, usage: { total, used, free: total - used } };
}
