// AssemblyScript source of the OpenFlow rule compiler (see ../../agent/PIPELINE.md); built by
// ../build.ts, loaded by ../flows.ts. ../flows_ts.ts is its plain TypeScript twin: same checks in
// the same order, same lines. Keep the two in step.
//
// ../flows.ts checks the shape of the model (types and ranges of single fields) and writes it
// into the input area as u32 words plus one blob of ASCII strings read in order (layout at
// `compile`). Everything else happens here: address syntax, references and uniqueness, then the
// lines, sorted by (cookie, text) and without duplicates, joined by "\n" into the output area.
//
// No managed objects: every array is a growable buffer in linear memory (heap.realloc on the TLSF
// heap of --runtime minimal), kept from one call to the next. No decorators (see bitmap.ts).

// ---- Constants mirrored from ../flows_ts.ts (FLOW_TABLES, PRIORITY, ERR, KIND).

const T_CLASSIFY: u32 = 0;
const T_SPOOF: u32 = 10;
const T_ARP: u32 = 20;
const T_ARP_REPLY: u32 = 21;
const T_FORWARD: u32 = 30;

const P_EXCEPTION: u32 = 110;
const P_GUARD: u32 = 105;
const P_SPECIFIC: u32 = 100;
const P_FLOOD_IN: u32 = 90;
const P_FROM_OUTSIDE: u32 = 80;
const P_REMOTE: u32 = 70;
const P_FLOOD: u32 = 50;
const P_UNKNOWN: u32 = 10;
const P_DEFAULT: u32 = 0;

const E_DUP_NETWORK: i32 = 1;
const E_DUP_VNI: i32 = 2;
const E_DUP_SEGMENT: i32 = 3;
const E_PHYSNET_IS_TUNNEL: i32 = 4;
const E_UNKNOWN_NETWORK: i32 = 5;
const E_OFPORT_IS_TUNNEL: i32 = 6;
const E_OFPORT_IS_PHYSNET: i32 = 7;
const E_DUP_OFPORT: i32 = 8;
const E_DUP_COOKIE: i32 = 9;
const E_BAD_MAC: i32 = 10;
const E_DUP_MAC: i32 = 11;
const E_BAD_IP: i32 = 12;
const E_DUP_IP: i32 = 13;
const E_BAD_NODE_IP: i32 = 14;

const K_NETWORK: u32 = 0;
const K_LOCAL: u32 = 1;
const K_REMOTE: u32 = 2;

const VXLAN: u32 = 0;
const VLAN: u32 = 1;

/** Local port i owns an address as i, remote port j as REMOTE_REF + j (as in the twin). */
const REMOTE_REF: u32 = 1 << 30;

// ---- Growable buffers: a table of (pointer, capacity) pairs in static memory.

const B_INPUT = 0;
const B_NETS = 1;
const B_LOCALS = 2;
const B_REMOTES = 3;
const B_V4 = 4;
const B_V6 = 5;
const B_HASH = 6;
const B_NET_ORDER = 7;
const B_LOCAL_ORDER = 8;
const B_REMOTE_ORDER = 9;
const B_NODES = 10;
const B_SORT_TMP = 11;
const B_TEXT = 12;
const B_RECS = 13;
const B_RECS_TMP = 14;
const B_OUT = 15;
const BUFFERS = memory.data(16 * 8);

function buffer(id: i32): usize {
  return <usize> load<u32>(BUFFERS + (<usize> id << 3));
}

function capacity(id: i32): usize {
  return <usize> load<u32>(BUFFERS + (<usize> id << 3), 4);
}

/** Grows buffer `id` to at least `bytes` (keeping its contents) and returns its address. */
function reserve(id: i32, bytes: usize): usize {
  const at = BUFFERS + (<usize> id << 3);
  let ptr = <usize> load<u32>(at);
  const cap = <usize> load<u32>(at, 4);
  if (bytes > cap) {
    let size: usize = cap < 4096 ? 4096 : cap;
    while (size < bytes) size <<= 1;
    ptr = ptr == 0 ? heap.alloc(size) : heap.realloc(ptr, size);
    store<u32>(at, <u32> ptr);
    store<u32>(at, <u32> size, 4);
  }
  return ptr;
}

// ---- Records (byte offsets of their fields).

// Network, 64 bytes.
const NET_SIZE: usize = 64;
const N_ID = 0;
const N_TYPE = 4;
const N_SEGMENT = 8;
const N_PHYSNET = 12;
const N_LOCAL_FIRST = 16; // into B_LOCAL_ORDER
const N_LOCAL_COUNT = 20;
const N_REMOTE_FIRST = 24; // into B_REMOTE_ORDER
const N_REMOTE_COUNT = 28;
const N_NODE_FIRST = 32; // into B_NODES
const N_NODE_COUNT = 36;

// Local port, 64 bytes; the MAC as its 17 characters and as a number (what ARP replies stash).
const LOCAL_SIZE: usize = 64;
const L_OFPORT = 0;
const L_NET = 4;
const L_COOKIE = 8;
const L_V4_FIRST = 12;
const L_V4_COUNT = 16;
const L_V6_FIRST = 20;
const L_V6_COUNT = 24;
const L_MAC_TEXT = 32;
const L_MAC = 56;

// Remote port, 64 bytes; the node IP as text slot, the MAC as its 17 characters and a number.
const REMOTE_SIZE: usize = 64;
const R_NET = 0;
const R_V4_FIRST = 4;
const R_V4_COUNT = 8;
const R_NODE = 12;
const R_NODE_TEXT = 16; // 16-byte text slot (see putSlot)
const R_MAC_TEXT = 32;
const R_MAC = 56;

// Address texts: slots of a length byte and the characters (IPv4 16 bytes, IPv6 48 bytes).
const V4_SLOT: usize = 16;
const V6_SLOT: usize = 48;

// ---- Input.

let rd: usize = 0; // next word
let blob: usize = 0; // next string byte

function word(): u32 {
  const v = load<u32>(rd);
  rd += 4;
  return v;
}

/** Returns the input area for `bytes` bytes of words and strings (called by ../flows.ts). */
export function input(bytes: u32): usize {
  return reserve(B_INPUT, <usize> bytes);
}

// ---- Errors: a code and five arguments (see flowError in ../flows_ts.ts).

const ERROR_ARGS = memory.data(5 * 4);

function fail(code: i32, kind: u32, index: u32, sub: u32, otherKind: u32, other: u32): i32 {
  store<u32>(ERROR_ARGS, kind);
  store<u32>(ERROR_ARGS, index, 4);
  store<u32>(ERROR_ARGS, sub, 8);
  store<u32>(ERROR_ARGS, otherKind, 12);
  store<u32>(ERROR_ARGS, other, 16);
  return code;
}

/** Argument i (0..4) of the last error: kind, index, sub-index, other kind, other index. */
export function errorArg(i: i32): u32 {
  return load<u32>(ERROR_ARGS + (<usize> i << 2));
}

function refKind(ref: u32): u32 {
  return ref >= REMOTE_REF ? K_REMOTE : K_LOCAL;
}

function refIndex(ref: u32): u32 {
  return ref >= REMOTE_REF ? ref - REMOTE_REF : ref;
}

// ---- Uniqueness: one open-addressing table of 32-byte slots (k0, k1, k2, owner), k0 != 0.

const H_NET_ID: u64 = 1;
const H_VNI: u64 = 2;
const H_SEGMENT: u64 = 3;
const H_PHYSNET: u64 = 4;
const H_OFPORT: u64 = 5;
const H_COOKIE: u64 = 6;
const H_MAC: u64 = 7;
const H_IP4: u64 = 8;
const H_IP6: u64 = 9;

const NONE: u32 = 0xffffffff;
let hashBase: usize = 0;
let hashMask: u32 = 0;

function hashInit(entries: u32): void {
  let cap: u32 = 64;
  // Load ≤ 2/3 (entries is an upper bound); a smaller table means fewer cache misses.
  while (cap < entries + (entries >>> 1)) cap <<= 1;
  hashBase = reserve(B_HASH, <usize> cap << 5);
  memory.fill(hashBase, 0, <usize> cap << 5);
  hashMask = cap - 1;
}

function key0(tag: u64, net: u32): u64 {
  return (tag << 32) | <u64> net;
}

/** The owner of key (k0, k1, k2); when there is none, makes it `owner` and returns NONE. */
function claim(k0: u64, k1: u64, k2: u64, owner: u32): u32 {
  let h = (k0 ^ (k1 * 0x9e3779b97f4a7c15) ^ (k2 * 0xc2b2ae3d27d4eb4f)) * 0xff51afd7ed558ccd;
  h ^= h >>> 29;
  let i = <u32> h & hashMask;
  while (true) {
    const slot = hashBase + (<usize> i << 5);
    const s0 = load<u64>(slot);
    if (s0 == 0) {
      store<u64>(slot, k0);
      store<u64>(slot, k1, 8);
      store<u64>(slot, k2, 16);
      store<u32>(slot, owner, 24);
      return NONE;
    }
    if (s0 == k0 && load<u64>(slot, 8) == k1 && load<u64>(slot, 16) == k2) {
      return load<u32>(slot, 24);
    }
    i = (i + 1) & hashMask;
  }
}

/** The owner of a key, or NONE (nothing inserted). */
function owner(k0: u64, k1: u64): u32 {
  let h = (k0 ^ (k1 * 0x9e3779b97f4a7c15)) * 0xff51afd7ed558ccd;
  h ^= h >>> 29;
  let i = <u32> h & hashMask;
  while (true) {
    const slot = hashBase + (<usize> i << 5);
    const s0 = load<u64>(slot);
    if (s0 == 0) return NONE;
    if (s0 == k0 && load<u64>(slot, 8) == k1 && load<u64>(slot, 16) == 0) {
      return load<u32>(slot, 24);
    }
    i = (i + 1) & hashMask;
  }
}

// ---- Address syntax (same rules as parseMac / parseIpv4 / parseIpv6 in ../flows_ts.ts).

function hexDigit(c: u32): i32 {
  if (c - 48 < 10) return <i32> (c - 48);
  const l = (c | 0x20) - 97;
  return l < 6 ? <i32> l + 10 : -1;
}

/** `xx:xx:xx:xx:xx:xx` as 48 bits; -1 unless unicast and not zero. */
function parseMac(p: usize, len: u32): i64 {
  if (len != 17) return -1;
  let v: u64 = 0;
  for (let i: usize = 0; i < 6; i++) {
    const h = hexDigit(load<u8>(p + i * 3));
    const l = hexDigit(load<u8>(p + i * 3 + 1));
    if ((h | l) < 0) return -1;
    if (i < 5 && load<u8>(p + i * 3 + 2) != 58) return -1;
    v = (v << 8) | <u64> ((h << 4) | l);
  }
  if (v == 0 || ((v >>> 40) & 1) != 0) return -1;
  return <i64> v;
}

/** Dotted quad without leading zeros; -1 when malformed. */
function parseIpv4(p: usize, len: u32): i64 {
  let v: u32 = 0;
  let parts: u32 = 0;
  let cur: u32 = 0;
  let digits: u32 = 0;
  for (let i: u32 = 0; i < len; i++) {
    const c = <u32> load<u8>(p + i);
    if (c - 48 < 10) {
      if (digits > 0 && cur == 0) return -1;
      cur = cur * 10 + c - 48;
      if (++digits > 3) return -1;
    } else if (c == 46) {
      if (digits == 0 || cur > 255 || parts == 3) return -1;
      v = (v << 8) | cur;
      parts++;
      cur = 0;
      digits = 0;
    } else {
      return -1;
    }
  }
  if (digits == 0 || cur > 255 || parts != 3) return -1;
  return <i64> ((v << 8) | cur);
}

function unicastIpv4(v: u32): bool {
  const first = v >>> 24;
  return first != 0 && first != 127 && first < 224;
}

// The 8 words of the IPv6 address being parsed or formatted.
const WORDS = memory.data(16);

function wordAt(i: i32): u32 {
  return <u32> load<u16>(WORDS + (<usize> i << 1));
}

function setWord(i: i32, v: u32): void {
  store<u16>(WORDS + (<usize> i << 1), <u16> v);
}

/** RFC 4291 text into WORDS; false when malformed. */
function parseIpv6(p: usize, len: u32): bool {
  let n: i32 = 0;
  let gap: i32 = -1;
  let i: u32 = 0;
  if (len >= 2 && load<u8>(p) == 58 && load<u8>(p + 1) == 58) {
    gap = 0;
    i = 2;
  }
  while (i < len) {
    const start = i;
    let v: u32 = 0;
    let digits: u32 = 0;
    for (; i < len && digits < 5; i++) {
      const d = hexDigit(load<u8>(p + i));
      if (d < 0) break;
      v = (v << 4) | <u32> d;
      digits++;
    }
    if (i < len && load<u8>(p + i) == 46) {
      // An IPv4 tail fills the last two words; nothing may follow it.
      if (n > 6) return false;
      const v4 = parseIpv4(p + start, len - start);
      if (v4 < 0) return false;
      setWord(n++, <u32> v4 >>> 16);
      setWord(n++, <u32> v4 & 0xffff);
      i = len;
      break;
    }
    if (digits == 0 || digits > 4 || n == 8) return false;
    setWord(n++, v);
    if (i == len) break;
    if (load<u8>(p + i) != 58) return false;
    i++;
    if (i < len && load<u8>(p + i) == 58) {
      if (gap >= 0) return false;
      gap = n;
      i++;
    } else if (i == len) {
      return false;
    }
  }
  if (gap < 0) return n == 8;
  // `::` stands for at least one zero word.
  if (n == 8) return false;
  const tail = n - gap;
  for (let k = 1; k <= tail; k++) setWord(8 - k, wordAt(n - k));
  for (let k = gap; k < 8 - tail; k++) setWord(k, 0);
  return true;
}

/** Not ::, ::1, multicast or IPv4-mapped. */
function unicastIpv6(): bool {
  if (wordAt(0) >>> 8 == 0xff) return false;
  if ((wordAt(0) | wordAt(1) | wordAt(2) | wordAt(3) | wordAt(4)) != 0) return true;
  if (wordAt(5) == 0xffff) return false;
  return (wordAt(5) | wordAt(6)) != 0 || wordAt(7) > 1;
}

// ---- Text output. Writers store at `wp` without bounds checks: `begin` reserves enough for the
// line plus 64 bytes of slack, which the 8-byte-wide copies may overrun before being overwritten.

let textBase: usize = 0;
let wp: usize = 0;

const HEX_DIGITS = "0123456789abcdef";

function putc(c: u32): void {
  store<u8>(wp, <u8> c);
  wp++;
}

/**
 * Copies an ASCII string constant (UTF-16 in static memory) 8 characters per step, narrowing
 * them to bytes with SIMD; may read past the string and write up to 7 bytes past the text.
 */
function puts(s: string): void {
  const p = changetype<usize>(s);
  const n = <usize> s.length;
  for (let i: usize = 0; i < n; i += 8) {
    const v = v128.load(p + (i << 1));
    v128.store64_lane(wp + i, i8x16.narrow_i16x8_u(v, v), 0);
  }
  wp += n;
}

function putDec(v: u32): void {
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

/** `0x` and the hex digits without leading zeros. */
function putHex(v: u64): void {
  putc(48);
  putc(120);
  // From the highest non-zero digit (digit 0 for 0).
  for (let shift = (63 - <i32> clz(v | 1)) & ~3; shift >= 0; shift -= 4) {
    putc(hexChar(<u32> (v >>> <u64> shift)));
  }
}

/** Copies a text slot (length byte, then characters) of `size` bytes, 8 bytes at a time. */
function putSlot(slot: usize, size: usize): void {
  const len = <usize> load<u8>(slot);
  for (let i: usize = 0; i < size; i += 8) store<u64>(wp + i, load<u64>(slot + 1 + i));
  wp += len;
}

/** Copies the 17 characters of a MAC (stored in 24 bytes). */
function putMac(at: usize): void {
  store<u64>(wp, load<u64>(at));
  store<u64>(wp, load<u64>(at, 8), 8);
  store<u64>(wp, load<u64>(at, 16), 16);
  wp += 17;
}

/** Writes the 17 characters of a MAC at `at`. */
function macText(at: usize, v: u64): void {
  for (let i: usize = 0; i < 6; i++) {
    const b = <u32> (v >>> <u64> (40 - 8 * i)) & 0xff;
    store<u8>(at + i * 3, <u8> hexChar(b >>> 4));
    store<u8>(at + i * 3 + 1, <u8> hexChar(b));
    if (i < 5) store<u8>(at + i * 3 + 2, 58);
  }
}

/** Writes a dotted quad at `wp`. */
function putIpv4(v: u32): void {
  putDec(v >>> 24);
  putc(46);
  putDec((v >>> 16) & 255);
  putc(46);
  putDec((v >>> 8) & 255);
  putc(46);
  putDec(v & 255);
}

/** Formats WORDS as OVS prints them (glibc inet_ntop), at `wp`. */
function putIpv6(): void {
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

/** Renders the text at `wp` into a slot: length byte, then the characters. */
function toSlot(slot: usize, start: usize): void {
  const len = wp - start;
  store<u8>(slot, <u8> len);
  memory.copy(slot + 1, start, len);
  wp = start;
}

// ---- Lines. A record per line: cookie (u64), text offset (u32), length (u32).

let recCount: u32 = 0;
let outLength: u32 = 0;
let lineCookie: u64 = 0;
let lineStart: usize = 0;
let textCap: usize = 0;

/** Starts a line of at most `bound` bytes: `cookie=0x…,table=…,priority=…`. */
function begin(net: u32, port: u32, table: u32, priority: u32, bound: usize): void {
  const used = wp - textBase;
  if (used + bound + 64 > textCap) {
    textBase = reserve(B_TEXT, used + bound + 64);
    textCap = capacity(B_TEXT);
    wp = textBase + used;
  }
  lineStart = wp;
  lineCookie = (<u64> net << 32) | <u64> port;
  puts("cookie=0x");
  for (let shift: i32 = 60; shift >= 0; shift -= 4) {
    putc(hexChar(<u32> (lineCookie >>> <u64> shift)));
  }
  puts(",table=");
  putDec(table);
  puts(",priority=");
  putDec(priority);
}

function end(): void {
  const recs = reserve(B_RECS, (<usize> recCount + 1) << 4);
  const at = recs + (<usize> recCount << 4);
  store<u64>(at, lineCookie);
  store<u32>(at, <u32> (lineStart - textBase), 8);
  store<u32>(at, <u32> (wp - lineStart), 12);
  recCount++;
}

const LINE_BOUND: usize = 512;

// ---- The model, parsed.

let tunnelPort: u32 = 0;
let netCount: u32 = 0;
let nets: usize = 0;
let locals: usize = 0;
let remotes: usize = 0;
let v4Texts: usize = 0;
let v6Texts: usize = 0;

function net(i: u32): usize {
  return nets + <usize> i * NET_SIZE;
}

function local(i: u32): usize {
  return locals + <usize> i * LOCAL_SIZE;
}

function remote(i: u32): usize {
  return remotes + <usize> i * REMOTE_SIZE;
}

function localAt(order: u32): usize {
  return local(<u32> load<u64>(buffer(B_LOCAL_ORDER) + (<usize> order << 3)));
}

function remoteAt(order: u32): usize {
  return remote(<u32> load<u64>(buffer(B_REMOTE_ORDER) + (<usize> order << 3)));
}

function v4Slot(i: u32): usize {
  return v4Texts + <usize> i * V4_SLOT;
}

function v6Slot(i: u32): usize {
  return v6Texts + <usize> i * V6_SLOT;
}

// ---- One builder per flow kind, as in ../flows_ts.ts.

function putNet(n: usize): void {
  putHex(load<u32>(n, N_ID));
}

function classifyLocal(n: usize, p: usize): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_CLASSIFY, P_SPECIFIC, LINE_BOUND);
  puts(",in_port=");
  putDec(load<u32>(p, L_OFPORT));
  puts(",vlan_tci=0x0000/0x1fff,actions=set_field:");
  putNet(n);
  puts("->reg0,set_field:");
  putHex(load<u32>(p, L_COOKIE));
  puts("->reg1,goto_table:");
  putDec(T_SPOOF);
  end();
}

function classifyTunnel(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_CLASSIFY, P_SPECIFIC, LINE_BOUND);
  puts(",tun_id=");
  putHex(load<u32>(n, N_SEGMENT));
  puts(",in_port=");
  putDec(tunnelPort);
  puts(",vlan_tci=0x0000/0x1fff,actions=set_field:");
  putNet(n);
  puts("->reg0,goto_table:");
  putDec(T_FORWARD);
  end();
}

function classifyPhysnet(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_CLASSIFY, P_SPECIFIC, LINE_BOUND);
  puts(",in_port=");
  putDec(load<u32>(n, N_PHYSNET));
  if (load<u32>(n, N_TYPE) == VLAN) {
    puts(",dl_vlan=");
    putDec(load<u32>(n, N_SEGMENT));
    puts(",actions=pop_vlan,set_field:");
  } else {
    puts(",vlan_tci=0x0000/0x1fff,actions=set_field:");
  }
  putNet(n);
  puts("->reg0,goto_table:");
  putDec(T_FORWARD);
  end();
}

function spoofHead(n: usize, p: usize, proto: string): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_SPOOF, P_SPECIFIC, LINE_BOUND);
  puts(proto);
  putDec(load<u32>(p, L_OFPORT));
  puts(",dl_src=");
  putMac(p + L_MAC_TEXT);
}

function spoofIpv4(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, ",ip,in_port=");
  puts(",nw_src=");
  putSlot(ip, V4_SLOT);
  puts(",actions=goto_table:");
  putDec(T_ARP);
  end();
}

/** ARP from the port's MAC and IPv4; `ip` 0 stands for 0.0.0.0 (ARP probe, RFC 5227). */
function spoofArp(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, ",arp,in_port=");
  puts(",arp_spa=");
  if (ip == 0) puts("0.0.0.0");
  else putSlot(ip, V4_SLOT);
  puts(",arp_sha=");
  putMac(p + L_MAC_TEXT);
  puts(",actions=goto_table:");
  putDec(T_ARP);
  end();
}

/** IPv6 from the port's MAC and one of its addresses; `ip` 0 stands for fe80::/10. */
function spoofIpv6(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, ",ipv6,in_port=");
  puts(",ipv6_src=");
  if (ip == 0) puts("fe80::/10");
  else putSlot(ip, V6_SLOT);
  puts(",actions=goto_table:");
  putDec(T_ARP);
  end();
}

function spoofDad(n: usize, p: usize): void {
  spoofHead(n, p, ",icmp6,in_port=");
  puts(",ipv6_src=::,icmp_type=135,icmp_code=0,actions=goto_table:");
  putDec(T_ARP);
  end();
}

function regs(n: usize, p: usize, proto: string): void {
  puts(proto);
  putNet(n);
  puts(",reg1=");
  putHex(load<u32>(p, L_COOKIE));
}

function arpOwner(n: usize, p: usize, ip: usize): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_ARP, P_EXCEPTION, LINE_BOUND);
  regs(n, p, ",arp,reg0=");
  puts(",arp_tpa=");
  putSlot(ip, V4_SLOT);
  puts(",arp_op=1,actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

/** A request for `ip`: the answering MAC into xreg1, then the shared reply (arpReplyShared). */
function arpReply(n: usize, port: u32, mac: u64, ip: usize): void {
  begin(load<u32>(n, N_ID), port, T_ARP, P_SPECIFIC, LINE_BOUND);
  puts(",arp,reg0=");
  putNet(n);
  puts(",arp_tpa=");
  putSlot(ip, V4_SLOT);
  puts(",arp_op=1,actions=set_field:");
  putHex(mac);
  puts("->xreg1,goto_table:");
  putDec(T_ARP_REPLY);
  end();
}

/** The reply from the MAC in xreg1, IPs swapped through reg4 (ARP_REPLY_ACTIONS of the twin). */
function arpReplyShared(): void {
  begin(0, 0, T_ARP_REPLY, P_DEFAULT, LINE_BOUND);
  puts(",arp,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]");
  puts(",move:OXM_OF_PKT_REG1[0..47]->NXM_OF_ETH_SRC[],set_field:2->arp_op");
  puts(",move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:OXM_OF_PKT_REG1[0..47]->NXM_NX_ARP_SHA[]");
  puts(",move:NXM_OF_ARP_TPA[]->NXM_NX_REG4[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]");
  puts(",move:NXM_NX_REG4[]->NXM_OF_ARP_SPA[],IN_PORT");
  end();
}

/** Neighbour solicitation carrying the port's MAC, or none (`own` false: 00:…). */
function ndSolicit(n: usize, p: usize, own: bool): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_ARP, P_EXCEPTION, LINE_BOUND);
  regs(n, p, ",icmp6,reg0=");
  puts(",icmp_type=135,icmp_code=0,nd_sll=");
  if (own) putMac(p + L_MAC_TEXT);
  else puts("00:00:00:00:00:00");
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

/** Neighbour advertisement of an address (`ip` 0: fe80::/10) for the port's MAC or none. */
function ndAdvert(n: usize, p: usize, ip: usize, own: bool): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_ARP, P_EXCEPTION, LINE_BOUND);
  regs(n, p, ",icmp6,reg0=");
  puts(",icmp_type=136,icmp_code=0,nd_target=");
  if (ip == 0) puts("fe80::/10");
  else putSlot(ip, V6_SLOT);
  puts(",nd_tll=");
  if (own) putMac(p + L_MAC_TEXT);
  else puts("00:00:00:00:00:00");
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

function ndGuard(n: usize, type: u32): void {
  begin(load<u32>(n, N_ID), 0, T_ARP, P_GUARD, LINE_BOUND);
  puts(",icmp6,reg0=");
  putNet(n);
  puts(",icmp_type=");
  putDec(type);
  puts(",actions=drop");
  end();
}

function forwardLocal(n: usize, p: usize): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), T_FORWARD, P_SPECIFIC, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(p + L_MAC_TEXT);
  puts(",actions=output:");
  putDec(load<u32>(p, L_OFPORT));
  end();
}

/** `output:P,` for every local port of the network, by ofport. */
function localOutputs(n: usize): void {
  const first = load<u32>(n, N_LOCAL_FIRST);
  const last = first + load<u32>(n, N_LOCAL_COUNT);
  for (let i = first; i < last; i++) {
    puts("output:");
    putDec(load<u32>(localAt(i), L_OFPORT));
    putc(44);
  }
}

function toPhysnet(n: usize): void {
  if (load<u32>(n, N_TYPE) == VLAN) {
    puts("push_vlan:0x8100,set_field:");
    putDec(4096 + load<u32>(n, N_SEGMENT));
    puts("->vlan_vid,");
  }
  puts("output:");
  putDec(load<u32>(n, N_PHYSNET));
}

/** Ends an action list: drops its trailing comma, or says `drop` when it is empty. */
function actionsEnd(start: usize): void {
  if (wp == start) puts("drop");
  else if (load<u8>(wp - 1) == 44) wp--;
}

function floodBound(n: usize): usize {
  return LINE_BOUND + <usize> load<u32>(n, N_LOCAL_COUNT) * 16 +
    <usize> load<u32>(n, N_NODE_COUNT) * 64;
}

function floodIn(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_FORWARD, P_FLOOD_IN, floodBound(n));
  puts(",reg0=");
  putNet(n);
  puts(",reg1=0,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=");
  const start = wp;
  localOutputs(n);
  actionsEnd(start);
  end();
}

function fromOutside(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_FORWARD, P_FROM_OUTSIDE, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",reg1=0,actions=drop");
  end();
}

function forwardRemote(n: usize, r: usize): void {
  begin(load<u32>(n, N_ID), 0, T_FORWARD, P_REMOTE, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(r + R_MAC_TEXT);
  puts(",actions=");
  if (load<u32>(n, N_TYPE) == VXLAN) {
    puts("set_field:");
    putHex(load<u32>(n, N_SEGMENT));
    puts("->tun_id,set_field:");
    putSlot(r + R_NODE_TEXT, V4_SLOT);
    puts("->tun_dst,output:");
    putDec(tunnelPort);
  } else {
    toPhysnet(n);
  }
  end();
}

function flood(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_FORWARD, P_FLOOD, floodBound(n));
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=");
  const start = wp;
  localOutputs(n);
  if (load<u32>(n, N_TYPE) != VXLAN) {
    toPhysnet(n);
  } else if (load<u32>(n, N_NODE_COUNT) > 0) {
    puts("set_field:");
    putHex(load<u32>(n, N_SEGMENT));
    puts("->tun_id");
    const nodes = buffer(B_NODES);
    const first = load<u32>(n, N_NODE_FIRST);
    const last = first + load<u32>(n, N_NODE_COUNT);
    for (let i = first; i < last; i++) {
      puts(",set_field:");
      putIpv4(<u32> load<u64>(nodes + (<usize> i << 3)));
      puts("->tun_dst,output:");
      putDec(tunnelPort);
    }
  }
  actionsEnd(start);
  end();
}

function unknownUnicast(n: usize): void {
  begin(load<u32>(n, N_ID), 0, T_FORWARD, P_UNKNOWN, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",actions=");
  toPhysnet(n);
  end();
}

function defaults(): void {
  begin(0, 0, T_CLASSIFY, P_DEFAULT, LINE_BOUND);
  puts(",actions=drop");
  end();
  begin(0, 0, T_SPOOF, P_DEFAULT, LINE_BOUND);
  puts(",actions=drop");
  end();
  begin(0, 0, T_ARP, P_DEFAULT, LINE_BOUND);
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
  arpReplyShared();
  begin(0, 0, T_FORWARD, P_DEFAULT, LINE_BOUND);
  puts(",actions=drop");
  end();
}

// The builders run in the order their lines sort in (by table, then text) as far as it is known
// without looking at the addresses, so that sorting has little left to do.

function localFlows(n: usize, p: usize): void {
  classifyLocal(n, p);
  const cookie = load<u32>(p, L_COOKIE);
  const v4 = load<u32>(p, L_V4_FIRST);
  const v4End = v4 + load<u32>(p, L_V4_COUNT);
  const v6 = load<u32>(p, L_V6_FIRST);
  const v6End = v6 + load<u32>(p, L_V6_COUNT);
  if (v4End > v4) spoofArp(n, p, 0);
  for (let i = v4; i < v4End; i++) spoofArp(n, p, v4Slot(i));
  if (v6End > v6) spoofDad(n, p);
  for (let i = v4; i < v4End; i++) spoofIpv4(n, p, v4Slot(i));
  // One past the IPv6 addresses stands for link-local (fe80::/10).
  if (v6End > v6) { for (let i = v6; i <= v6End; i++) spoofIpv6(n, p, i < v6End ? v6Slot(i) : 0); }
  for (let i = v4; i < v4End; i++) arpReply(n, cookie, load<u64>(p, L_MAC), v4Slot(i));
  for (let i = v4; i < v4End; i++) arpOwner(n, p, v4Slot(i));
  if (v6End > v6) {
    ndSolicit(n, p, false);
    ndSolicit(n, p, true);
    for (let i = v6; i <= v6End; i++) {
      const ip = i < v6End ? v6Slot(i) : 0;
      ndAdvert(n, p, ip, false);
      ndAdvert(n, p, ip, true);
    }
  }
  forwardLocal(n, p);
}

function networkFlows(n: usize): void {
  const vxlan = load<u32>(n, N_TYPE) == VXLAN;
  if (vxlan) classifyTunnel(n);
  else classifyPhysnet(n);
  const rFirst = load<u32>(n, N_REMOTE_FIRST);
  const rLast = rFirst + load<u32>(n, N_REMOTE_COUNT);
  for (let i = rFirst; i < rLast; i++) {
    const r = remoteAt(i);
    const v4 = load<u32>(r, R_V4_FIRST);
    const v4End = v4 + load<u32>(r, R_V4_COUNT);
    const mac = load<u64>(r, R_MAC);
    for (let k = v4; k < v4End; k++) arpReply(n, 0, mac, v4Slot(k));
  }
  ndGuard(n, 135);
  ndGuard(n, 136);
  if (!vxlan) unknownUnicast(n);
  flood(n);
  for (let i = rFirst; i < rLast; i++) forwardRemote(n, remoteAt(i));
  fromOutside(n);
  floodIn(n);
  const lFirst = load<u32>(n, N_LOCAL_FIRST);
  const lLast = lFirst + load<u32>(n, N_LOCAL_COUNT);
  for (let i = lFirst; i < lLast; i++) localFlows(n, localAt(i));
}

// ---- Sorting. Merge sorts that skip merging halves already in order, so the runs of lines the
// builders emit in cookie order cost little.

/** Sorts `count` u64 at `a` ascending, with `tmp` as scratch of the same size. */
function sortKeys(a: usize, tmp: usize, lo: u32, hi: u32): void {
  if (hi - lo <= 16) {
    for (let i = lo + 1; i < hi; i++) {
      const v = load<u64>(a + (<usize> i << 3));
      let j = i;
      while (j > lo && load<u64>(a + (<usize> (j - 1) << 3)) > v) {
        store<u64>(a + (<usize> j << 3), load<u64>(a + (<usize> (j - 1) << 3)));
        j--;
      }
      store<u64>(a + (<usize> j << 3), v);
    }
    return;
  }
  const mid = lo + ((hi - lo) >>> 1);
  sortKeys(a, tmp, lo, mid);
  sortKeys(a, tmp, mid, hi);
  if (load<u64>(a + (<usize> (mid - 1) << 3)) <= load<u64>(a + (<usize> mid << 3))) return;
  memory.copy(tmp + (<usize> lo << 3), a + (<usize> lo << 3), <usize> (mid - lo) << 3);
  let i = lo;
  let j = mid;
  let k = lo;
  while (i < mid && j < hi) {
    const x = load<u64>(tmp + (<usize> i << 3));
    const y = load<u64>(a + (<usize> j << 3));
    if (x <= y) {
      store<u64>(a + (<usize> k << 3), x);
      i++;
    } else {
      store<u64>(a + (<usize> k << 3), y);
      j++;
    }
    k++;
  }
  if (i < mid) memory.copy(a + (<usize> k << 3), tmp + (<usize> i << 3), <usize> (mid - i) << 3);
}

function sortU64(id: i32, count: u32): void {
  if (count < 2) return;
  sortKeys(buffer(id), reserve(B_SORT_TMP, <usize> count << 3), 0, count);
}

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

// ---- Parsing and checks, in the order of model() in ../flows_ts.ts.

let ipCount: u32 = 0;
let v4Count: u32 = 0;
let v6Count: u32 = 0;

/**
 * Parses the `count` addresses of port `ref` (kind, index) from the blob, claims them in network
 * `ni` and appends new ones to the pools; remote ports keep no IPv6 (`keepV6` false).
 */
function addresses(kind: u32, index: u32, ref: u32, ni: u32, count: u32, keepV6: bool): i32 {
  for (let k: u32 = 0; k < count; k++) {
    const len = word();
    const p = blob;
    blob += len;
    let colon = false;
    for (let i: u32 = 0; i < len; i++) {
      if (load<u8>(p + i) == 58) {
        colon = true;
        break;
      }
    }
    if (colon) {
      if (!parseIpv6(p, len) || !unicastIpv6()) return fail(E_BAD_IP, kind, index, k, 0, 0);
      const hi = (<u64> wordAt(0) << 48) | (<u64> wordAt(1) << 32) | (<u64> wordAt(2) << 16) |
        <u64> wordAt(3);
      const lo = (<u64> wordAt(4) << 48) | (<u64> wordAt(5) << 32) | (<u64> wordAt(6) << 16) |
        <u64> wordAt(7);
      const other = claim(key0(H_IP6, ni), hi, lo, ref);
      if (other == ref) continue;
      if (other != NONE) return fail(E_DUP_IP, kind, index, k, refKind(other), refIndex(other));
      if (!keepV6) continue;
      const start = wp;
      putIpv6();
      toSlot(v6Slot(v6Count++), start);
    } else {
      const v = parseIpv4(p, len);
      if (v < 0 || !unicastIpv4(<u32> v)) return fail(E_BAD_IP, kind, index, k, 0, 0);
      const other = claim(key0(H_IP4, ni), <u64> v, 0, ref);
      if (other == ref) continue;
      if (other != NONE) return fail(E_DUP_IP, kind, index, k, refKind(other), refIndex(other));
      const start = wp;
      putIpv4(<u32> v);
      toSlot(v4Slot(v4Count++), start);
    }
  }
  return 0;
}

/**
 * MAC of port `ref` from the blob, claimed in network `ni`, stored as text at `text` and as a
 * number at `bits`.
 */
function claimMac(kind: u32, index: u32, ref: u32, ni: u32, text: usize, bits: usize): i32 {
  const len = word();
  const mac = parseMac(blob, len);
  blob += len;
  if (mac < 0) return fail(E_BAD_MAC, kind, index, 0, 0, 0);
  const other = claim(key0(H_MAC, ni), <u64> mac, 0, ref);
  if (other != NONE) return fail(E_DUP_MAC, kind, index, 0, refKind(other), refIndex(other));
  macText(text, <u64> mac);
  store<u64>(bits, <u64> mac);
  return 0;
}

/** Index of the network with `id`, or NONE. */
function findNet(id: u32): u32 {
  return owner(key0(H_NET_ID, 0), <u64> id);
}

function parseNetworks(): i32 {
  for (let i: u32 = 0; i < netCount; i++) {
    const n = net(i);
    const id = word();
    const type = word();
    const segment = word();
    const physnet = word();
    memory.fill(n, 0, NET_SIZE);
    store<u32>(n, id, N_ID);
    store<u32>(n, type, N_TYPE);
    store<u32>(n, segment, N_SEGMENT);
    store<u32>(n, physnet, N_PHYSNET);
    let other = claim(key0(H_NET_ID, 0), <u64> id, 0, i);
    if (other != NONE) return fail(E_DUP_NETWORK, K_NETWORK, i, 0, K_NETWORK, other);
    if (type == VXLAN) {
      other = claim(key0(H_VNI, 0), <u64> segment, 0, i);
      if (other != NONE) return fail(E_DUP_VNI, K_NETWORK, i, 0, K_NETWORK, other);
    } else {
      if (physnet == tunnelPort) return fail(E_PHYSNET_IS_TUNNEL, K_NETWORK, i, 0, 0, 0);
      // VLAN 0 stands for the untagged traffic of a flat network.
      other = claim(key0(H_SEGMENT, 0), (<u64> physnet << 16) | <u64> segment, 0, i);
      if (other != NONE) return fail(E_DUP_SEGMENT, K_NETWORK, i, 0, K_NETWORK, other);
      claim(key0(H_PHYSNET, 0), <u64> physnet, 0, i);
    }
  }
  return 0;
}

function parseLocals(count: u32): i32 {
  for (let i: u32 = 0; i < count; i++) {
    const p = local(i);
    const ofport = word();
    const netId = word();
    const cookie = word();
    const ips = word();
    const ni = findNet(netId);
    if (ni == NONE) return fail(E_UNKNOWN_NETWORK, K_LOCAL, i, 0, 0, 0);
    if (ofport == tunnelPort) return fail(E_OFPORT_IS_TUNNEL, K_LOCAL, i, 0, 0, 0);
    let other = owner(key0(H_PHYSNET, 0), <u64> ofport);
    if (other != NONE) return fail(E_OFPORT_IS_PHYSNET, K_LOCAL, i, 0, K_NETWORK, other);
    other = claim(key0(H_OFPORT, 0), <u64> ofport, 0, i);
    if (other != NONE) return fail(E_DUP_OFPORT, K_LOCAL, i, 0, K_LOCAL, other);
    other = claim(key0(H_COOKIE, 0), <u64> cookie, 0, i);
    if (other != NONE) return fail(E_DUP_COOKIE, K_LOCAL, i, 0, K_LOCAL, other);
    store<u32>(p, ofport, L_OFPORT);
    store<u32>(p, ni, L_NET);
    store<u32>(p, cookie, L_COOKIE);
    let rc = claimMac(K_LOCAL, i, i, ni, p + L_MAC_TEXT, p + L_MAC);
    if (rc != 0) return rc;
    const v4 = v4Count;
    const v6 = v6Count;
    rc = addresses(K_LOCAL, i, i, ni, ips, true);
    if (rc != 0) return rc;
    store<u32>(p, v4, L_V4_FIRST);
    store<u32>(p, v4Count - v4, L_V4_COUNT);
    store<u32>(p, v6, L_V6_FIRST);
    store<u32>(p, v6Count - v6, L_V6_COUNT);
    // Grouped by network, then by ofport (the order of flood outputs).
    store<u64>(
      buffer(B_LOCAL_ORDER) + (<usize> i << 3),
      (<u64> ni << 48) | (<u64> ofport << 32) | <u64> i,
    );
  }
  return 0;
}

/** Keys (network << 32 | node IP) of the tunnel endpoints of vxlan remote ports. */
let nodeCount: u32 = 0;

function parseRemotes(count: u32): i32 {
  nodeCount = 0;
  for (let i: u32 = 0; i < count; i++) {
    const r = remote(i);
    const netId = word();
    const ips = word();
    const ni = findNet(netId);
    if (ni == NONE) return fail(E_UNKNOWN_NETWORK, K_REMOTE, i, 0, 0, 0);
    const ref = REMOTE_REF + i;
    let rc = claimMac(K_REMOTE, i, ref, ni, r + R_MAC_TEXT, r + R_MAC);
    if (rc != 0) return rc;
    const nodeLen = word();
    const node = parseIpv4(blob, nodeLen);
    blob += nodeLen;
    if (node < 0 || !unicastIpv4(<u32> node)) return fail(E_BAD_NODE_IP, K_REMOTE, i, 0, 0, 0);
    store<u32>(r, ni, R_NET);
    store<u32>(r, <u32> node, R_NODE);
    const start = wp;
    putIpv4(<u32> node);
    toSlot(r + R_NODE_TEXT, start);
    const v4 = v4Count;
    rc = addresses(K_REMOTE, i, ref, ni, ips, false);
    if (rc != 0) return rc;
    store<u32>(r, v4, R_V4_FIRST);
    store<u32>(r, v4Count - v4, R_V4_COUNT);
    store<u64>(buffer(B_REMOTE_ORDER) + (<usize> i << 3), (<u64> ni << 32) | <u64> i);
    if (load<u32>(net(ni), N_TYPE) == VXLAN) {
      store<u64>(buffer(B_NODES) + (<usize> (nodeCount++) << 3), (<u64> ni << 32) | <u64> node);
    }
  }
  return 0;
}

/** Fills the per-network ranges of a sorted order buffer whose keys start with the network. */
function ranges(id: i32, count: u32, shift: u64, firstField: usize): void {
  const keys = buffer(id);
  for (let i: u32 = 0; i < count; i++) {
    const first = net(<u32> (load<u64>(keys + (<usize> i << 3)) >>> shift)) + firstField;
    const seen = load<u32>(first + 4);
    if (seen == 0) store<u32>(first, i);
    store<u32>(first + 4, seen + 1);
  }
}

/**
 * Compiles the model in the input area: `words` u32 words, then the strings. Returns 0 and leaves
 * the lines in the output area (outPtr, outLen), or an error code (arguments: errorArg).
 *
 * Words: tunnelPort, networks, localPorts, remotePorts, total IPs; per network: id, type
 * (0 vxlan, 1 vlan, 2 flat), segmentId (0 if none), physnetPort (0 if none); per local port:
 * ofport, network, cookie, IP count, then the length of the MAC and of each IP; per remote port:
 * network, IP count, then the length of the MAC, of nodeIp and of each IP. The strings follow in
 * the same order.
 */
export function compile(words: u32): i32 {
  rd = buffer(B_INPUT);
  blob = rd + (<usize> words << 2);
  tunnelPort = word();
  netCount = word();
  const localCount = word();
  const remoteCount = word();
  ipCount = word();
  v4Count = 0;
  v6Count = 0;
  recCount = 0;

  nets = reserve(B_NETS, <usize> netCount * NET_SIZE);
  locals = reserve(B_LOCALS, <usize> localCount * LOCAL_SIZE);
  remotes = reserve(B_REMOTES, <usize> remoteCount * REMOTE_SIZE);
  v4Texts = reserve(B_V4, <usize> ipCount * V4_SLOT + 64);
  v6Texts = reserve(B_V6, <usize> ipCount * V6_SLOT + 64);
  reserve(B_NET_ORDER, <usize> netCount << 3);
  reserve(B_LOCAL_ORDER, <usize> localCount << 3);
  reserve(B_REMOTE_ORDER, <usize> remoteCount << 3);
  reserve(B_NODES, <usize> remoteCount << 3);
  hashInit(3 * netCount + 4 * localCount + remoteCount + ipCount);
  // Scratch text for rendering addresses while parsing; the lines come later.
  textBase = reserve(B_TEXT, 4096);
  textCap = capacity(B_TEXT);
  wp = textBase;

  let rc = parseNetworks();
  if (rc != 0) return rc;
  rc = parseLocals(localCount);
  if (rc != 0) return rc;
  rc = parseRemotes(remoteCount);
  if (rc != 0) return rc;

  // Group by network; networks in id order so that the lines come out nearly sorted.
  sortU64(B_LOCAL_ORDER, localCount);
  ranges(B_LOCAL_ORDER, localCount, 48, N_LOCAL_FIRST);
  sortU64(B_REMOTE_ORDER, remoteCount);
  ranges(B_REMOTE_ORDER, remoteCount, 32, N_REMOTE_FIRST);
  sortU64(B_NODES, nodeCount);
  const nodes = buffer(B_NODES);
  let distinct: u32 = 0;
  for (let i: u32 = 0; i < nodeCount; i++) {
    const k = load<u64>(nodes + (<usize> i << 3));
    if (distinct > 0 && load<u64>(nodes + (<usize> (distinct - 1) << 3)) == k) continue;
    store<u64>(nodes + (<usize> (distinct++) << 3), k);
  }
  ranges(B_NODES, distinct, 32, N_NODE_FIRST);
  const order = buffer(B_NET_ORDER);
  for (let i: u32 = 0; i < netCount; i++) {
    store<u64>(order + (<usize> i << 3), (<u64> load<u32>(net(i), N_ID) << 32) | <u64> i);
  }
  sortU64(B_NET_ORDER, netCount);

  wp = textBase;
  defaults();
  for (let i: u32 = 0; i < netCount; i++) {
    networkFlows(net(<u32> load<u64>(buffer(B_NET_ORDER) + (<usize> i << 3))));
  }

  const recs = buffer(B_RECS);
  if (recCount > 1) {
    sortRecs(recs, reserve(B_RECS_TMP, <usize> recCount << 4), 0, recCount);
  }
  // Join without duplicates (equal lines are adjacent now).
  const out = reserve(B_OUT, wp - textBase + <usize> recCount);
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
    memory.copy(o, textBase + <usize> load<u32>(at, 8), len);
    o += len;
  }
  outLength = <u32> (o - out);
  return 0;
}

/** Address of the output of the last successful compile. */
export function outPtr(): usize {
  return buffer(B_OUT);
}

/** Length in bytes of the output of the last successful compile. */
export function outLen(): u32 {
  return outLength;
}
