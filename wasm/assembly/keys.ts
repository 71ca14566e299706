// The identity of a MAC or an address, asked one text at a time by ../flow_keys.ts (for
// ../flow_conflicts.ts, which must know what the compile would reject before it runs): the text
// is in the input area, its canonical form goes to the key area (keyPtr). The rules are those of
// address.ts, which the compile itself applies.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { parseIpv4, parseIpv6, parseMac, unicastIpv4, unicastIpv6 } from "./address";
import { B_INPUT, B_KEY, buffer, reserve } from "./layout";
import { macText, putIpv4, putIpv6, writerAt } from "./text";

/** Room for the longest canonical address (45 characters) and a MAC. */
const KEY_BYTES: usize = 64;

/** Address of the canonical text the last key call wrote. */
export function keyPtr(): usize {
  return buffer(B_KEY);
}

/**
 * The `len` bytes of the input area as a port's address: the length of its canonical text
 * (IPv4 dotted quad, IPv6 as OVS prints it) at keyPtr, or 0 when the compile would reject it.
 */
export function addressKey(len: u32): u32 {
  const p = buffer(B_INPUT);
  let colon = false;
  for (let i: u32 = 0; i < len; i++) {
    if (load<u8>(p + i) == 58) colon = true;
  }
  let v: i64 = 0;
  if (colon) {
    if (!parseIpv6(p, len) || !unicastIpv6()) return 0;
  } else {
    v = parseIpv4(p, len);
    if (v < 0 || !unicastIpv4(<u32> v)) return 0;
  }
  const key = reserve(B_KEY, KEY_BYTES);
  const was = writerAt(key);
  if (colon) putIpv6();
  else putIpv4(<u32> v);
  return <u32> (writerAt(was) - key);
}

/** The `len` bytes of the input area as a MAC: 17 (its lowercase text at keyPtr), or 0. */
export function macKey(len: u32): u32 {
  const v = parseMac(buffer(B_INPUT), len);
  if (v < 0) return 0;
  macText(reserve(B_KEY, KEY_BYTES), <u64> v);
  return 17;
}

/** The `len` bytes of the input area as a tunnel endpoint: 1 when a unicast IPv4, else 0. */
export function nodeIpValid(len: u32): u32 {
  const v = parseIpv4(buffer(B_INPUT), len);
  return v >= 0 && unicastIpv4(<u32> v) ? 1 : 0;
}
