// Text output: writers at `wp` and the line records. Writers store without bounds checks: `begin`
// reserves enough for the line plus 64 bytes of slack, which the 8-byte-wide copies may overrun
// before being overwritten. A record per line: cookie (u64), text offset (u32), length (u32).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { COOKIE_NETWORK_SHIFT } from "./generated/pipeline";
import { wordAt } from "./address";
import { B_RECS, B_TEXT, capacity, N_ID, reserve } from "./layout";

export let textBase: usize = 0;
export let wp: usize = 0;
const HEX_DIGITS = "0123456789abcdef";

export function putc(c: u32): void {
  store<u8>(wp, <u8> c);
  wp++;
}

/**
 * Copies an ASCII string constant (UTF-16 in static memory) 8 characters per step, narrowing
 * them to bytes with SIMD; may read past the string and write up to 7 bytes past the text.
 */
export function puts(s: string): void {
  const p = changetype<usize>(s);
  const n = <usize> s.length;
  if (ASC_FEATURE_SIMD) {
    for (let i: usize = 0; i < n; i += 8) {
      const v = v128.load(p + (i << 1));
      v128.store64_lane(wp + i, i8x16.narrow_i16x8_u(v, v), 0);
    }
  } else {
    for (let i: usize = 0; i < n; i++) store<u8>(wp + i, load<u8>(p + (i << 1)));
  }
  wp += n;
}

export function putDec(v: u32): void {
  if (v < 10) {
    putc(48 + v);
    return;
  }
  let digits: usize = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  wp += digits;
  let at = wp;
  do {
    at--;
    store<u8>(at, <u8> (48 + v % 10));
    v /= 10;
  } while (v != 0);
}

function hexChar(v: u32): u32 {
  return <u32> load<u16>(changetype<usize>(HEX_DIGITS) + (<usize> (v & 15) << 1));
}

/** The hex digits of `v` without leading zeros and without `0x` (an IPv6 group). */
export function putHexDigits(v: u32): void {
  for (let shift = (31 - <i32> clz(v | 1)) & ~3; shift >= 0; shift -= 4) {
    putc(hexChar(v >>> <u32> shift));
  }
}

/** `0x` and the hex digits without leading zeros. */
export function putHex(v: u64): void {
  putc(48);
  putc(120);
  // From the highest non-zero digit (digit 0 for 0).
  for (let shift = (63 - <i32> clz(v | 1)) & ~3; shift >= 0; shift -= 4) {
    putc(hexChar(<u32> (v >>> <u64> shift)));
  }
}

/** The 16 hex digits of `v`, leading zeros included (a cookie). */
function putHex16(v: u64): void {
  if (ASC_FEATURE_SIMD) {
    // All 16 digits at once: each byte twice, most significant first, split into its nibbles
    // (high nibble on even lanes), each nibble looked up in the digits.
    const bytes = i8x16.swizzle(
      i64x2.splat(<i64> v),
      i8x16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
    );
    const odd = i16x8.splat(<i16> 0xff00);
    const nibbles = v128.bitselect(
      v128.and(bytes, i8x16.splat(15)),
      i8x16.shr_u(bytes, 4),
      odd,
    );
    const digits = i8x16(48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 97, 98, 99, 100, 101, 102);
    v128.store(wp, i8x16.swizzle(digits, nibbles));
    wp += 16;
  } else {
    for (let shift: i32 = 60; shift >= 0; shift -= 4) putc(hexChar(<u32> (v >>> <u64> shift)));
  }
}

/** Copies a text slot (length byte, then characters) of `size` bytes, 8 bytes at a time. */
export function putSlot(slot: usize, size: usize): void {
  const len = <usize> load<u8>(slot);
  for (let i: usize = 0; i < size; i += 8) store<u64>(wp + i, load<u64>(slot + 1 + i));
  wp += len;
}

/** Copies the 17 characters of a MAC (stored in 24 bytes). */
export function putMac(at: usize): void {
  store<u64>(wp, load<u64>(at));
  store<u64>(wp, load<u64>(at, 8), 8);
  store<u64>(wp, load<u64>(at, 16), 16);
  wp += 17;
}

/** Writes the 17 characters of a MAC at `at`. */
export function macText(at: usize, v: u64): void {
  for (let i: usize = 0; i < 6; i++) {
    const b = <u32> (v >>> <u64> (40 - 8 * i)) & 0xff;
    store<u8>(at + i * 3, <u8> hexChar(b >>> 4));
    store<u8>(at + i * 3 + 1, <u8> hexChar(b));
    if (i < 5) store<u8>(at + i * 3 + 2, 58);
  }
}

/** Writes a dotted quad at `wp`. */
export function putIpv4(v: u32): void {
  putDec(v >>> 24);
  putc(46);
  putDec((v >>> 16) & 255);
  putc(46);
  putDec((v >>> 8) & 255);
  putc(46);
  putDec(v & 255);
}

/** Formats WORDS as OVS prints them (glibc inet_ntop), at `wp`. */
export function putIpv6(): void {
  let bestBase: i32 = -1;
  let bestLen: i32 = 0;
  let curBase: i32 = -1;
  let curLen: i32 = 0;
  for (let i = 0; i < 8; i++) {
    if (wordAt(i) == 0) {
      if (curBase < 0) {
        curBase = i;
        curLen = 1;
      } else {
        curLen++;
      }
    } else if (curBase >= 0) {
      if (bestBase < 0 || curLen > bestLen) {
        bestBase = curBase;
        bestLen = curLen;
      }
      curBase = -1;
    }
  }
  if (curBase >= 0 && (bestBase < 0 || curLen > bestLen)) {
    bestBase = curBase;
    bestLen = curLen;
  }
  if (bestBase >= 0 && bestLen < 2) bestBase = -1;
  for (let i = 0; i < 8; i++) {
    if (bestBase >= 0 && i >= bestBase && i < bestBase + bestLen) {
      if (i == bestBase) putc(58);
      continue;
    }
    if (i != 0) putc(58);
    if (i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && wordAt(5) == 0xffff))) {
      putIpv4((wordAt(6) << 16) | wordAt(7));
      return;
    }
    const w = wordAt(i);
    let shift: i32 = 12;
    while (shift > 0 && (w >>> <u32> shift) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) putc(hexChar(w >>> <u32> shift));
  }
  if (bestBase >= 0 && bestBase + bestLen == 8) putc(58);
}

/** Moves the writer to `at` and returns where it was (keys.ts renders outside the lines). */
export function writerAt(at: usize): usize {
  const was = wp;
  wp = at;
  return was;
}

/** Writes dotted quad `v` into a text slot (length byte, then the characters). */
export function ipv4ToSlot(slot: usize, v: u32): void {
  const was = writerAt(slot + 1);
  putIpv4(v);
  store<u8>(slot, <u8> (wp - slot - 1));
  wp = was;
}

/** Writes WORDS (see putIpv6) into a text slot (length byte, then the characters). */
export function ipv6ToSlot(slot: usize): void {
  const was = writerAt(slot + 1);
  putIpv6();
  store<u8>(slot, <u8> (wp - slot - 1));
  wp = was;
}

export let recCount: u32 = 0;
let lineCookie: u64 = 0;
let lineStart: usize = 0;
let textCap: usize = 0;

/** Starts a line of at most `bound` bytes: `cookie=0x…,table=…,priority=…`. */
export function begin(net: u32, port: u32, table: u32, priority: u32, bound: usize): void {
  beginLine((<u64> net << <u64> COOKIE_NETWORK_SHIFT) | <u64> port, bound);
  puts("cookie=0x");
  putHex16(lineCookie);
  if (ASC_FEATURE_SIMD) putHeadCached(table, priority);
  else putHead(table, priority);
}

/**
 * Starts a line of at most `bound` bytes that sorts by `sortKey` (a flow's cookie), and writes
 * nothing: a flow's head is begin's, a select group's text service.ts's own.
 */
export function beginLine(sortKey: u64, bound: usize): void {
  const used = wp - textBase;
  if (used + bound + 64 > textCap) {
    textBase = reserve(B_TEXT, used + bound + 64);
    textCap = capacity(B_TEXT);
    wp = textBase + used;
  }
  lineStart = wp;
  lineCookie = sortKey;
}

function putHead(table: u32, priority: u32): void {
  puts(",table=");
  putDec(table);
  puts(",priority=");
  putDec(priority);
}

// The `,table=…,priority=…` of the last line (most lines share the previous line's), 32 bytes.
const HEAD = memory.data(32);
let headKey: u64 = 0;
let headLen: usize = 0; // 0: none

/**
 * putHead, copied in two SIMD moves when the table and priority are the previous line's (the WASM
 * build; the JavaScript build renders, since wasm2js splits a wide copy into bytes).
 */
function putHeadCached(table: u32, priority: u32): void {
  const key = (<u64> table << 32) | <u64> priority;
  if (key == headKey && headLen != 0) {
    v128.store(wp, v128.load(HEAD));
    v128.store(wp, v128.load(HEAD, 16), 16);
    wp += headLen;
    return;
  }
  const start = wp;
  putHead(table, priority);
  headKey = key;
  headLen = wp - start <= 32 ? wp - start : 0;
  v128.store(HEAD, v128.load(start));
  v128.store(HEAD, v128.load(start, 16), 16);
}

export function end(): void {
  const recs = reserve(B_RECS, (<usize> recCount + 1) << 4);
  const at = recs + (<usize> recCount << 4);
  store<u64>(at, lineCookie);
  store<u32>(at, <u32> (lineStart - textBase), 8);
  store<u32>(at, <u32> (wp - lineStart), 12);
  recCount++;
}

export const LINE_BOUND: usize = 512;

export function putNet(n: usize): void {
  putHex(load<u32>(n, N_ID));
}

/** Ends an action list: drops its trailing comma, or says `drop` when it is empty. */
export function actionsEnd(start: usize): void {
  if (wp == start) puts("drop");
  else if (load<u8>(wp - 1) == 44) wp--;
}

/** Starts a compile: no lines, the text area (also scratch for addresses while parsing). */
export function textInit(): void {
  recCount = 0;
  textBase = reserve(B_TEXT, 4096);
  textCap = capacity(B_TEXT);
  wp = textBase;
}

/** Drops the scratch text of the parsing: the lines start at the beginning of the area. */
export function textRewind(): void {
  wp = textBase;
}
