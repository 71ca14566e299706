// Routing (see ../../agent/PIPELINE.md, "Routing"): the routes decoded and
// checked after the rest of the model (decode in input.ts), and the builders of their flows, for
// IPv4 and, with route6.ts's checks and matches, IPv6.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  E_BAD_ROUTE_DST,
  E_BAD_ROUTE_VIA,
  E_ROUTE_NETWORK,
  F_HOST_EXIT_PRIORITY,
  F_HOST_EXIT_TABLE,
  F_NEXT_HOP_PRIORITY,
  F_NEXT_HOP_TABLE,
  F_ROUTE_IN_PRIORITY,
  F_ROUTE_IN_TABLE,
  F_ROUTE_TO_PRIORITY,
  F_ROUTE_TO_TABLE,
  F_SPOOF_ROUTED_PRIORITY,
  F_SPOOF_ROUTED_TABLE,
  K_ROUTE,
  T_FORWARD,
  T_NEXT_HOP,
  T_ROUTE,
} from "./generated/pipeline";
import { parseIpv4, unicastIpv4 } from "./address";
import { isIpv6Text, parseRoute6, putCidr6 } from "./route6";
import { spoofHead, spoofIpActions } from "./spoof";
import { checkLarger, gatewaySelf, routeMiss, tooBig } from "./slow_path";
import {
  bytes,
  fail,
  findNet,
  ipv4Owner,
  local,
  localAt,
  net,
  NONE,
  remote,
  remoteAt,
  v4Slot,
  v6Slot,
  word,
} from "./input";
import {
  B_ROUTES,
  buffer,
  GATEWAY_REF,
  L_COOKIE,
  L_MAC_TEXT,
  L_NET,
  L_V4_FIRST,
  L_V6_FIRST,
  N_GW_MAC_TEXT,
  N_GW_SLOT,
  N_GW_V6,
  N_HOST_PORT,
  N_ID,
  N_LOCAL_COUNT,
  N_LOCAL_FIRST,
  N_REMOTE_COUNT,
  N_REMOTE_FIRST,
  R_MAC_TEXT,
  R_V4_FIRST,
  R_V6_FIRST,
  REMOTE_REF,
  reserve,
  ROUTE_SIZE,
  RT_BASE,
  RT_FROM,
  RT_HOP,
  RT_MTU,
  RT_PREFIX,
  RT_STATIC,
  RT_TO,
  RT_V6,
  V4_SLOT,
  V6_SLOT,
} from "./layout";
import { begin, end, LINE_BOUND, putDec, putIpv4, putMac, putNet, puts, putSlot } from "./text";

export let routeCount: u32 = 0;

export function route(i: u32): usize {
  return buffer(B_ROUTES) + <usize> i * ROUTE_SIZE;
}

/** The index of network `id` if it is here with an IPv4 gateway, else NONE. */
function routed(id: u32): u32 {
  const ni = findNet(id);
  if (ni == NONE) return NONE;
  const n = net(ni);
  return load<u32>(n, N_GW_SLOT) != 0 && load<u32>(n, N_GW_V6) == 0 ? ni : NONE;
}

/**
 * `a.b.c.d/n` without host bits at p (len bytes): the base, and the prefix in the high 32 bits;
 * -1 when malformed.
 */
function parseCidr4(p: usize, len: u32): i64 {
  let slash: u32 = 0;
  while (slash < len && load<u8>(p + slash) != 47) slash++;
  if (slash == len) return -1;
  const base = parseIpv4(p, slash);
  const digits = len - slash - 1;
  if (base < 0 || digits == 0 || digits > 2) return -1;
  const d0 = <u32> load<u8>(p + slash + 1) - 48;
  if (d0 > 9 || (digits == 2 && d0 == 0)) return -1;
  let prefix = d0;
  if (digits == 2) {
    const d1 = <u32> load<u8>(p + slash + 2) - 48;
    if (d1 > 9) return -1;
    prefix = prefix * 10 + d1;
  }
  if (prefix > 32) return -1;
  // Host bits: the low 32 - prefix bits of the base.
  if (prefix < 32 && (<u64> base & ((<u64> 1 << <u64> (32 - prefix)) - 1)) != 0) return -1;
  return (<i64> prefix << 32) | base;
}

/** Decodes and checks the routes (after decode): count, then per route its words and strings. */
export function parseRoutes(): i32 {
  routeCount = word();
  reserve(B_ROUTES, <usize> routeCount * ROUTE_SIZE);
  for (let i: u32 = 0; i < routeCount; i++) {
    const r = route(i);
    const fromId = word();
    const toId = word();
    const dstLen = word();
    const viaLen = word();
    const mtu = word();
    const dst = bytes(dstLen);
    const via = viaLen > 0 ? bytes(viaLen - 1) : 0;
    if (isIpv6Text(dst, dstLen)) {
      const rc = parseRoute6(r, i, fromId, toId, dst, dstLen, via, viaLen, mtu);
      if (rc != 0) return rc;
      continue;
    }
    const from = routed(fromId);
    const to = routed(toId);
    if (from == NONE) return fail(E_ROUTE_NETWORK, K_ROUTE, i, 0, 0, 0);
    if (to == NONE) return fail(E_ROUTE_NETWORK, K_ROUTE, i, 1, 0, 0);
    const cidr = parseCidr4(dst, dstLen);
    if (cidr < 0) return fail(E_BAD_ROUTE_DST, K_ROUTE, i, 0, 0, 0);
    store<u32>(r, from, RT_FROM);
    store<u32>(r, to, RT_TO);
    store<u32>(r, <u32> cidr, RT_BASE);
    store<u32>(r, <u32> (cidr >>> 32), RT_PREFIX);
    store<u32>(r, viaLen > 0 ? 1 : 0, RT_STATIC);
    store<u32>(r, NONE, RT_HOP);
    store<u32>(r, mtu, RT_MTU);
    store<u32>(r, 0, RT_V6);
    if (viaLen == 0) continue;
    const hop = parseIpv4(via, viaLen - 1);
    if (hop < 0 || !unicastIpv4(<u32> hop)) return fail(E_BAD_ROUTE_VIA, K_ROUTE, i, 0, 0, 0);
    // The port of `to` that has the address, if any (not the gateway).
    const owner = ipv4Owner(to, <u32> hop);
    if (owner < GATEWAY_REF) store<u32>(r, owner, RT_HOP);
  }
  return 0;
}

/** `,field=CIDR`, or nothing for /0 (OVS prints no match for a wildcard); no `/32`. */
function putCidr(field: string, r: usize): void {
  const prefix = load<u32>(r, RT_PREFIX);
  if (prefix == 0) return;
  puts(field);
  putIpv4(load<u32>(r, RT_BASE));
  if (prefix == 32) return;
  puts("/");
  putDec(prefix);
}

/** IPv4 (IPv6: `v6`) a local port of a routed network sent to its gateway MAC: to ROUTE. */
export function routeIn(n: usize, v6: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_ROUTE_IN_TABLE, F_ROUTE_IN_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(n + N_GW_MAC_TEXT);
  puts(",actions=goto_table:");
  putDec(T_ROUTE);
  end();
}

/**
 * IPv4 (IPv6: `v6`) to the gateway MAC that no route takes: on to FORWARD, where forwardHost sends
 * it.
 */
export function hostExit(n: usize, v6: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_HOST_EXIT_TABLE, F_HOST_EXIT_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

/** The MAC text of the owner `ref` (a local or a remote port). */
export function hopMac(ref: u32): usize {
  return ref >= REMOTE_REF ? remote(ref - REMOTE_REF) + R_MAC_TEXT : local(ref) + L_MAC_TEXT;
}

/** One route: TTL decremented, onto the destination network, from its gateway MAC. */
function routeTo(r: usize): void {
  const from = net(load<u32>(r, RT_FROM));
  const to = net(load<u32>(r, RT_TO));
  const isStatic = load<u32>(r, RT_STATIC);
  const priority = F_ROUTE_TO_PRIORITY + 2 * load<u32>(r, RT_PREFIX) + isStatic;
  begin(load<u32>(from, N_ID), 0, F_ROUTE_TO_TABLE, priority, LINE_BOUND);
  const v6 = load<u32>(r, RT_V6) != 0;
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(from);
  if (v6) putCidr6(",ipv6_dst=", r);
  else putCidr(",nw_dst=", r);
  // dec_ttl first: a packet whose TTL runs out goes up to the slow path as the pod sent it.
  puts(",actions=dec_ttl,");
  // Larger than the destination's MTU: marked for FORWARD's tooBig (slow_path.ts).
  const mtu = load<u32>(r, RT_MTU);
  if (mtu != 0) checkLarger(mtu);
  puts("set_field:");
  putMac(to + N_GW_MAC_TEXT);
  puts("->eth_src,");
  const hop = load<u32>(r, RT_HOP);
  if (hop != NONE) {
    puts("set_field:");
    putMac(hopMac(hop));
    puts("->eth_dst,");
  }
  puts("set_field:");
  putNet(to);
  puts("->reg0,goto_table:");
  putDec(isStatic != 0 ? T_FORWARD : T_NEXT_HOP);
  end();
}

/** Routed traffic for a port's address (v4 text slot `ip`; `v6`: a v6 one): its MAC as eth_dst. */
export function nextHop(n: usize, port: u32, mac: usize, ip: usize, v6: bool = false): void {
  begin(load<u32>(n, N_ID), port, F_NEXT_HOP_TABLE, F_NEXT_HOP_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  puts(v6 ? ",ipv6_dst=" : ",nw_dst=");
  putSlot(ip, v6 ? V6_SLOT : V4_SLOT);
  puts(",actions=set_field:");
  putMac(mac);
  puts("->eth_dst,goto_table:");
  putDec(T_FORWARD);
  end();
}

/** A static route's next hop on this node may send from the route's destination. */
function spoofRouted(r: usize, p: usize): void {
  const n = net(load<u32>(p, L_NET));
  const v6 = load<u32>(r, RT_V6) != 0;
  spoofHead(
    n,
    p,
    F_SPOOF_ROUTED_TABLE,
    F_SPOOF_ROUTED_PRIORITY,
    v6 ? ",ipv6,in_port=" : ",ip,in_port=",
  );
  if (v6) putCidr6(",ipv6_src=", r);
  else putCidr(",nw_src=", r);
  spoofIpActions(n);
  end();
}

/** The addresses of one family (field `first`, its count after it) of a port p: a next hop each. */
function portHops(n: usize, port: u32, p: usize, mac: usize, first: usize, v6: bool): void {
  const a = load<u32>(p + first);
  const last = a + load<u32>(p + first + 4);
  for (let k = a; k < last; k++) nextHop(n, port, mac, v6 ? v6Slot(k) : v4Slot(k), v6);
}

/** Every port address of network `n` of one family, local and remote: a next hop each. */
function nextHops(n: usize, v6: bool): void {
  const lFirst = load<u32>(n, N_LOCAL_FIRST);
  const lLast = lFirst + load<u32>(n, N_LOCAL_COUNT);
  const lf: usize = v6 ? L_V6_FIRST : L_V4_FIRST;
  for (let i = lFirst; i < lLast; i++) {
    const p = localAt(i);
    portHops(n, load<u32>(p, L_COOKIE), p, p + L_MAC_TEXT, lf, v6);
  }
  const rFirst = load<u32>(n, N_REMOTE_FIRST);
  const rLast = rFirst + load<u32>(n, N_REMOTE_COUNT);
  const rf: usize = v6 ? R_V6_FIRST : R_V4_FIRST;
  for (let i = rFirst; i < rLast; i++) {
    const p = remoteAt(i);
    portHops(n, 0, p, p + R_MAC_TEXT, rf, v6);
  }
}

/**
 * Every flow of the routes: into ROUTE, the routes, the next hops of each network a connected
 * route goes to (once: output.ts drops the duplicate lines).
 */
export function routeFlows(): void {
  for (let i: u32 = 0; i < routeCount; i++) {
    const r = route(i);
    const v6 = load<u32>(r, RT_V6);
    const from = net(load<u32>(r, RT_FROM));
    routeIn(from, v6 != 0);
    // With a host port, hostExit takes what no route does, and the node its gateway's address.
    if (load<u32>(from, N_HOST_PORT) == 0) {
      routeMiss(from, v6 != 0);
      gatewaySelf(from, v6 != 0);
    }
    const hop = load<u32>(r, RT_HOP);
    const isStatic = load<u32>(r, RT_STATIC) != 0;
    if (isStatic && hop == NONE) continue;
    routeTo(r);
    if (isStatic && hop < REMOTE_REF) spoofRouted(r, local(hop));
    if (load<u32>(r, RT_MTU) != 0) tooBig(net(load<u32>(r, RT_TO)), load<u32>(r, RT_MTU), v6 != 0);
    if (isStatic) continue;
    // A network's next hops of a family once, though several routes go to it.
    let first = true;
    for (let k: u32 = 0; k < i; k++) {
      const o = route(k);
      const same = load<u32>(o, RT_TO) == load<u32>(r, RT_TO) && load<u32>(o, RT_V6) == v6;
      if (load<u32>(o, RT_STATIC) == 0 && same) first = false;
    }
    if (first) nextHops(net(load<u32>(r, RT_TO)), v6 != 0);
  }
}
