// AssemblyScript source of the bitmap hot paths (see ../README.md); built by ../build.ts.
//
// A bitmap region is an array of u64 words in linear memory. WASM memory is little-endian, so
// bit i (word i >>> 6, bit i & 63) is also byte i >>> 3, bit i & 7: the region's bytes are the
// stored representation as is. Callers (../bitmap.ts) validate every index and range: these
// functions trust them and never trap on bad input.
//
// Scans, counts and the batch operations live here. Single-bit operations (test, set, clear) and
// the first word of a search are done by the JS side directly on the region (../bitmap.ts): a call
// into WASM costs more than they do. `set`, `clear` and `test` stay exported for completeness.
//
// This file is compiled by asc, not by Deno: no decorators (dprint cannot parse them on
// functions), so inlining is left to binaryen's -O3.

/** Byte address of the word holding bit `i`. */
function wordAt(ptr: usize, i: u32): usize {
  return ptr + ((<usize> (i >>> 6)) << 3);
}

/** Allocates a zeroed region of whole words for `bits` bits; release it with `release`. */
export function alloc(bits: u32): usize {
  const bytes = (<usize> ((bits + 63) >>> 6)) << 3;
  // heap.alloc (TLSF with --runtime minimal) reuses freed blocks; never ask it for 0 bytes.
  const ptr = heap.alloc(bytes > 0 ? bytes : 8);
  memory.fill(ptr, 0, bytes);
  return ptr;
}

/** Returns a region to the heap. */
export function release(ptr: usize): void {
  heap.free(ptr);
}

/** 1 when bit `i` is set, else 0. */
export function test(ptr: usize, i: u32): u32 {
  return <u32> ((load<u64>(wordAt(ptr, i)) >>> <u64> (i & 63)) & 1);
}

/** Sets bit `i`. */
export function set(ptr: usize, i: u32): void {
  const at = wordAt(ptr, i);
  store<u64>(at, load<u64>(at) | (<u64> 1 << <u64> (i & 63)));
}

/** Clears bit `i`. */
export function clear(ptr: usize, i: u32): void {
  const at = wordAt(ptr, i);
  store<u64>(at, load<u64>(at) & ~(<u64> 1 << <u64> (i & 63)));
}

/** Whether the 16 bytes at `at` are all ones. */
function full16(at: usize): bool {
  return !v128.any_true(v128.not(v128.load(at)));
}

/** Whether the 64 bytes at `at` are all ones. */
function full64(at: usize): bool {
  const low = v128.and(v128.load(at), v128.load(at, 16));
  const high = v128.and(v128.load(at, 32), v128.load(at, 48));
  return !v128.any_true(v128.not(v128.and(low, high)));
}

/** First clear bit in [lo, hi), or -1; requires lo < hi. Scans whole words, not bits. */
function findClear(ptr: usize, lo: u32, hi: u32): i32 {
  let at = wordAt(ptr, lo);
  const last = wordAt(ptr, hi - 1);
  // Inverted, so a clear bit is a one that ctz can find; bits below lo are masked out.
  let free = ~load<u64>(at) & (<u64> -1 << <u64> (lo & 63));
  if (free == 0) {
    at += 8;
    // Skip blocks of full words, 64 then 16 bytes at a time, while every word is in range.
    while (at + 56 <= last && full64(at)) at += 64;
    while (at + 8 <= last && full16(at)) at += 16;
    for (; at <= last; at += 8) {
      free = ~load<u64>(at);
      if (free != 0) break;
    }
    if (free == 0) return -1;
  }
  const bit = (<u32> ((at - ptr) << 3)) + <u32> ctz(free);
  // Only the last word can hold a clear bit at or past hi.
  return bit < hi ? <i32> bit : -1;
}

/**
 * First clear bit in [from, end), then in [start, from); -1 when [start, end) is full.
 * Requires start <= from <= end.
 */
export function findFree(ptr: usize, start: u32, end: u32, from: u32): i32 {
  if (from < end) {
    const found = findClear(ptr, from, end);
    if (found >= 0) return found;
  }
  return start < from ? findClear(ptr, start, from) : -1;
}

/** Number of set bits in [lo, hi); requires lo <= hi. */
export function count(ptr: usize, lo: u32, hi: u32): u32 {
  if (lo >= hi) return 0;
  let at = wordAt(ptr, lo);
  const last = wordAt(ptr, hi - 1);
  const head = <u64> -1 << <u64> (lo & 63);
  const tail = <u64> -1 >>> <u64> (63 - ((hi - 1) & 63));
  if (at == last) return <u32> popcnt(load<u64>(at) & head & tail);
  let n = popcnt(load<u64>(at) & head);
  for (at += 8; at < last; at += 8) n += popcnt(load<u64>(at));
  return <u32> (n + popcnt(load<u64>(last) & tail));
}

/** Mask of the bits of the word holding bit `hi - 1` that lie below `hi`. */
function tailMask(hi: u32): u64 {
  return <u64> -1 >>> <u64> (63 - ((hi - 1) & 63));
}

/**
 * Sets clear bits of [lo, hi) in ascending order, writing their indexes as u32 at out[n], out[n+1],
 * ... until `max` are written; returns the new n. Whole words at a time: every clear bit of a
 * word is taken (up to max) with one load and one store.
 */
function take(ptr: usize, lo: u32, hi: u32, out: usize, n: u32, max: u32): u32 {
  if (lo >= hi || n >= max) return n;
  let at = wordAt(ptr, lo);
  const last = wordAt(ptr, hi - 1);
  let mask = <u64> -1 << <u64> (lo & 63);
  while (at <= last) {
    if (at == last) mask &= tailMask(hi);
    let word = load<u64>(at);
    let free = ~word & mask;
    mask = <u64> -1;
    if (free == 0) {
      at += 8;
      // Skip full 64-byte blocks that end before the last word (whose tail needs the mask).
      while (at + 56 < last && full64(at)) at += 64;
      continue;
    }
    const base = <u32> ((at - ptr) << 3);
    do {
      store<u32>(out + ((<usize> n) << 2), base + <u32> ctz(free));
      word |= free & (~free + 1);
      free &= free - 1;
      n++;
    } while (free != 0 && n < max);
    store<u64>(at, word);
    if (n >= max) return n;
    at += 8;
  }
  return n;
}

/**
 * Batch allocation: sets up to `max` clear bits in the order successive findFree(start, end,
 * cursor) + set calls with cursor = last + 1 would (first [from, end), then [start, from)), writes
 * their indexes as u32 at `out` and returns how many. Requires start <= from <= end.
 */
export function allocate(ptr: usize, start: u32, end: u32, from: u32, out: usize, max: u32): u32 {
  const n = take(ptr, from, end, out, 0, max);
  return take(ptr, start, from, out, n, max);
}

/** Sets every bit of [lo, hi) and returns how many were clear before; requires lo <= hi. */
export function setRange(ptr: usize, lo: u32, hi: u32): u32 {
  if (lo >= hi) return 0;
  const before = count(ptr, lo, hi);
  let at = wordAt(ptr, lo);
  const last = wordAt(ptr, hi - 1);
  const head = <u64> -1 << <u64> (lo & 63);
  const tail = tailMask(hi);
  if (at == last) {
    store<u64>(at, load<u64>(at) | (head & tail));
  } else {
    store<u64>(at, load<u64>(at) | head);
    at += 8;
    if (last > at) memory.fill(at, 0xff, last - at);
    store<u64>(last, load<u64>(last) | tail);
  }
  return hi - lo - before;
}

/**
 * Clears the `n` bits whose indexes are the u32 at `list` and returns how many of them were set;
 * returns -1 and clears nothing when one index is not below `size`.
 */
export function clearList(ptr: usize, size: u32, list: usize, n: u32): i32 {
  const end = list + ((<usize> n) << 2);
  for (let at = list; at < end; at += 4) if (load<u32>(at) >= size) return -1;
  let cleared: u32 = 0;
  for (let at = list; at < end; at += 4) {
    const i = load<u32>(at);
    const word = wordAt(ptr, i);
    const bit = <u64> 1 << <u64> (i & 63);
    const w = load<u64>(word);
    cleared += <u32> ((w & bit) != 0);
    store<u64>(word, w & ~bit);
  }
  return <i32> cleared;
}
