/**
 * The quarantine of released addresses and MACs: a port's address (and the MAC derived from it, or
 * its fixed MAC) is not handed out again until `settings.quarantineMs` after its release, so that
 * every node has removed its flows before another port may claim it, even when a DEL was lost on
 * the way (manager/README.md, "Quarantine").
 *
 * A quarantined address keeps its bit set in the network's pool and has a record under
 * `keys.quarantine(network, index)`; the first allocation in the network after it expires clears
 * both, in its own commit. A quarantined fixed MAC has a record under `keys.macQuarantine`.
 *
 * @module
 */

import type { PoolEdit } from "../ipam/bitmap_pool.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx } from "./context.ts";

/** An address in quarantine. */
export interface QuarantineRecord {
  ip: string;
  mac: string;
  /** The port that held it, and when it was released. */
  port: string;
  releasedAt: string;
  /** ISO time from which the address may be handed out again. */
  until: string;
}

/** A fixed MAC in quarantine. */
export interface MacQuarantineRecord {
  port: string;
  until: string;
}

/** Whether a release quarantines (the setting is not 0). */
export function quarantining(ctx: Ctx): boolean {
  return ctx.settings.quarantineMs > 0;
}

/**
 * Puts the released port's address (its bit stays set) and its fixed MAC, if any, in quarantine,
 * in the release's commit.
 */
export function quarantine(
  ctx: Ctx,
  tx: Tx,
  net: NetworkRecord,
  port: PortRecord,
  fixedMac: boolean,
) {
  const at = clockMs(ctx);
  const releasedAt = new Date(at).toISOString();
  const until = new Date(at + ctx.settings.quarantineMs).toISOString();
  const record: QuarantineRecord = { ip: port.ip, mac: port.mac, port: port.id, releasedAt, until };
  tx.set(keys.quarantine(net.id, port.index), record);
  if (fixedMac) {
    tx.set(keys.macQuarantine(net.id, port.mac), { port: port.id, until } as MacQuarantineRecord);
  }
}

const swept = new WeakMap<Tx, Map<number, QuarantineRecord>>();

/**
 * Ends the expired quarantines of the network in this commit (their bits are cleared through
 * `edit`, which the caller flushes) and returns those that still hold, by index.
 */
export async function sweepQuarantine(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  net: NetworkRecord,
): Promise<Map<number, QuarantineRecord>> {
  // Once per commit: a batch allocates several ports in one, and a bit cleared here may be taken
  // again by an earlier port of the same commit.
  const done = swept.get(tx);
  if (done) return done;
  const held = new Map<number, QuarantineRecord>();
  swept.set(tx, held);
  const time = new Date(clockMs(ctx)).toISOString();
  for await (const e of ctx.store.list<QuarantineRecord>(keys.quarantines(net.id))) {
    if (!e.value) continue;
    const index = e.key.at(-1) as number;
    if (e.value.until > time) {
      held.set(index, e.value);
      continue;
    }
    tx.check(e).delete(e.key);
    await edit.release(index);
  }
  return held;
}

/** The earliest end of the quarantines, for messages. */
export function earliest(held: Map<number, QuarantineRecord>): string {
  let first = "";
  for (const r of held.values()) if (first === "" || r.until < first) first = r.until;
  return first;
}

/**
 * A fixed MAC's quarantine: the record when it still holds; an expired one is deleted in this
 * commit (and checked, so that two claims of it cannot both pass).
 */
export async function macInQuarantine(
  ctx: Ctx,
  tx: Tx,
  net: NetworkRecord,
  mac: string,
): Promise<MacQuarantineRecord | null> {
  const e: Entry<MacQuarantineRecord> = await ctx.store.get(keys.macQuarantine(net.id, mac));
  if (!e.value) return null;
  if (e.value.until > new Date(clockMs(ctx)).toISOString()) return e.value;
  tx.check(e).delete(e.key);
  return null;
}

/** Deletes every quarantine record of a network being deleted; returns how many addresses. */
export async function dropQuarantine(ctx: Ctx, tx: Tx, net: NetworkRecord): Promise<number> {
  let n = 0;
  for await (const e of ctx.store.list(keys.quarantines(net.id))) {
    tx.delete(e.key);
    n++;
  }
  for await (const e of ctx.store.list(keys.macQuarantines(net.id))) tx.delete(e.key);
  return n;
}

/** How many addresses of the network are in quarantine (expired or not: their bits are set). */
export async function countQuarantine(ctx: Ctx, net: NetworkRecord): Promise<number> {
  let n = 0;
  for await (const _ of ctx.store.list(keys.quarantines(net.id))) n++;
  return n;
}
