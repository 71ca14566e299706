/**
 * A bitmap of `size` bits persisted in chunks, with a head record that holds the round-robin cursor
 * and the number of set bits per chunk. Every change writes the head, so the head's version check
 * alone makes a commit exact: chunks are written without a check of their own.
 *
 * Chunks and the head are cached in memory with their versions: the hot path reads nothing. A failed
 * commit drops the cache and the caller retries on fresh reads.
 */
import { type Bitmap, wasmBitmap } from "@knitter/wasm";
import type { Key, Store } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { Mutex } from "@knitter/common";

export const CHUNK_BITS = 4096;

/** Chunks deleted along with the head in one commit; the rest go in follow-up commits. */
const DESTROY_BATCH = 500;

export interface PoolHead {
  /** Where the next search starts: freed bits are handed out again only after a full round. */
  cursor: number;
  /** Bits set by allocations (reserved bits are not counted). */
  used: number;
  /** Set bits (allocated or reserved) per chunk that exists in the store. */
  chunkUsed: Record<number, number>;
}

interface Cached<T> {
  value: T;
  version: string | null;
}

export class BitmapPool {
  private head: Cached<PoolHead> | null = null;
  private readonly chunks = new Map<number, Cached<Bitmap>>();
  private readonly mutex = new Mutex();

  constructor(
    readonly store: Store,
    readonly prefix: Key,
    readonly size: number,
    readonly chunkBits: number = CHUNK_BITS,
  ) {}

  /** Runs `fn` with no other edit of this pool in this process running. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.mutex.run(fn);
  }

  /** Starts editing within `tx`: the tx checks the versions read and writes what changed. */
  async edit(tx: Tx): Promise<PoolEdit> {
    const head = await this.loadHead();
    tx.onAbort(() => this.invalidate());
    return new PoolEdit(this, tx, head);
  }

  /** Reads the head fresh from the store (usage figures). */
  async readHead(): Promise<PoolHead | null> {
    return (await this.store.get<PoolHead>(this.headKey())).value;
  }

  /** Set bits in [start, end), from the cache where it has them. */
  count(start: number, end: number): Promise<number> {
    return this.exclusive(async () => {
      const head = await this.loadHead();
      let n = 0;
      for (let chunk = Math.floor(start / this.chunkBits); chunk * this.chunkBits < end; chunk++) {
        if (!(chunk in head.value.chunkUsed)) continue;
        const base = chunk * this.chunkBits;
        const c = await this.loadChunk(chunk);
        n += c.value.count(
          Math.max(start, base) - base,
          Math.min(end, base + this.chunkSize(chunk)) - base,
        );
      }
      return n;
    });
  }

  invalidate(): void {
    for (const c of this.chunks.values()) c.value.free();
    this.chunks.clear();
    this.head = null;
  }

  headKey(): Key {
    return [...this.prefix, "head"];
  }

  chunkKey(chunk: number): Key {
    return [...this.prefix, "chunk", chunk];
  }

  chunkSize(chunk: number): number {
    return Math.min(this.chunkBits, this.size - chunk * this.chunkBits);
  }

  /** @internal */
  async loadHead(): Promise<Cached<PoolHead>> {
    if (!this.head) {
      const e = await this.store.get<PoolHead>(this.headKey());
      this.head = {
        value: e.value ? structuredClone(e.value) : { cursor: 0, used: 0, chunkUsed: {} },
        version: e.version,
      };
    }
    return this.head;
  }

  /** @internal */
  async loadChunk(chunk: number): Promise<Cached<Bitmap>> {
    let c = this.chunks.get(chunk);
    if (!c) {
      const e = await this.store.get<Uint8Array>(this.chunkKey(chunk));
      c = { value: wasmBitmap(this.chunkSize(chunk), e.value ?? undefined), version: e.version };
      this.chunks.set(chunk, c);
    }
    return c;
  }

  /** @internal */
  cachedChunk(chunk: number): Cached<Bitmap> | undefined {
    return this.chunks.get(chunk);
  }
}

/** The changes one transaction makes to a pool. Call `flush()` before committing the tx. */
export class PoolEdit {
  private readonly dirty = new Map<number, Cached<Bitmap>>();
  private headDirty = false;
  private destroyed = false;

  constructor(
    private readonly pool: BitmapPool,
    private readonly tx: Tx,
    private readonly head: Cached<PoolHead>,
  ) {
    tx.check({ key: pool.headKey(), version: head.version });
  }

  get used(): number {
    return this.head.value.used;
  }

  /**
   * Sets and returns the first clear bit at or after the cursor (wrapping around) within the
   * `allowed` index ranges ([start, end) pairs, sorted); null when none is clear.
   */
  async allocate(
    allowed: readonly [number, number][] = [[0, this.pool.size]],
  ): Promise<number | null> {
    const cursor = this.head.value.cursor;
    // Two passes: from the cursor to the end, then from the start up to the cursor.
    for (const [from, to] of [[cursor, this.pool.size], [0, cursor]]) {
      for (const [start, end] of allowed) {
        const lo = Math.max(start, from);
        const hi = Math.min(end, to);
        if (lo >= hi) continue;
        const found = await this.findIn(lo, hi);
        if (found >= 0) {
          await this.mark(found, true);
          this.head.value.cursor = found + 1 >= this.pool.size ? 0 : found + 1;
          return found;
        }
      }
    }
    return null;
  }

  /** Sets a given bit; false when it was already set. */
  async take(index: number): Promise<boolean> {
    if (await this.test(index)) return false;
    await this.mark(index, true);
    return true;
  }

  /** Clears a bit; false when it was not set. */
  async release(index: number): Promise<boolean> {
    if (!(await this.test(index))) return false;
    await this.mark(index, false);
    return true;
  }

  /** Sets the bits of [start, end) as reserved: never allocated, not counted as used. */
  async reserve(start: number, end: number): Promise<void> {
    const bits = this.pool.chunkBits;
    for (let chunk = Math.floor(start / bits); chunk * bits < end; chunk++) {
      const base = chunk * bits;
      const c = await this.pool.loadChunk(chunk);
      const hi = Math.min(end, base + this.pool.chunkSize(chunk)) - base;
      this.bump(chunk, c.value.setRange(Math.max(start, base) - base, hi));
      this.dirty.set(chunk, c);
    }
  }

  /** Every set bit, allocated or reserved. */
  get setBits(): number {
    return Object.values(this.head.value.chunkUsed).reduce((a, b) => a + b, 0);
  }

  async test(index: number): Promise<boolean> {
    this.checkIndex(index);
    const chunk = Math.floor(index / this.pool.chunkBits);
    if (!(chunk in this.head.value.chunkUsed) && !this.pool.cachedChunk(chunk)) return false;
    const c = await this.pool.loadChunk(chunk);
    return c.value.test(index - chunk * this.pool.chunkBits);
  }

  /**
   * Deletes the pool's head and up to 500 of its chunks in the tx. Chunks beyond that are the
   * caller's to delete after the commit (a network delete does: service/network_leftovers.ts), so
   * that a failure there is its own, not a promise nobody awaits.
   */
  destroy(): void {
    this.destroyed = true;
    const chunks = Object.keys(this.head.value.chunkUsed).map(Number);
    this.tx.delete(this.pool.headKey());
    for (const c of chunks.slice(0, DESTROY_BATCH)) this.tx.delete(this.pool.chunkKey(c));
    this.tx.onCommit(() => this.pool.invalidate());
  }

  /** Adds the writes for everything this edit changed to the tx. */
  flush(): void {
    if (this.destroyed) return;
    // No check per chunk: every chunk change also writes the head, whose check covers them all.
    for (const [chunk, c] of this.dirty) this.tx.set(this.pool.chunkKey(chunk), c.value.toBytes());
    if (this.headDirty) this.tx.set(this.pool.headKey(), this.head.value);
    const dirty = [...this.dirty.values()];
    const head = this.head;
    this.tx.onCommit((version) => {
      for (const c of dirty) c.version = version;
      if (this.headDirty) head.version = version;
    });
  }

  private async findIn(lo: number, hi: number): Promise<number> {
    const bits = this.pool.chunkBits;
    for (let chunk = Math.floor(lo / bits); chunk * bits < hi; chunk++) {
      const base = chunk * bits;
      const size = this.pool.chunkSize(chunk);
      if ((this.head.value.chunkUsed[chunk] ?? 0) >= size) continue;
      const c = await this.pool.loadChunk(chunk);
      const s = Math.max(lo, base) - base;
      const e = Math.min(hi, base + size) - base;
      const i = c.value.findFree(s, e, s);
      if (i >= 0) return base + i;
    }
    return -1;
  }

  private async mark(index: number, set: boolean): Promise<void> {
    const chunk = Math.floor(index / this.pool.chunkBits);
    const c = await this.pool.loadChunk(chunk);
    const bit = index - chunk * this.pool.chunkBits;
    if (set) c.value.set(bit);
    else c.value.clear(bit);
    this.bump(chunk, set ? 1 : -1);
    this.head.value.used += set ? 1 : -1;
    this.dirty.set(chunk, c);
  }

  private bump(chunk: number, delta: number): void {
    const used = this.head.value.chunkUsed;
    used[chunk] = (used[chunk] ?? 0) + delta;
    this.headDirty = true;
  }

  private checkIndex(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.pool.size) {
      throw new RangeError(`bit ${index} outside the pool (0..${this.pool.size - 1})`);
    }
  }
}
