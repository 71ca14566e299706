// AssemblyScript source of the bitmap hot paths (see ../README.md); built by ../build.ts.
//
// A bitmap region is an array of u64 words in linear memory. WASM memory is little-endian, so
// bit i (word i >>> 6, bit i & 63) is also byte i >>> 3, bit i & 7: the region's bytes are the
// stored representation as is. Callers (../bitmap.ts) validate every index and range: these
// functions trust them and never trap on bad input.
//
// Every operation on the bits lives here; the JS side only validates arguments and copies the
// stored bytes in and out.
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
