// Output: the line records sorted by (cookie, text) with merge sorts that skip merging halves
// already in order, then joined by "\n" without duplicates into the output area.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { B_OUT, B_RECS, B_RECS_TMP, buffer, reserve } from "./layout";
import { recCount, textBase, wp } from "./text";

/** Orders two line records: by cookie, then by text (bytes, a prefix first), like JS strings. */
function lineCmp(a: usize, b: usize): i32 {
  const ca = load<u64>(a);
  const cb = load<u64>(b);
  if (ca != cb) return ca < cb ? -1 : 1;
  // Equal cookies: the first 26 bytes ("cookie=0x" + 16 digits + ",") are equal too.
  const pa = textBase + <usize> load<u32>(a, 8) + 26;
  const pb = textBase + <usize> load<u32>(b, 8) + 26;
  const la = <usize> load<u32>(a, 12) - 26;
  const lb = <usize> load<u32>(b, 12) - 26;
  const n = la < lb ? la : lb;
  let i: usize = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= n; i += 16) {
      const same = i8x16.bitmask(i8x16.eq(v128.load(pa + i), v128.load(pb + i)));
      if (same != 0xffff) {
        const at = i + <usize> ctz(~same);
        return load<u8>(pa + at) < load<u8>(pb + at) ? -1 : 1;
      }
    }
  }
  for (; i + 8 <= n; i += 8) {
    const x = load<u64>(pa + i);
    const y = load<u64>(pb + i);
    if (x != y) {
      // Little-endian: the lowest differing byte comes first in the text.
      const shift = ctz(x ^ y) & ~7;
      return ((x >>> shift) & 0xff) < ((y >>> shift) & 0xff) ? -1 : 1;
    }
  }
  for (; i < n; i++) {
    const x = load<u8>(pa + i);
    const y = load<u8>(pb + i);
    if (x != y) return x < y ? -1 : 1;
  }
  return la == lb ? 0 : la < lb ? -1 : 1;
}

function copyRec(to: usize, from: usize): void {
  store<u64>(to, load<u64>(from));
  store<u64>(to, load<u64>(from, 8), 8);
}

function sortRecs(a: usize, tmp: usize, lo: u32, hi: u32): void {
  if (hi - lo <= 12) {
    for (let i = lo + 1; i < hi; i++) {
      const at = a + (<usize> i << 4);
      if (lineCmp(at - 16, at) <= 0) continue;
      copyRec(tmp, at);
      let j = i;
      while (j > lo && lineCmp(a + (<usize> (j - 1) << 4), tmp) > 0) {
        copyRec(a + (<usize> j << 4), a + (<usize> (j - 1) << 4));
        j--;
      }
      copyRec(a + (<usize> j << 4), tmp);
    }
    return;
  }
  const mid = lo + ((hi - lo) >>> 1);
  sortRecs(a, tmp, lo, mid);
  sortRecs(a, tmp, mid, hi);
  if (lineCmp(a + (<usize> (mid - 1) << 4), a + (<usize> mid << 4)) <= 0) return;
  memory.copy(tmp + (<usize> lo << 4), a + (<usize> lo << 4), <usize> (mid - lo) << 4);
  let i = lo;
  let j = mid;
  let k = lo;
  while (i < mid && j < hi) {
    const x = tmp + (<usize> i << 4);
    const y = a + (<usize> j << 4);
    if (lineCmp(x, y) <= 0) {
      copyRec(a + (<usize> k << 4), x);
      i++;
    } else {
      copyRec(a + (<usize> k << 4), y);
      j++;
    }
    k++;
  }
  if (i < mid) memory.copy(a + (<usize> k << 4), tmp + (<usize> i << 4), <usize> (mid - i) << 4);
}

/**
 * Copies a line of `len` bytes; the WASM build by 16 bytes at a time (cheaper than a call of
 * memory.copy for a line), which may read and write up to 15 bytes past it: the text and the
 * output area have slack for that.
 */
function copyLine(to: usize, from: usize, len: usize): void {
  if (ASC_FEATURE_SIMD) {
    for (let i: usize = 0; i < len; i += 16) v128.store(to + i, v128.load(from + i));
  } else {
    memory.copy(to, from, len);
  }
}

let outLength: u32 = 0;

/** Address of the output of the last successful compile. */
export function outPtr(): usize {
  return buffer(B_OUT);
}

/** Length in bytes of the output of the last successful compile. */
export function outLen(): u32 {
  return outLength;
}

/** Sorts the line records and joins the lines, without duplicates, into the output area. */
export function join(): void {
  const recs = buffer(B_RECS);
  if (recCount > 1) {
    sortRecs(recs, reserve(B_RECS_TMP, <usize> recCount << 4), 0, recCount);
  }
  // Join without duplicates (equal lines are adjacent now).
  const out = reserve(B_OUT, wp - textBase + <usize> recCount + 16);
  let o = out;
  for (let i: u32 = 0; i < recCount; i++) {
    const at = recs + (<usize> i << 4);
    // Equal lines have equal cookies and lengths: compare the text only then.
    if (
      i > 0 && load<u64>(at - 16) == load<u64>(at) && load<u32>(at - 4) == load<u32>(at, 12) &&
      lineCmp(at - 16, at) == 0
    ) continue;
    if (o != out) {
      store<u8>(o, 10);
      o++;
    }
    const len = <usize> load<u32>(at, 12);
    copyLine(o, textBase + <usize> load<u32>(at, 8), len);
    o += len;
  }
  outLength = <u32> (o - out);
}

/** Shortens the output of the last compile to `len` bytes (conjunction.ts merges lines in place). */
export function truncateOut(len: u32): void {
  outLength = len;
}
