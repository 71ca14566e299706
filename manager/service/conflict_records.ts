/**
 * How a node's conflict report is stored (service/conflicts.ts decides what it holds): a report
 * may have 1,000 entries of up to about 800 bytes each, more than one stored value (64 KiB) or one
 * commit (800 KiB) holds. So each entry is a key of its own, of a generation:
 *
 * - the head `keys.conflicts(node)` names the current generation and how many entries it has;
 * - a new report writes its entries under a fresh generation, {@link ENTRIES_PER_COMMIT} per
 *   commit, the first commit with a draft key; then one commit checks the head as read and the
 *   draft, names the new generation in the head and deletes the draft; then the old generation's
 *   entries go, in bounded commits.
 *
 * A reader lists the entries of the generation its head read names, then reads the head again:
 * entries are deleted only after the head moved away from them, so an unchanged head means the
 * entries read are the whole report. Nothing is ever read of a generation being written.
 *
 * A writer interrupted leaves a draft (and its entries), a drop interrupted entries of a generation
 * no head names: `check` reports both, `check --repair` deletes them. A repair that deletes the
 * draft of a report being written makes its last commit fail; it then writes again.
 *
 * @module
 */
import { ApiError } from "../errors.ts";
import { keys } from "../model.ts";
import type { ConflictReportItem } from "../schemas.ts";
import type { Check, Entry, Mutation, Store } from "../store/store.ts";
import type { z } from "zod";
import { deleteUnder } from "./delete_under.ts";
import { type Ctx, listValues, now } from "./context.ts";

/** An entry as kept: the node's word, and since when it says so. */
export type StoredItem = z.infer<typeof ConflictReportItem> & { since: string };

/** A node's report head. */
export interface ConflictHead {
  node: string;
  updatedAt: string;
  /** The generation whose entries are the report, and how many there are. */
  generation?: string;
  count?: number;
  /** The entries inline: a record of a manager before generations, read as it is. */
  items?: StoredItem[];
}

/** A report as read: its head (absent: none) and entries. */
export interface ConflictReportRead {
  head: Entry<ConflictHead>;
  items: StoredItem[];
}

/**
 * Entries one commit writes: an entry is at most about 1 KiB with its key (an 800-byte value, a
 * node name of up to 317 characters), so 250 stay far below a commit's 800 KiB and 1,000 writes.
 */
export const ENTRIES_PER_COMMIT = 250;

/** Reads or writes that start again when another writer got in between, before giving up. */
const MAX_ATTEMPTS = 64;

/** A node's report, whole (module documentation). */
export async function readReport(store: Store, node: string): Promise<ConflictReportRead> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const head = await store.get<ConflictHead>(keys.conflicts(node));
    const items = await entriesOf(store, head);
    if (items) return { head, items };
  }
  throw busy(node);
}

/**
 * The entries a head read names; null when the head moved meanwhile (they may be partly gone):
 * read it again.
 */
export async function entriesOf(
  store: Store,
  head: Entry<ConflictHead>,
): Promise<StoredItem[] | null> {
  const h = head.value;
  if (!h) return [];
  if (h.generation === undefined) return h.items ?? [];
  const items = await listValues<StoredItem>(store, keys.conflictEntries(h.node, h.generation));
  const again = await store.get(head.key);
  return again.version === head.version ? items : null;
}

/**
 * Replaces `node`'s report with what `build` makes of the current one at a time (an empty list
 * deletes it). `build` runs again when another report of the node got in between.
 */
export async function writeReport(
  ctx: Ctx,
  node: string,
  build: (before: StoredItem[], at: string) => Promise<StoredItem[]>,
): Promise<{ updatedAt: string; items: StoredItem[] }> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const { head, items: before } = await readReport(ctx.store, node);
    const updatedAt = now();
    const items = await build(before, updatedAt);
    if (await replace(ctx.store, node, head, items, updatedAt)) {
      if (head.value?.generation !== undefined) {
        await deleteUnder(ctx.store, keys.conflictEntries(node, head.value.generation));
      }
      return { updatedAt, items };
    }
    ctx.metrics.conflicts.inc();
  }
  throw busy(node);
}

/** Puts `items` in place of the report `head` names; false when the head or the draft moved. */
async function replace(
  store: Store,
  node: string,
  head: Entry<ConflictHead>,
  items: StoredItem[],
  updatedAt: string,
): Promise<boolean> {
  const changed: Mutation = { type: "set", key: keys.conflictsChanged(), value: updatedAt };
  if (items.length === 0) {
    if (!head.value) return true;
    const res = await store.commit([checkOf(head)], [{ type: "delete", key: head.key }, changed]);
    return res.ok;
  }
  const generation = crypto.randomUUID();
  const draft = keys.conflictDraft(node, generation);
  for (let i = 0; i < items.length; i += ENTRIES_PER_COMMIT) {
    const writes: Mutation[] = items.slice(i, i + ENTRIES_PER_COMMIT).map((item, j) => ({
      type: "set",
      key: keys.conflictEntry(node, generation, i + j),
      value: item,
    }));
    if (i === 0) writes.push({ type: "set", key: draft, value: { startedAt: updatedAt } });
    await store.commit([], writes);
  }
  const d = await store.get(draft);
  const record: ConflictHead = { node, updatedAt, generation, count: items.length };
  const res = d.value === null ? { ok: false } : await store.commit([checkOf(head), checkOf(d)], [
    { type: "delete", key: draft },
    { type: "set", key: head.key, value: record },
    changed,
  ]);
  if (!res.ok) await dropGeneration(store, node, generation);
  return res.ok;
}

/** Deletes a generation no head names: its draft first, then its entries. */
export async function dropGeneration(store: Store, node: string, generation: string) {
  await store.commit([], [{ type: "delete", key: keys.conflictDraft(node, generation) }]);
  await deleteUnder(store, keys.conflictEntries(node, generation));
}

/**
 * Deletes the entries of a node whose head went (the node was forgotten), and any draft: a report
 * being written meanwhile then fails its last commit and writes again.
 */
export async function dropNodeReport(store: Store, node: string): Promise<void> {
  await deleteUnder(store, keys.conflictDrafts(node));
  await deleteUnder(store, keys.conflictEntries(node));
}

/** A generation of a node's report that its head does not name: a write or a drop interrupted. */
export interface StrayGeneration {
  node: string;
  generation: string;
  entries: number;
  /** Its draft, when its write has not ended (in flight, or interrupted). */
  draft: Entry<unknown> | null;
}

/**
 * Every stray generation. Read in this order: entries, drafts, heads. A generation's first entries
 * come with its draft, and the commit that names it in the head deletes the draft; so one whose
 * entries were seen and whose draft was gone after is named by the head read last, or never will be.
 */
export async function strayGenerations(store: Store): Promise<StrayGeneration[]> {
  const found = new Map<string, StrayGeneration>();
  const at = (node: string, generation: string) => {
    const id = JSON.stringify([node, generation]);
    const g = found.get(id) ?? { node, generation, entries: 0, draft: null };
    found.set(id, g);
    return g;
  };
  for await (const e of store.list(keys.conflictEntries())) {
    at(e.key[1] as string, e.key[2] as string).entries++;
  }
  for await (const e of store.list(keys.conflictDrafts())) {
    at(e.key[1] as string, e.key[2] as string).draft = e;
  }
  const named = new Set<string>();
  for await (const e of store.list<ConflictHead>(keys.allConflicts())) {
    const h = e.value;
    if (h?.generation !== undefined) named.add(JSON.stringify([h.node, h.generation]));
  }
  return [...found].filter(([id, g]) => g.draft !== null || !named.has(id)).map(([, g]) => g);
}

/** Heads whose count differs from their generation's entries: "node: counts N, has M". */
export async function miscountedHeads(store: Store): Promise<string[]> {
  const out: string[] = [];
  for await (const head of store.list<ConflictHead>(keys.allConflicts())) {
    const h = head.value;
    if (h?.generation === undefined) continue;
    const items = await entriesOf(store, head);
    // null: a report replaced it meanwhile, whose write counts its own.
    if (items && items.length !== h.count) {
      out.push(`node "${h.node}" counts ${h.count} entries, its generation has ${items.length}`);
    }
  }
  return out;
}

/**
 * Deletes a stray generation: a draft only while it is still there (checked: the write it belongs
 * to may have ended since it was read), then the entries.
 */
export async function dropStray(store: Store, g: StrayGeneration): Promise<boolean> {
  if (g.draft) {
    const res = await store.commit([checkOf(g.draft)], [{ type: "delete", key: g.draft.key }]);
    if (!res.ok) return false;
  }
  await deleteUnder(store, keys.conflictEntries(g.node, g.generation));
  return true;
}

function checkOf(e: Entry<unknown>): Check {
  return { key: e.key, version: e.version };
}

function busy(node: string): ApiError {
  return new ApiError(
    "store_conflict",
    `The conflict report of node "${node}" kept changing while it was read or written (${MAX_ATTEMPTS} attempts); try again`,
  );
}
