/**
 * How many quarantine records a network has, and when they end, in one record beside them
 * (`keys.quarantineCount(network)`), changed in the commits that add and end them: a network's
 * usage and the metrics read this record, not the records (issue 33), so they cost one read
 * whatever the network holds.
 *
 * `records` is exact: the addresses whose bit a quarantine holds, ended or not (used = set bits -
 * records). The ends are counted in buckets of `bucketMs` (a second, or 1/64 of the quarantine when
 * longer), each named by its end: a record counts as held while its bucket has not ended, so an
 * address counts as in quarantine for up to one bucket after its quarantine ended (its allocation
 * is not: that reads the records). Buckets over when the record is written are dropped, so it holds
 * at most about 64 of them ({@link MAX_BUCKETS}: beyond, they merge two by two).
 *
 * A network of an older manager has no count: its usage reads the records, as before, and `check
 * --repair` counts them. While it counts, the record is `{counting}`, which every commit that would
 * change the count bumps instead, so that the repair's count commits only if none came in between.
 *
 * @module
 */
import { keys } from "../model.ts";
import type { Entry, Mutation, Store } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";

/** A network's quarantine count. */
export interface QuarantineCount {
  /** Quarantine records of the network, held or ended, not yet deleted. */
  records: number;
  /** [end of a bucket (ms), records whose quarantine ends in it], oldest first. */
  ends: [number, number][];
  bucketMs: number;
}

/** Being counted by `check --repair`: bumped by every commit that would change the count. */
export interface Counting {
  counting: number;
}

type Stored = QuarantineCount | Counting;

/** Buckets a count keeps at most before merging them two by two. */
export const MAX_BUCKETS = 128;

/** The count a new network starts with. */
export function emptyCount(quarantineMs: number): QuarantineCount {
  return { records: 0, ends: [], bucketMs: Math.max(1000, Math.ceil(quarantineMs / 64)) };
}

/** The network's count; null when it has none (an older manager's network) or is being counted. */
export async function readCount(store: Store, networkId: string): Promise<QuarantineCount | null> {
  const v = (await store.get<Stored>(keys.quarantineCount(networkId))).value;
  return v && "records" in v ? v : null;
}

/** How many of the count's records are held at `now` (ms). */
export function heldAt(count: QuarantineCount, now: number): number {
  return count.ends.reduce((n, [end, k]) => n + (end > now ? k : 0), 0);
}

/** The bucket of a quarantine that ends at `untilMs`. */
function bucketOf(count: QuarantineCount, untilMs: number): number {
  return Math.ceil(untilMs / count.bucketMs) * count.bucketMs;
}

/**
 * Adds (delta 1) or ends (-1) a quarantine that ends at `untilMs` in the count, at `now` (ms).
 * Buckets over at `now` go; beyond MAX_BUCKETS, neighbours merge (a bucket twice as long).
 */
function counted(
  count: QuarantineCount,
  untilMs: number,
  delta: 1 | -1,
  now: number,
): QuarantineCount {
  let c: QuarantineCount = { ...count, records: count.records + delta };
  const ends = new Map(c.ends.filter(([end]) => end > now));
  const b = bucketOf(c, untilMs);
  if (b > now && (delta > 0 || ends.has(b))) ends.set(b, (ends.get(b) ?? 0) + delta);
  c.ends = [...ends].filter(([, k]) => k > 0).sort((x, y) => x[0] - y[0]);
  while (c.ends.length > MAX_BUCKETS) c = merged(c);
  return c;
}

/** The count in buckets twice as long. */
function merged(count: QuarantineCount): QuarantineCount {
  const c = { ...count, bucketMs: count.bucketMs * 2 };
  const ends = new Map<number, number>();
  for (const [end, k] of count.ends) {
    const b = bucketOf(c, end);
    ends.set(b, (ends.get(b) ?? 0) + k);
  }
  return { ...c, ends: [...ends].sort((x, y) => x[0] - y[0]) };
}

/** The count of a network as a commit being built changes it: read once, checked, written once. */
class CountEdit {
  private mutation: Mutation | null = null;
  constructor(private readonly tx: Tx, private entry: Entry<Stored>) {}

  change(untilMs: number, delta: 1 | -1, now: number): void {
    const v = this.entry.value;
    if (v === null) return; // not counted: an older manager's network
    const next: Stored = "records" in v
      ? counted(v, untilMs, delta, now)
      : { counting: v.counting + (this.mutation ? 0 : 1) };
    this.entry = { ...this.entry, value: next };
    if (this.mutation?.type === "set") this.mutation.value = next;
    else {
      this.tx.set(this.entry.key, next);
      this.mutation = this.tx.mutations.at(-1)!;
    }
  }
}

const edits = new WeakMap<Tx, Map<string, Promise<CountEdit>>>();

/**
 * The network's count in `tx`: the first use reads it and checks it (absent too: a repair that
 * starts counting meanwhile makes the commit retry and bump its mark).
 */
export function countIn(store: Store, tx: Tx, networkId: string): Promise<CountEdit> {
  const byNet = edits.get(tx) ?? new Map<string, Promise<CountEdit>>();
  edits.set(tx, byNet);
  let edit = byNet.get(networkId);
  if (!edit) {
    edit = store.get<Stored>(keys.quarantineCount(networkId)).then((e) => {
      tx.check(e);
      return new CountEdit(tx, e);
    });
    byNet.set(networkId, edit);
  }
  return edit;
}

export type { CountEdit };

/** The count of quarantine records that end at `ends` (ms), as of `now`. */
function countOf(ends: number[], bucketMs: number, now: number): QuarantineCount {
  let c: QuarantineCount = { records: 0, ends: [], bucketMs };
  for (const until of ends) c = counted(c, until, 1, now);
  return c;
}

/** What is wrong with a network's count, as `check` says it; null when it matches its records. */
export async function countProblem(
  store: Store,
  networkId: string,
  listed: { records: number; ends: number[]; now: number },
): Promise<string | null> {
  const { now, ...records } = listed;
  const v = (await store.get<Stored>(keys.quarantineCount(networkId))).value;
  const again = "`check --repair` counts them again";
  if (v === null) {
    return "has no quarantine count (a network of an older manager: its usage reads every " +
      `quarantine record); ${again}`;
  }
  if (!("records" in v)) {
    return `its quarantine count is being counted, or was not finished; ${again}`;
  }
  if (v.records !== records.records) {
    return `its quarantine count says ${v.records} record(s), it has ${records.records}; ${again}`;
  }
  const live = (c: QuarantineCount) => JSON.stringify(c.ends.filter(([end]) => end > now));
  if (live(v) !== live(countOf(records.ends, v.bucketMs, now))) {
    return `its quarantine count's ends differ from its records'; ${again}`;
  }
  return null;
}

/** Attempts of a recount before it gives up on a network whose quarantine keeps changing. */
const RECOUNT_ATTEMPTS = 16;

/**
 * Counts a network's quarantine records again (`check --repair`): marks the count as being
 * counted, lists the records, and writes their count if no commit changed the mark meanwhile.
 * Answers the records counted; null when the network kept changing.
 */
export async function recount(
  store: Store,
  networkId: string,
  list: () => Promise<{ ends: number[] }>,
): Promise<number | null> {
  const key = keys.quarantineCount(networkId);
  let e = await store.get<Stored>(key);
  const bucketMs = e.value && "bucketMs" in e.value ? e.value.bucketMs : emptyCount(0).bucketMs;
  for (let attempt = 0; attempt < RECOUNT_ATTEMPTS; attempt++) {
    if (e.value === null || "records" in e.value) {
      await store.commit([{ key, version: e.version }], [{
        type: "set",
        key,
        value: { counting: 0 } satisfies Counting,
      }]);
      e = await store.get<Stored>(key);
      continue;
    }
    const { ends } = await list();
    const c = countOf(ends, bucketMs, Date.now());
    if ((await store.commit([{ key, version: e.version }], [{ type: "set", key, value: c }])).ok) {
      return c.records;
    }
    e = await store.get<Stored>(key);
  }
  return null;
}
