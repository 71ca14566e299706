/**
 * The quarantine of released addresses and MACs: a port's address (and the MAC derived from it, or
 * its fixed MAC) is not handed out again until `settings.quarantineMs` after its release, so that
 * every node has removed its flows before another port may claim it, even when a DEL was lost on
 * the way (manager/README.md, "Quarantine").
 *
 * A quarantined address keeps its bit set in the network's pool and has a record under
 * `keys.quarantine(network, until, index)`, listed in the order the quarantines end. An allocation
 * ends at most {@link SWEEP_PER_COMMIT} expired ones in its own commit (their records go, their bits
 * clear): however many end at once, a commit stays small, and the next allocations end the rest.
 * A quarantined fixed MAC has a record under `keys.macQuarantine(network, mac, until)`, which
 * ends with its address's record, in the same commit.
 *
 * @module
 */

import { ApiError } from "../errors.ts";
import type { PoolEdit } from "../ipam/bitmap_pool.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { Entry, Store } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx } from "./context.ts";
import { macFor } from "../ipam/derived_mac.ts";
import { countIn, heldAt, readCount } from "./quarantine_count.ts";

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
export async function quarantine(
  ctx: Ctx,
  tx: Tx,
  released: {
    net: NetworkRecord;
    /** A port, or a claim (service/claims.ts) named as its holder. */
    port: Pick<PortRecord, "id" | "ip" | "mac" | "index">;
    fixedMac: boolean;
  },
): Promise<void> {
  const { net, port, fixedMac } = released;
  const at = clockMs(ctx);
  const releasedAt = new Date(at).toISOString();
  const until = new Date(at + ctx.settings.quarantineMs).toISOString();
  const record: QuarantineRecord = { ip: port.ip, mac: port.mac, port: port.id, releasedAt, until };
  const untilMs = at + ctx.settings.quarantineMs;
  tx.set(keys.quarantine(net.id, untilMs, port.index), record);
  const memo = sweepMemo(ctx, net);
  memo.quietUntil = Math.min(memo.quietUntil, untilMs);
  (await countIn(ctx.store, tx, net.id)).change(untilMs, 1, at);
  if (fixedMac) {
    const mac: MacQuarantineRecord = { port: port.id, until };
    tx.set(keys.macQuarantine(net.id, port.mac, untilMs), mac);
  }
}

/**
 * Expired quarantines one allocation commit ends at most: a record to delete and a chunk to write
 * each, and no version check (see sweepQuarantine), next to a batch's ports.
 */
export const SWEEP_PER_COMMIT = 32;

const swept = new WeakSet<Tx>();

/**
 * How long a sweep that found no quarantine due is trusted: quarantines that other replicas write
 * are seen by the sweeps of this one within it. Quarantines last whole seconds (at least this), so
 * none ends unseen; an address is handed out again at most this much after its quarantine ended.
 */
export const SWEEP_TRUST_MS = 1000;

/** What this process knows of a network's quarantines: none ends before `quietUntil` (clockMs). */
interface SweepMemo {
  quietUntil: number;
}

function sweepMemo(ctx: Ctx, net: NetworkRecord): SweepMemo {
  return ctx.pools.perNetwork(net, "quarantine-sweep", () => ({ quietUntil: 0 }));
}

/** When an address's quarantine ends, as a record's key says. */
function untilOf(e: Entry<QuarantineRecord>): number {
  return e.key.length === 4 ? e.key[2] as number : Date.parse(e.value?.until ?? "");
}

function indexOf(e: Entry<QuarantineRecord>): number {
  return e.key.at(-1) as number;
}

/**
 * Ends up to `limit` expired quarantines of the network in this commit: deletes their records and
 * clears their bits through `edit`, which the caller flushes. Once per commit (a batch allocates
 * several ports in one). No check per record: ending one clears a bit, so the commit writes the
 * pool head, whose version check makes two ends of one record exclusive; and no one else writes
 * the record of an address whose bit is set. Records of the old shape (by index) come first, in
 * any order; then the current ones, in the order they end, up to the first that still holds.
 */
export async function sweepQuarantine(
  ctx: Ctx,
  tx: Tx,
  pool: { edit: PoolEdit; net: NetworkRecord; limit?: number; force?: boolean },
): Promise<void> {
  const { edit, net, limit = SWEEP_PER_COMMIT } = pool;
  if (swept.has(tx) || limit <= 0) return;
  swept.add(tx);
  const now = clockMs(ctx);
  // Most allocations find nothing due: they skip the two listings while this process knows so.
  const memo = sweepMemo(ctx, net);
  if (!pool.force && now < memo.quietUntil) return;
  let left = limit;
  let quietUntil = now + SWEEP_TRUST_MS;
  for (const prefix of [keys.legacyQuarantines(net.id), keys.quarantines(net.id)]) {
    for await (const e of ctx.store.list<QuarantineRecord>(prefix, { limit: left })) {
      // Old-shape records come in any order: while there are any, every allocation looks.
      if (e.key.length !== 4) quietUntil = now;
      if (untilOf(e) > now) {
        if (e.key.length !== 4) continue;
        quietUntil = Math.min(quietUntil, untilOf(e));
        break;
      }
      await end(ctx, tx, edit, net, e);
      left--;
    }
    if (left === 0) break;
  }
  // More may be due than one commit ends; and ends that do not commit are still due.
  memo.quietUntil = left === 0 ? now : quietUntil;
  tx.onAbort(() => memo.quietUntil = now);
}

/**
 * Ends an address's quarantine: its record goes, its bit clears, and the quarantine of the fixed
 * MAC released with it (a record of the same end, when the port had one) goes too.
 */
async function end(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  net: NetworkRecord,
  e: Entry<QuarantineRecord>,
): Promise<void> {
  tx.delete(e.key);
  (await countIn(ctx.store, tx, net.id)).change(untilOf(e), -1, clockMs(ctx));
  const mac = e.value?.mac;
  if (mac !== undefined && mac !== macFor(net.id, indexOf(e))) {
    tx.delete(keys.macQuarantine(net.id, mac, untilOf(e)));
  }
  await edit.release(indexOf(e));
}

/** The quarantine record of an address, if it has one (both shapes). */
async function quarantineAt(
  ctx: Ctx,
  net: NetworkRecord,
  index: number,
): Promise<Entry<QuarantineRecord> | null> {
  const legacy = await ctx.store.get<QuarantineRecord>(keys.legacyQuarantine(net.id, index));
  if (legacy.value) return legacy;
  for await (const e of ctx.store.list<QuarantineRecord>(keys.quarantines(net.id))) {
    if (indexOf(e) === index) return e;
  }
  return null;
}

/**
 * Takes an address asked for by index: true when taken (its quarantine, if expired, ends in this
 * commit), the record when its quarantine still holds, null when something else holds it.
 */
export async function takeAsked(
  ctx: Ctx,
  tx: Tx,
  asked: { edit: PoolEdit; net: NetworkRecord; index: number },
): Promise<true | QuarantineRecord | null> {
  const { edit, net, index } = asked;
  if (await edit.take(index)) return true;
  const q = await quarantineAt(ctx, net, index);
  if (!q?.value) return null;
  if (untilOf(q) > clockMs(ctx)) return q.value;
  await end(ctx, tx, edit, net, q);
  return (await edit.take(index)) ? true : null;
}

/**
 * How many addresses of the network are in quarantine now, and the first end, for the message of
 * an exhausted pool. Then the allocation's sweep ended none, so none has ended: with a count, its
 * records are all held and the first listed is the first to end (a counted network has no records
 * of the old shape: `check --repair` moves them before it counts).
 */
export async function heldQuarantine(
  ctx: Ctx,
  net: NetworkRecord,
): Promise<{ count: number; first: string }> {
  const count = await readCount(ctx.store, net.id);
  if (count) {
    let first = "";
    for await (
      const e of ctx.store.list<QuarantineRecord>(keys.quarantines(net.id), { limit: 1 })
    ) {
      first = new Date(untilOf(e)).toISOString();
    }
    return { count: count.records, first };
  }
  return await heldListed(ctx, net);
}

/**
 * The refusal of an allocation from a full pool (`what`: "Cannot allocate an address from network
 * ..."), saying how many of its addresses wait out a quarantine, and counted.
 */
export async function poolExhausted(
  ctx: Ctx,
  net: NetworkRecord,
  what: string,
): Promise<ApiError> {
  ctx.metrics.allocationFailures.inc({ reason: "exhausted" });
  const total = net.poolSize - net.reserved;
  const held = await heldQuarantine(ctx, net);
  const inQuarantine = held.count === 0
    ? ""
    : `; ${held.count} of them released and in quarantine, the first until ${held.first}`;
  return new ApiError(
    "pool_exhausted",
    `${what}: its pools are exhausted (${total} of ${total} in use${inQuarantine})`,
  );
}

/** The same, for a network without a count: from every record. */
async function heldListed(
  ctx: Ctx,
  net: NetworkRecord,
): Promise<{ count: number; first: string }> {
  const now = clockMs(ctx);
  let count = 0;
  let first = Infinity;
  for (const prefix of [keys.legacyQuarantines(net.id), keys.quarantines(net.id)]) {
    for await (const e of ctx.store.list<QuarantineRecord>(prefix)) {
      const until = untilOf(e);
      if (until <= now) continue;
      count++;
      first = Math.min(first, until);
    }
  }
  return { count, first: count === 0 ? "" : new Date(first).toISOString() };
}

/**
 * A fixed MAC's quarantine: a record that still holds, if any; expired ones are deleted in this
 * commit (two claims of the MAC exclude each other by its MAC key, service/port_allocation.ts).
 */
export async function macInQuarantine(
  ctx: Ctx,
  tx: Tx,
  asked: { net: NetworkRecord; mac: string },
): Promise<MacQuarantineRecord | null> {
  const { net, mac } = asked;
  const now = new Date(clockMs(ctx)).toISOString();
  const records: Entry<MacQuarantineRecord>[] = [
    await ctx.store.get(keys.macQuarantinesOf(net.id, mac)),
  ];
  for await (const e of ctx.store.list<MacQuarantineRecord>(keys.macQuarantinesOf(net.id, mac))) {
    records.push(e);
  }
  const held = records.find((e) => e.value && e.value.until > now);
  if (held) return held.value;
  for (const e of records) if (e.value) tx.delete(e.key);
  return null;
}

/**
 * The network's quarantine records (their bits are set), and how many of them still hold at `now`
 * (ms): the others are as good as free, the next allocations end them. From the network's count
 * (service/quarantine_count.ts) when it has one, else from the records.
 */
export async function countQuarantine(
  store: Store,
  net: NetworkRecord,
  now = 0,
): Promise<{ records: number; held: number }> {
  const count = await readCount(store, net.id);
  if (count) return { records: count.records, held: heldAt(count, now) };
  return await listQuarantine(store, net.id, now);
}

/** The same, from the records: one read per record. */
export async function listQuarantine(
  store: Store,
  networkId: string,
  now: number,
): Promise<{ records: number; held: number; ends: number[] }> {
  let records = 0;
  let held = 0;
  const ends: number[] = [];
  for (const prefix of [keys.legacyQuarantines(networkId), keys.quarantines(networkId)]) {
    for await (const e of store.list<QuarantineRecord>(prefix)) {
      records++;
      const until = untilOf(e);
      ends.push(until);
      if (until > now) held++;
    }
  }
  return { records, held, ends };
}
