/**
 * The WASM bitmap's algorithm in plain TypeScript, on u32 words. It is the yardstick the
 * benchmark measures the WASM build against and the second opinion of the property tests, not a
 * fallback: production code uses `wasmBitmap`.
 *
 * @module
 */

import type { Bitmap } from "./bitmap.ts";
import {
  checkBytes,
  checkIndex,
  checkRange,
  checkSearch,
  checkSize,
  lastByteMask,
} from "./bitmap_checks.ts";

/** Index of the lowest set bit of a non-zero int32: isolate it, then count from the top. */
function ctz32(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/** Set bits of an int32 (SWAR: sum bit pairs, then nibbles, then bytes via one multiply). */
function popcount32(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
}

/** First clear bit in [lo, hi), or -1; requires lo < hi. Scans whole words, not bits. */
function findClear(words: Uint32Array, lo: number, hi: number): number {
  let w = lo >>> 5;
  const last = (hi - 1) >>> 5;
  // Inverted, so a clear bit is a one that ctz can find; bits below lo are masked out.
  let free = ~words[w] & (-1 << (lo & 31));
  while (free === 0) {
    if (w === last) return -1;
    free = ~words[++w];
  }
  const bit = (w << 5) + ctz32(free);
  // Only the last word can hold a clear bit at or past hi.
  return bit < hi ? bit : -1;
}

class TsBitmap implements Bitmap {
  readonly size: number;
  #words: Uint32Array | null;

  constructor(size: number) {
    this.size = size;
    this.#words = new Uint32Array(Math.ceil(size / 32));
  }

  #live(): Uint32Array {
    if (this.#words === null) throw new Error("bitmap used after free()");
    return this.#words;
  }

  test(i: number): boolean {
    const words = this.#live();
    checkIndex(i, this.size);
    return ((words[i >>> 5] >>> (i & 31)) & 1) !== 0;
  }

  set(i: number): void {
    const words = this.#live();
    checkIndex(i, this.size);
    words[i >>> 5] |= 1 << (i & 31);
  }

  clear(i: number): void {
    const words = this.#live();
    checkIndex(i, this.size);
    words[i >>> 5] &= ~(1 << (i & 31));
  }

  findFree(start: number, end: number, from: number): number {
    const words = this.#live();
    checkSearch(start, end, from, this.size);
    if (from < end) {
      const found = findClear(words, from, end);
      if (found >= 0) return found;
    }
    return start < from ? findClear(words, start, from) : -1;
  }

  count(start = 0, end = this.size): number {
    const words = this.#live();
    checkRange(start, end, this.size);
    if (start >= end) return 0;
    let w = start >>> 5;
    const last = (end - 1) >>> 5;
    const head = -1 << (start & 31);
    const tail = -1 >>> (31 - ((end - 1) & 31));
    if (w === last) return popcount32(words[w] & head & tail);
    let n = popcount32(words[w] & head);
    for (w++; w < last; w++) n += popcount32(words[w]);
    return n + popcount32(words[last] & tail);
  }

  load(bytes: Uint8Array): void {
    const words = this.#live();
    checkBytes(bytes, this.size);
    const n = Math.ceil(this.size / 8);
    const view = new Uint8Array(words.buffer, 0, n);
    view.set(bytes);
    view.fill(0, bytes.length);
    // Bits past size stay zero so word scans and popcounts need no extra masking.
    if (n > 0) view[n - 1] &= lastByteMask(this.size);
  }

  toBytes(): Uint8Array {
    const words = this.#live();
    return new Uint8Array(words.buffer, 0, Math.ceil(this.size / 8)).slice();
  }

  free(): void {
    this.#live();
    this.#words = null;
  }
}

/** A bitmap of `size` bits in a JS Uint32Array, optionally loaded from stored bytes. */
export function tsBitmap(size: number, bytes?: Uint8Array): Bitmap {
  checkSize(size);
  if (bytes) checkBytes(bytes, size);
  const bitmap = new TsBitmap(size);
  if (bytes) bitmap.load(bytes);
  return bitmap;
}
