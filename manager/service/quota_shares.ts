/**
 * A counted tenant's use, kept in shares (issue 32): one per lane (a network's ID for its ports,
 * "" for everything else), each holding what its lane uses and the room it may take of each
 * limited kind, its allowance. The allowances of all shares sum to the limit at most, and a commit
 * that charges a lane checks and writes only that lane's share while the share has room: commits
 * of different networks write no common quota key, so they never serialise on the quota.
 *
 * A share without room rebalances: the commit reads the quota record and every share afresh,
 * refuses when the tenant's whole use would pass the limit (so the refusal is exact, decided on the
 * store's records), and otherwise takes room from the shares with the most to spare (half of each
 * one's, or what it still needs; all of a share that uses nothing, which goes), at most
 * {@link MAX_SOURCES} of them, each rewritten with a check.
 * Room spread thinner than that is first collected into the "" share by commits of its own. New
 * limits and a finished count give the room to the "" share; a share made by a release (use below
 * zero, no allowance) keeps the sum within the limit.
 */
import { keys } from "../model.ts";
import type { Entry, Store } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { type Limits, QUOTA_KINDS, type QuotaKind, type QuotaUsage, ZERO } from "./quota_kinds.ts";

export interface QuotaShare {
  /** The use of kinds with a limit this share may reach (absent: none). */
  allowance: Limits;
  used: QuotaUsage;
}

/** The tenant's shares as the store holds them, with their versions. */
export async function readShares(store: Store, tenant: string): Promise<Entry<QuotaShare>[]> {
  const out: Entry<QuotaShare>[] = [];
  for await (const e of store.list<QuotaShare>(keys.quotaShares(tenant))) out.push(e);
  return out;
}

/** What the shares use together. */
export function sumUsed(shares: readonly (QuotaShare | null)[]): QuotaUsage {
  const used = { ...ZERO };
  for (const s of shares) for (const k of QUOTA_KINDS) used[k] += s?.used[k] ?? 0;
  return used;
}

/** Most shares a rebalance takes room from: its checks fit in a batch's commit (ports/batch.ts). */
export const MAX_SOURCES = 8;

/** Shares one collecting commit empties of their spare room. */
const COLLECT_BATCH = 90;

/** What a share may still take of kind `k` (none beyond its allowance, also when past it). */
function spare(s: QuotaShare | null, k: QuotaKind): number {
  return Math.max(0, (s?.allowance[k] ?? 0) - (s?.used[k] ?? 0));
}

/**
 * The allowances that give all of the room left to the first of `used` (the "" share's, after a
 * count or new limits) and none to the others. Past the limit (an admin lowered it) none has room.
 */
export function roomToFirst(limits: Limits, used: QuotaUsage[]): Limits[] {
  const out: Limits[] = used.map(() => ({}));
  for (const k of QUOTA_KINDS) {
    const limit = limits[k];
    if (limit === undefined) continue;
    const room = Math.max(0, limit - used.reduce((sum, u) => sum + u[k], 0));
    used.forEach((u, i) => out[i][k] = u[k] + (i === 0 ? room : 0));
  }
  return out;
}

/** A source share of a rebalance and its allowance once room is taken from it. */
export interface Taken {
  entry: Entry<QuotaShare>;
  allowance: Limits;
  /** It used nothing (a network deleted, or all its ports gone): deleted, all its room taken. */
  drop: boolean;
}

/** A lane's share that uses nothing: its key goes when room is taken from it. */
function idle(e: Entry<QuotaShare>): boolean {
  return e.key.at(-1) !== "" && QUOTA_KINDS.every((k) => (e.value?.used[k] ?? 0) === 0);
}

/**
 * Takes `need` (per limited kind) from `sources`, the ones with the most to spare first: half of
 * each one's spare, or what is still needed when more, from at most MAX_SOURCES. Answers the
 * sources taken from and what was taken; null when they did not have enough.
 */
export function gather(
  limits: Limits,
  sources: Entry<QuotaShare>[],
  need: Partial<QuotaUsage>,
): { from: Taken[]; taken: Partial<QuotaUsage> } | null {
  const kinds = QUOTA_KINDS.filter((k) => limits[k] !== undefined && (need[k] ?? 0) > 0);
  const left: Partial<QuotaUsage> = { ...need };
  const taken: Partial<QuotaUsage> = {};
  const richest = [...sources].sort((a, b) =>
    kinds.reduce((d, k) => d + spare(b.value, k) - spare(a.value, k), 0)
  );
  const from: Taken[] = [];
  for (const entry of richest) {
    if (from.length === MAX_SOURCES || kinds.every((k) => (left[k] ?? 0) <= 0)) break;
    const allowance = { ...entry.value!.allowance };
    const drop = idle(entry);
    let took = false;
    for (const k of kinds) {
      const has = spare(entry.value, k);
      const take = drop ? has : Math.min(has, Math.max(Math.ceil(has / 2), left[k] ?? 0));
      if (take <= 0) continue;
      allowance[k] = allowance[k]! - take;
      taken[k] = (taken[k] ?? 0) + take;
      left[k] = (left[k] ?? 0) - take;
      took = true;
    }
    if (took) from.push({ entry, allowance, drop });
  }
  return kinds.every((k) => (left[k] ?? 0) <= 0) ? { from, taken } : null;
}

/**
 * Moves the spare room of the tenant's lanes into its "" share, in commits of COLLECT_BATCH shares
 * (each whole on its own), so that a rebalance finds it in one place; shares that use nothing go.
 */
export async function collectSpare(store: Store, tenant: string, limits: Limits): Promise<void> {
  for (let attempt = 0; attempt < 16; attempt++) {
    const shares = await readShares(store, tenant);
    const common = shares.find((e) => e.key.at(-1) === "") ??
      { key: keys.quotaShare(tenant, ""), value: null, version: null };
    const kinds = QUOTA_KINDS.filter((k) => limits[k] !== undefined);
    const rich = shares.filter((e) => e.key.at(-1) !== "" && kinds.some((k) => spare(e.value, k)))
      .slice(0, COLLECT_BATCH);
    if (rich.length === 0) return;
    const tx = new Tx().check(common);
    const into: QuotaShare = common.value
      ? { ...common.value, allowance: { ...common.value.allowance } }
      : { allowance: {}, used: { ...ZERO } };
    for (const e of rich) {
      const allowance = { ...e.value!.allowance };
      for (const k of kinds) {
        const has = spare(e.value, k);
        allowance[k] = (allowance[k] ?? 0) - has;
        into.allowance[k] = (into.allowance[k] ?? 0) + has;
      }
      tx.check(e);
      if (idle(e)) tx.delete(e.key);
      else tx.set(e.key, { ...e.value!, allowance });
    }
    tx.set(common.key, into);
    if (await tx.commit(store) && rich.length < COLLECT_BATCH) return;
  }
}

/** The first kind `delta` would take beyond the share's allowance, its `pending` charges included. */
export function beyondAllowance(
  limits: Limits,
  share: { room: QuotaShare | null; pending: QuotaUsage },
  delta: Partial<QuotaUsage>,
): QuotaKind | undefined {
  const { room, pending } = share;
  return QUOTA_KINDS.find((k) => {
    const d = delta[k] ?? 0;
    if (d <= 0 || limits[k] === undefined) return false;
    return (room?.used[k] ?? 0) + pending[k] + d > (room?.allowance[k] ?? 0);
  });
}
