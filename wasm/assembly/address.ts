// Address syntax: the one definition of what the compiler accepts as a MAC, an IPv4 or an IPv6
// (keys.ts lets ../flow_conflicts.ts ask it too).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

function hexDigit(c: u32): i32 {
  if (c - 48 < 10) return <i32> (c - 48);
  const l = (c | 0x20) - 97;
  return l < 6 ? <i32> l + 10 : -1;
}

/** `xx:xx:xx:xx:xx:xx` as 48 bits; -1 unless unicast and not zero. */
export function parseMac(p: usize, len: u32): i64 {
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
export function parseIpv4(p: usize, len: u32): i64 {
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

export function unicastIpv4(v: u32): bool {
  const first = v >>> 24;
  return first != 0 && first != 127 && first < 224;
}

// The 8 words of the IPv6 address being parsed or formatted.
const WORDS = memory.data(16);

export function wordAt(i: i32): u32 {
  return <u32> load<u16>(WORDS + (<usize> i << 1));
}

function setWord(i: i32, v: u32): void {
  store<u16>(WORDS + (<usize> i << 1), <u16> v);
}

/** RFC 4291 text into WORDS; false when malformed. */
export function parseIpv6(p: usize, len: u32): bool {
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
export function unicastIpv6(): bool {
  if (wordAt(0) >>> 8 == 0xff) return false;
  if ((wordAt(0) | wordAt(1) | wordAt(2) | wordAt(3) | wordAt(4)) != 0) return true;
  if (wordAt(5) == 0xffff) return false;
  return (wordAt(5) | wordAt(6)) != 0 || wordAt(7) > 1;
}
