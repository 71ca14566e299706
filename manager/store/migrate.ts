/**
 * Moving the whole state between stores (Deno KV ⇄ etcd) through a file: `export` writes every key
 * as a JSON line, `import` loads a file into an empty store, `compare` proves a store holds exactly
 * what a file holds. Byte values (bitmap chunks) travel as base64.
 */
import type { Entry, Key, Mutation, Store } from "./store.ts";

const FORMAT = "knitter-store-export";
/** Keys per import commit: well under both backends' limits. */
const BATCH = 500;

interface Line {
  key: Key;
  value?: unknown;
  bytes?: string;
}

export async function exportStore(store: Store, path: string): Promise<number> {
  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  const writer = file.writable.getWriter();
  const utf8 = new TextEncoder();
  let n = 0;
  try {
    await writer.write(utf8.encode(JSON.stringify({ format: FORMAT, version: 1 }) + "\n"));
    for await (const e of store.list([])) {
      await writer.write(utf8.encode(JSON.stringify(toLine(e)) + "\n"));
      n++;
    }
  } finally {
    await writer.close();
  }
  return n;
}

/** Loads an export into `store`, which must be empty: merging two states is not a migration. */
export async function importStore(store: Store, path: string): Promise<number> {
  for await (const e of store.list([], { limit: 1 })) {
    throw new Error(
      `The target store is not empty (it holds ${
        JSON.stringify(e.key)
      } and maybe more): import into an empty store only`,
    );
  }
  let batch: Mutation[] = [];
  let n = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const res = await store.commit([], batch);
    if (!res.ok) throw new Error("The target store refused an import commit");
    n += batch.length;
    batch = [];
  };
  for await (const line of readLines(path)) {
    batch.push({ type: "set", key: line.key, value: fromLine(line) });
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  return n;
}

/** Differences between a store and an export file; none means the two hold the same state. */
export async function compareStore(store: Store, path: string, max = 50): Promise<string[]> {
  const diffs: string[] = [];
  const file = readLines(path)[Symbol.asyncIterator]();
  const stored = store.list([])[Symbol.asyncIterator]();
  let a = await file.next();
  let b = await stored.next();
  while ((!a.done || !b.done) && diffs.length < max) {
    // Both sides come in Deno KV's key order (an export is a listing), so one pass finds all.
    const order = a.done ? 1 : b.done ? -1 : compareKeys(a.value.key, b.value.key);
    if (order === 0) {
      if (JSON.stringify(a.value) !== JSON.stringify(toLine(b.value!))) {
        diffs.push(`${JSON.stringify(a.value!.key)}: the values differ`);
      }
      a = await file.next();
      b = await stored.next();
    } else if (order < 0) {
      diffs.push(`${JSON.stringify(a.value!.key)}: in the file, not in the store`);
      a = await file.next();
    } else {
      diffs.push(`${JSON.stringify(b.value!.key)}: in the store, not in the file`);
      b = await stored.next();
    }
  }
  return diffs;
}

/** Deno KV's order of keys of strings and numbers: strings first, then numbers; bytewise UTF-8. */
export function compareKeys(x: Key, y: Key): number {
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    if (p === q) continue;
    if (typeof p !== typeof q) return typeof p === "string" ? -1 : 1;
    if (typeof p === "number") return p < (q as number) ? -1 : 1;
    return bytesCompare(utf8.encode(p), utf8.encode(q as string));
  }
  return x.length - y.length;
}

const utf8 = new TextEncoder();

function bytesCompare(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function toLine(e: Entry<unknown>): Line {
  return e.value instanceof Uint8Array
    ? { key: e.key, bytes: e.value.toBase64() }
    : { key: e.key, value: e.value };
}

function fromLine(line: Line): unknown {
  return line.bytes !== undefined ? Uint8Array.fromBase64(line.bytes) : line.value;
}

async function* readLines(path: string): AsyncIterable<Line> {
  const text = await Deno.readTextFile(path);
  const lines = text.split("\n");
  const header = JSON.parse(lines[0] || "{}");
  if (header.format !== FORMAT) {
    throw new Error(`"${path}" is not a store export (its first line should name ${FORMAT})`);
  }
  for (const line of lines.slice(1)) if (line.trim()) yield JSON.parse(line) as Line;
}
