// IPv6 routing (see ../../agent/PIPELINE.md, "Routing"): what an IPv6 route needs beyond
// route.ts's IPv4 ones: its networks' IPv6 gateways, its CIDR and next hop parsed and checked,
// and the IPv6 spelling of its matches. route.ts decodes every route and builds the flows of
// both families with these.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { E_BAD_ROUTE_DST, E_BAD_ROUTE_VIA, E_ROUTE_NETWORK, K_ROUTE } from "./generated/pipeline";
import { parseIpv6, unicastIpv6, wordAt } from "./address";
import { fail, findNet, ipv6Owner, net, NONE } from "./input";
import {
  GATEWAY_REF,
  N_GW6_SLOT,
  N_GW_SLOT,
  N_GW_V6,
  RT_DST6,
  RT_FROM,
  RT_HOP,
  RT_MTU,
  RT_PREFIX,
  RT_STATIC,
  RT_TO,
  RT_V6,
  V6_SLOT,
} from "./layout";
import { ipv6ToSlot, putDec, puts, putSlot } from "./text";

/** Whether the `len` bytes at p are IPv6 text (a colon; IPv4 has none). */
export function isIpv6Text(p: usize, len: u32): bool {
  for (let i: u32 = 0; i < len; i++) if (load<u8>(p + i) == 58) return true;
  return false;
}

/**
 * The index of network `id` if it is here with an IPv6 gateway (its gateway, or a dual-stack
 * network's gateway6), else NONE.
 */
function routed6(id: u32): u32 {
  const ni = findNet(id);
  if (ni == NONE) return NONE;
  const n = net(ni);
  const v6 = load<u32>(n, N_GW_SLOT) != 0 && load<u32>(n, N_GW_V6) != 0;
  return v6 || load<u32>(n, N_GW6_SLOT) != 0 ? ni : NONE;
}

/** A prefix length `0`..`128` (no leading zero) at p, or -1. */
function parsePrefix6(p: usize, len: u32): i32 {
  if (len == 0 || len > 3) return -1;
  let v: i32 = 0;
  for (let i: u32 = 0; i < len; i++) {
    const d = <i32> load<u8>(p + i) - 48;
    if (d < 0 || d > 9 || (i == 0 && d == 0 && len > 1)) return -1;
    v = v * 10 + d;
  }
  return v <= 128 ? v : -1;
}

/** Whether the address just parsed (address.ts) has no bit set past `prefix`. */
function noHostBits(prefix: i32): bool {
  for (let k: i32 = 0; k < 8; k++) {
    const kept = min(max(prefix - 16 * k, 0), 16);
    if (kept < 16 && (wordAt(k) & (0xffff >>> kept)) != 0) return false;
  }
  return true;
}

/**
 * `addr/n` without host bits at p (len bytes) into route r (its text slot and prefix); false when
 * malformed.
 */
function parseCidr6(r: usize, p: usize, len: u32): bool {
  let slash: u32 = 0;
  while (slash < len && load<u8>(p + slash) != 47) slash++;
  if (slash == len || !parseIpv6(p, slash)) return false;
  const prefix = parsePrefix6(p + slash + 1, len - slash - 1);
  if (prefix < 0 || !noHostBits(prefix)) return false;
  ipv6ToSlot(r + RT_DST6);
  store<u32>(r, <u32> prefix, RT_PREFIX);
  return true;
}

/**
 * Route i (record r) of IPv6: `from`/`to` network ids, its dst (len bytes at dst) and via
 * (`viaWord` is 1 + its length, as encoded; 0: a connected route), the MTU it checks (0: none).
 * Checked as route.ts checks an IPv4 one.
 */
export function parseRoute6(
  r: usize,
  i: u32,
  fromId: u32,
  toId: u32,
  dst: usize,
  dstLen: u32,
  via: usize,
  viaWord: u32,
  mtu: u32,
): i32 {
  const from = routed6(fromId);
  const to = routed6(toId);
  if (from == NONE) return fail(E_ROUTE_NETWORK, K_ROUTE, i, 0, 0, 0);
  if (to == NONE) return fail(E_ROUTE_NETWORK, K_ROUTE, i, 1, 0, 0);
  if (!parseCidr6(r, dst, dstLen)) return fail(E_BAD_ROUTE_DST, K_ROUTE, i, 0, 0, 0);
  store<u32>(r, from, RT_FROM);
  store<u32>(r, to, RT_TO);
  store<u32>(r, 1, RT_V6);
  // Its destination's MTU when smaller (else 0): larger packets get "packet too big" (slow_path.ts).
  store<u32>(r, mtu, RT_MTU);
  store<u32>(r, viaWord > 0 ? 1 : 0, RT_STATIC);
  store<u32>(r, NONE, RT_HOP);
  if (viaWord == 0) return 0;
  if (!parseIpv6(via, viaWord - 1) || !unicastIpv6()) {
    return fail(E_BAD_ROUTE_VIA, K_ROUTE, i, 0, 0, 0);
  }
  // The port of `to` that has the address, if any (not the gateway).
  const owner = ipv6Owner(to);
  if (owner < GATEWAY_REF) store<u32>(r, owner, RT_HOP);
  return 0;
}

/** `,field=CIDR` of IPv6 route r, or nothing for ::/0; no `/128` (as OVS prints them). */
export function putCidr6(field: string, r: usize): void {
  const prefix = load<u32>(r, RT_PREFIX);
  if (prefix == 0) return;
  puts(field);
  putSlot(r + RT_DST6, V6_SLOT);
  if (prefix == 128) return;
  puts("/");
  putDec(prefix);
}
