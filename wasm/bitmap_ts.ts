/**
 * The WASM bitmap's algorithm in plain TypeScript, on u32 words. It is the yardstick the
 * benchmark measures the WASM build against and the second opinion of the property tests, not a
 * fallback: production code uses `wasmBitmap`.
 *
 * @module
 */

import type { Bitmap } from "./bitmap.ts";
import {
  bytesOf,
  checkBytes,
  checkIndices,
  checkRange,
  checkSearch,
  checkSize,
  clearBit,
  ctz32,
  loadBytes,
  setBit,
  testBit,
} from "./bitmap_checks.ts";

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

/** Sets clear bits of [lo, hi) in ascending order into out[n..]; returns the new n. */
function take(words: Uint32Array, lo: number, hi: number, out: Uint32Array, n: number): number {
  if (lo >= hi) return n;
  let w = lo >>> 5;
  const last = (hi - 1) >>> 5;
  let mask = -1 << (lo & 31);
  for (; w <= last && n < out.length; w++) {
    if (w === last) mask &= -1 >>> (31 - ((hi - 1) & 31));
    let word = words[w];
    let free = ~word & mask;
    mask = -1;
    if (free === 0) continue;
    const base = w << 5;
    do {
      out[n++] = base + ctz32(free);
      word |= free & -free;
      free &= free - 1;
    } while (free !== 0 && n < out.length);
    words[w] = word;
  }
  return n;
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
    return testBit(this.#live(), this.size, i);
  }

  set(i: number): void {
    setBit(this.#live(), this.size, i);
  }

  clear(i: number): void {
    clearBit(this.#live(), this.size, i);
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

  allocate(out: Uint32Array, start: number, end: number, from: number): number {
    const words = this.#live();
    checkSearch(start, end, from, this.size);
    return take(words, start, from, out, take(words, from, end, out, 0));
  }

  setRange(start: number, end: number): number {
    const words = this.#live();
    checkRange(start, end, this.size);
    let added = 0;
    for (let i = start; i < end; i++) {
      const bit = 1 << (i & 31);
      if ((words[i >>> 5] & bit) === 0) {
        words[i >>> 5] |= bit;
        added++;
      }
    }
    return added;
  }

  clearMany(indices: ArrayLike<number>): number {
    const words = this.#live();
    checkIndices(indices, this.size);
    let cleared = 0;
    for (let k = 0; k < indices.length; k++) {
      const i = indices[k];
      const bit = 1 << (i & 31);
      if ((words[i >>> 5] & bit) !== 0) cleared++;
      words[i >>> 5] &= ~bit;
    }
    return cleared;
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
    loadBytes(this.#live(), this.size, bytes);
  }

  toBytes(): Uint8Array {
    return bytesOf(this.#live(), this.size).slice();
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
