// The identity of MACs and addresses, asked by ../flow_keys.ts (for ../flow_conflicts.ts, which
// must know what the compile would reject, and which claims are the same, before it runs): the
// rules are those of address.ts, which the compile itself applies.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { parseIpv4, parseIpv6, parseMac, unicastIpv4, unicastIpv6 } from "./address";
import { B_INPUT, B_KEY, buffer, reserve } from "./layout";
import { macText, putc, putIpv4, putIpv6, wp, writerAt } from "./text";

/** What `keys` reads its texts as. */
const KEY_ADDRESS: u32 = 0;
const KEY_MAC: u32 = 1;

/** The longest key and its newline: an IPv6 address as OVS prints it (45 characters). */
const KEY_BYTES: usize = 46;

/** Address of the keys the last `keys` call wrote. */
export function keyPtr(): usize {
  return buffer(B_KEY);
}

/** A port's address: its canonical text at the writer (IPv4 dotted quad, IPv6 as OVS prints it). */
function addressKey(p: usize, len: u32): void {
  let colon = false;
  for (let i: u32 = 0; i < len; i++) {
    if (load<u8>(p + i) == 58) colon = true;
  }
  if (colon) {
    if (parseIpv6(p, len) && unicastIpv6()) putIpv6();
    return;
  }
  const v = parseIpv4(p, len);
  if (v >= 0 && unicastIpv4(<u32> v)) putIpv4(<u32> v);
}

/** A MAC: its 17 lowercase characters at the writer. */
function macKey(p: usize, len: u32): void {
  const v = parseMac(p, len);
  if (v < 0) return;
  macText(wp, <u64> v);
  writerAt(wp + 17);
}

/** A tunnel endpoint: "1" at the writer when it is a unicast IPv4. */
function nodeIpKey(p: usize, len: u32): void {
  const v = parseIpv4(p, len);
  if (v >= 0 && unicastIpv4(<u32> v)) putc(49);
}

/**
 * The keys of `count` texts in the input area (their u32 lengths, then the texts) read as `kind`
 * (0 address, 1 MAC, 2 tunnel endpoint): each text's key and a newline, in order, at keyPtr; an
 * empty key for a text the compile would reject. Returns the length of the keys.
 */
export function keys(kind: u32, count: u32): u32 {
  const out = reserve(B_KEY, <usize> count * KEY_BYTES);
  let rd = buffer(B_INPUT);
  let text = rd + (<usize> count << 2);
  const was = writerAt(out);
  for (let i: u32 = 0; i < count; i++) {
    const len = load<u32>(rd);
    rd += 4;
    if (kind == KEY_ADDRESS) addressKey(text, len);
    else if (kind == KEY_MAC) macKey(text, len);
    else nodeIpKey(text, len);
    putc(10);
    text += len;
  }
  return <u32> (writerAt(was) - out);
}
