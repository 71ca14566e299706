// The service flows and select groups (see ../../agent/PIPELINE.md, "Services"): after `compile`
// (and `acl`), `services` reads the services section of the model from the input area, checks it
// (errors worded by ../service_input.ts), adds its lines to the records and joins them all again.
// A select group is a line of its own (`group_id=…`, as `ovs-ofctl -O OpenFlow15 dump-groups`
// prints it), sorted after every flow by its id.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.
//
// Words: service count; per service: id, network id, affinity (0/1), port count, backend count,
// the length of vip and of mac; per port: protocol (SERVICE_PROTOCOLS), port, targetPort; per
// backend: the length of its text. The texts follow the words: per service vip, mac, backends.

import {
  GROUPS_PER_SERVICE,
  P_DEFAULT,
  SE_BAD_BACKEND,
  SE_BAD_MAC,
  SE_BAD_VIP,
  SE_DUP_ID,
  SE_UNKNOWN_NETWORK,
  SE_VIP_TAKEN,
  SF_SERVICE_ND_PRIORITY,
  SF_SERVICE_ND_TABLE,
  SF_SERVICE_NEW_PRIORITY,
  SF_SERVICE_NEW_TABLE,
  SF_SERVICE_REPLY_IN_PRIORITY,
  SF_SERVICE_REPLY_IN_TABLE,
  SF_SERVICE_REPLY_LOCAL_PRIORITY,
  SF_SERVICE_REPLY_LOCAL_TABLE,
  SF_SERVICE_REPLY_ROUTED_PRIORITY,
  SF_SERVICE_REPLY_ROUTED_TABLE,
  SF_SERVICE_TRACKED_PRIORITY,
  SF_SERVICE_TRACKED_TABLE,
  SF_SERVICE_VIP_GUARD_PRIORITY,
  SF_SERVICE_VIP_GUARD_TABLE,
  SF_SERVICE_VIP_PRIORITY,
  SF_SERVICE_VIP_ROUTED_PRIORITY,
  SF_SERVICE_VIP_ROUTED_TABLE,
  SF_SERVICE_VIP_TABLE,
  SPROTO_TCP,
  ST_HAIRPIN,
  ST_SERVICE,
  T_ARP_REPLY,
  T_FORWARD,
  T_NEXT_HOP,
  T_ROUTE,
} from "./generated/pipeline";
import { parseIpv4, parseIpv6, parseMac, unicastIpv4, unicastIpv6 } from "./address";
import { findNet, ipv4Owner, ipv6Owner, local, net, netCount, NONE, v6Gateways } from "./input";
import { hairpinBackend, hairpinNetwork, hairpinZoneFits } from "./hairpin";
import { idOf, zone, zones } from "./acl";
import { arpReply, ndReplyShared } from "./arp";
import { hopMac, nextHop, route, routeCount } from "./route";
import {
  B_INPUT,
  buffer,
  GATEWAY_REF,
  L_COOKIE,
  N_GW_MAC_TEXT,
  N_ID,
  REMOTE_REF,
  RT_FROM,
  RT_STATIC,
  RT_TO,
  RT_V6,
  V6_SLOT,
} from "./layout";
import { join } from "./output";
import { C_OWNER, C_TEXT6, CELL, putCell, putNatCell } from "./service_cell";
import {
  begin,
  beginLine,
  end,
  ipv4ToSlot,
  ipv6ToSlot,
  LINE_BOUND,
  putDec,
  putHex,
  putIpv4,
  putMac,
  puts,
  putSlot,
} from "./text";

const ERROR_ARGS = memory.data(2 * 4);

function fail(code: i32, i: u32, k: u32): i32 {
  store<u32>(ERROR_ARGS, i);
  store<u32>(ERROR_ARGS, k, 4);
  return code;
}

/** Argument i (0..1) of the last services error: service, item. */
export function serviceErrorArg(i: i32): u32 {
  return load<u32>(ERROR_ARGS + (<usize> i << 2));
}

// A text slot for an address the builders of other tables take as a slot (arpReply, nextHop).
const SLOT = memory.data(16);

// Per service, decoded: network index, id, MAC, its VIP as an address cell (service_cell.ts); per
// backend an address cell (`owners`).
const S_NET = 0;
const S_ID = 8;
const S_MAC = 16; // u64
const S_VIP: usize = 24; // a cell
const S_V6 = 4;
const S_SIZE: usize = S_VIP + CELL;

// Whether the service being written has an IPv6 VIP (and backends): its lines match ipv6 fields.
let v6 = false;
let recs: usize = 0;
let recsCap: usize = 0;
let owners: usize = 0; // per backend of all services: address (u32), owner ref (u32)
let ownersCap: usize = 0;
let hairpinned: usize = 0; // per network: 1 once its hairpin flows are in
let hairpinnedCap: usize = 0;

function grow(ptr: usize, cap: usize, bytes: usize): usize {
  return cap >= bytes ? ptr : ptr == 0 ? heap.alloc(bytes) : heap.realloc(ptr, bytes);
}

/** The line's protocol text. */
function proto(code: u32): string {
  if (v6) return code == SPROTO_TCP ? "tcp6" : "udp6";
  return code == SPROTO_TCP ? "tcp" : "udp";
}

/** The address of a cell, in the family of the service being written. */
function putAddr(cell: usize): void {
  putCell(cell, v6);
}

/** `tcp,reg0=N,nw_dst=VIP,tp_dst=PORT` (or udp; tcp6, udp6 and ipv6_dst): a service port. */
function vipMatch(id: u32, vip: usize, code: u32, port: u32): void {
  puts(proto(code));
  puts(",reg0=");
  putHex(id);
  puts(v6 ? ",ipv6_dst=" : ",nw_dst=");
  putAddr(vip);
  puts(",tp_dst=");
  putDec(port);
}

/**
 * Table ARP: a neighbour solicitation for an IPv6 VIP is answered with its MAC (through the shared
 * advertisement, as the gateway's), above the VIP's guard: unreachability detection asks unicast.
 */
function vipNd(n: usize, vip: usize, mac: u64): void {
  begin(load<u32>(n, N_ID), 0, SF_SERVICE_ND_TABLE, SF_SERVICE_ND_PRIORITY, LINE_BOUND);
  puts(",icmp6,reg0=");
  putHex(load<u32>(n, N_ID));
  puts(",icmp_type=135,icmp_code=0,nd_target=");
  putSlot(vip + C_TEXT6, V6_SLOT);
  puts(",actions=set_field:");
  putHex(mac);
  puts("->xreg1,set_field:136->icmpv6_type,goto_table:");
  putDec(T_ARP_REPLY);
  end();
}

/**
 * A service port on the VIP goes through conntrack's NAT, on to SERVICE: in table ARP from a client
 * of the VIP's network, in NEXT_HOP (`routed`) from one a router joins to it (a routed packet never
 * passes the VIP network's ARP table).
 */
function vipFlow(id: u32, ni: u32, vip: usize, code: u32, port: u32, routed: bool): void {
  begin(
    id,
    0,
    routed ? SF_SERVICE_VIP_ROUTED_TABLE : SF_SERVICE_VIP_TABLE,
    routed ? SF_SERVICE_VIP_ROUTED_PRIORITY : SF_SERVICE_VIP_PRIORITY,
    LINE_BOUND,
  );
  puts(",");
  vipMatch(id, vip, code, port);
  puts(",actions=ct(table=");
  putDec(ST_SERVICE);
  puts(",zone=");
  putDec(idOf(zone(ni)));
  puts(",nat)");
  end();
}

/** Table ARP: anything else sent to the VIP is dropped. */
function vipGuard(id: u32, vip: usize): void {
  begin(id, 0, SF_SERVICE_VIP_GUARD_TABLE, SF_SERVICE_VIP_GUARD_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putHex(id);
  puts(v6 ? ",ipv6_dst=" : ",nw_dst=");
  putAddr(vip);
  puts(",actions=drop");
  end();
}

/** Table SERVICE: a new connection to the port goes to its group (none: no endpoints, drop). */
function newFlow(id: u32, vip: usize, code: u32, port: u32, group: u32): void {
  begin(id, 0, SF_SERVICE_NEW_TABLE, SF_SERVICE_NEW_PRIORITY, LINE_BOUND);
  puts(",ct_state=+new+trk,");
  vipMatch(id, vip, code, port);
  if (group == 0) {
    puts(",actions=drop");
  } else {
    puts(",actions=group:");
    putDec(group);
  }
  end();
}

/**
 * Table SERVICE: a connection conntrack knows, translated already: on to NEXT_HOP. Established or
 * related, and also still new: a SYN sent again before the backend's answer came is `+new` but
 * committed, and conntrack has translated it (it no longer matches the VIP's NEW flow).
 */
function trackedFlow(id: u32): void {
  begin(id, 0, SF_SERVICE_TRACKED_TABLE, SF_SERVICE_TRACKED_PRIORITY, LINE_BOUND);
  puts(",ct_state=-inv+trk,reg0=");
  putHex(id);
  puts(",actions=goto_table:");
  putDec(T_NEXT_HOP);
  end();
}

/**
 * A backend's reply from its target port (of network `id`), un-NATed (back to the VIP and port) in
 * zone `z`, the client's conntrack entry's: from a local backend in ARP, from outside in FORWARD
 * (once: it is tracked when it comes back), there on network `to` (the client's: `id`, or one a
 * router joins to it, where the routed reply arrives).
 */
function replyFlow(
  id: u32,
  to: u32,
  z: u32,
  local: bool,
  backend: usize,
  code: u32,
  target: u32,
): void {
  begin(
    id,
    0,
    local ? SF_SERVICE_REPLY_LOCAL_TABLE : SF_SERVICE_REPLY_IN_TABLE,
    local ? SF_SERVICE_REPLY_LOCAL_PRIORITY : SF_SERVICE_REPLY_IN_PRIORITY,
    LINE_BOUND,
  );
  puts(local ? "," : ",ct_state=-trk,");
  replyMatch(to, 0, backend, code, target, !local);
  puts(",actions=ct(table=");
  putDec(T_FORWARD);
  puts(",zone=");
  putDec(z);
  puts(",nat)");
  end();
}

/**
 * `tcp,reg0=N[,reg1=0][,dl_dst=MAC],nw_src=B,tp_src=TARGET` (or udp): a backend's reply (`mac`, a
 * MAC text, or 0 for none).
 */
function replyMatch(
  id: u32,
  mac: usize,
  backend: usize,
  code: u32,
  target: u32,
  outside: bool,
): void {
  puts(proto(code));
  puts(",reg0=");
  putHex(id);
  if (outside) puts(",reg1=0");
  if (mac != 0) {
    puts(",dl_dst=");
    putMac(mac);
  }
  puts(v6 ? ",ipv6_src=" : ",nw_src=");
  putAddr(backend);
  puts(",tp_src=");
  putDec(target);
}

/** Every reply flow of one backend and port: its own network's, and the routed clients'. */
function replyFlows(n: usize, ni: u32, backend: usize, owner: u32, code: u32, target: u32): void {
  const id = load<u32>(n, N_ID);
  const z = idOf(zone(ni));
  if (owner < REMOTE_REF) {
    replyFlow(id, id, z, true, backend, code, target);
    if (routedFrom(ni)) replyRouted(n, z, backend, code, target);
  }
  replyFlow(id, id, z, false, backend, code, target);
  for (let i: u32 = 0; i < routeCount; i++) {
    const r = route(i);
    const from = load<u32>(r, RT_FROM);
    if (!connected(r, ni) || from == ni) continue;
    replyFlow(id, load<u32>(net(from), N_ID), z, false, backend, code, target);
  }
}

/**
 * ARP: a local backend's reply sent to its gateway (a client a router joins): un-NATed in zone `z`,
 * then on to ROUTE, as `routeIn` would send it (REPLY would send it to FORWARD, past the router).
 */
function replyRouted(n: usize, z: u32, backend: usize, code: u32, target: u32): void {
  const id = load<u32>(n, N_ID);
  begin(id, 0, SF_SERVICE_REPLY_ROUTED_TABLE, SF_SERVICE_REPLY_ROUTED_PRIORITY, LINE_BOUND);
  puts(",");
  replyMatch(id, n + N_GW_MAC_TEXT, backend, code, target, false);
  puts(",actions=ct(table=");
  putDec(T_ROUTE);
  puts(",zone=");
  putDec(z);
  puts(",nat)");
  end();
}

/** Whether a route of the VIP's family leaves network `ni` (its gateway goes to ROUTE). */
function routedFrom(ni: u32): bool {
  for (let i: u32 = 0; i < routeCount; i++) {
    if (load<u32>(route(i), RT_FROM) == ni && ofFamily(route(i))) return true;
  }
  return false;
}

/** Whether a connected route from another network goes to network `ni` (ROUTE → NEXT_HOP). */
function routedTo(ni: u32): bool {
  for (let i: u32 = 0; i < routeCount; i++) {
    const r = route(i);
    if (connected(r, ni) && load<u32>(r, RT_FROM) != ni) return true;
  }
  return false;
}

/** Whether route r is of the family of the service being written (its VIP's). */
function ofFamily(r: usize): bool {
  return (load<u32>(r, RT_V6) != 0) == v6;
}

/** Whether route r is one of the VIP's family to network `ni`'s own subnet. */
function connected(r: usize, ni: u32): bool {
  return load<u32>(r, RT_TO) == ni && load<u32>(r, RT_STATIC) == 0 && ofFamily(r);
}

/** The select group of one port: a bucket per backend, DNAT to it, committed, on to NEXT_HOP. */
function group(
  g: u32,
  z: u32,
  code: u32,
  affinity: bool,
  first: u32,
  count: u32,
  target: u32,
): void {
  beginLine((<u64> 0xffffffff << 32) | <u64> g, 160 + <usize> count * 128);
  puts("group_id=");
  putDec(g);
  // One field prints as `fields=ip_src`, several in parentheses.
  const src = v6 ? "ipv6_src" : "ip_src";
  if (affinity) {
    puts(",type=select,selection_method=hash,fields=");
    puts(src);
  } else {
    puts(",type=select,selection_method=hash,fields(");
    puts(src);
    puts(",nw_proto,");
    puts(code == SPROTO_TCP ? "tcp_src)" : "udp_src)");
  }
  let b: u32 = 0;
  for (let k: u32 = 0; k < count; k++) {
    const at = cell(first + k);
    if (load<u32>(at, C_OWNER) == NONE) continue;
    puts(",bucket=bucket_id:");
    putDec(b++);
    puts(",actions=ct(commit,table=");
    putDec(T_NEXT_HOP);
    puts(",zone=");
    putDec(z);
    // An IPv6 address in brackets, as ovs-ofctl prints it: `nat(dst=[fd00::3]:8080)`.
    puts(",nat(dst=");
    putNatCell(at, v6);
    puts(":");
    putDec(target);
    puts("))");
  }
  end();
}

/** Not an address: the cell readers' answer for a malformed or non-unicast one. */
const BAD: u32 = 0xfffffffe;

function hasColon(p: usize, len: u32): bool {
  for (let i: u32 = 0; i < len; i++) if (load<u8>(p + i) == 58) return true;
  return false;
}

/** Fills `cell` with the IPv4 address of text `p`: its owner in network `ni` (NONE), or BAD. */
function ipv4Cell(cell: usize, p: usize, len: u32, ni: u32): u32 {
  const v = parseIpv4(p, len);
  if (v < 0 || !unicastIpv4(<u32> v)) return BAD;
  store<u32>(cell, <u32> v);
  return ipv4Owner(ni, <u32> v);
}

/** Fills `cell` with the IPv6 address of text `p` (as OVS prints it): its owner, or BAD. */
function ipv6Cell(cell: usize, p: usize, len: u32, ni: u32): u32 {
  if (!parseIpv6(p, len) || !unicastIpv6()) return BAD;
  store<u32>(cell, 0);
  ipv6ToSlot(cell + C_TEXT6);
  return ipv6Owner(ni);
}

/** Whether two cells hold one address (IPv6: the same text, as both are printed one way). */
function sameCell(a: usize, b: usize, six: bool): bool {
  if (!six) return load<u32>(a) == load<u32>(b);
  const len = <usize> load<u8>(a + C_TEXT6);
  if (len != <usize> load<u8>(b + C_TEXT6)) return false;
  return memory.compare(a + C_TEXT6 + 1, b + C_TEXT6 + 1, len) == 0;
}

/** Backend cell `i` of all services. */
function cell(i: u32): usize {
  return owners + <usize> i * CELL;
}

/** Decodes and checks every service (rc), its backends' addresses and owners into `owners`. */
function check(count: u32, rd: usize, text: usize): i32 {
  recs = grow(recs, recsCap, <usize> count * S_SIZE);
  if (recsCap < <usize> count * S_SIZE) recsCap = <usize> count * S_SIZE;
  let w = rd;
  let t = text;
  let backends: u32 = 0;
  let bw = rd;
  for (let i: u32 = 0; i < count; i++) {
    backends += load<u32>(bw, 16);
    bw += 28 + (<usize> load<u32>(bw, 12)) * 12 + (<usize> load<u32>(bw, 16) << 2);
  }
  const bytes = <usize> (backends + 1) * CELL;
  owners = grow(owners, ownersCap, bytes);
  if (ownersCap < bytes) ownersCap = bytes;
  let o: usize = owners;
  for (let i: u32 = 0; i < count; i++) {
    const r = recs + <usize> i * S_SIZE;
    const id = load<u32>(w);
    for (let j: u32 = 0; j < i; j++) {
      if (load<u32>(recs + <usize> j * S_SIZE, S_ID) == id) return fail(SE_DUP_ID, i, 0);
    }
    store<u32>(r, id, S_ID);
    const ni = findNet(load<u32>(w, 4));
    if (ni == NONE) return fail(SE_UNKNOWN_NETWORK, i, 0);
    store<u32>(r, ni, S_NET);
    const ports = load<u32>(w, 12);
    const nb = load<u32>(w, 16);
    const vipLen = load<u32>(w, 20);
    const macLen = load<u32>(w, 24);
    // The VIP's family is its text's: a colon is IPv6.
    const six = hasColon(t, vipLen);
    const owner = six ? ipv6Cell(r + S_VIP, t, vipLen, ni) : ipv4Cell(r + S_VIP, t, vipLen, ni);
    if (owner == BAD) return fail(SE_BAD_VIP, i, 0);
    if (owner != NONE) return fail(SE_VIP_TAKEN, i, 0);
    store<u32>(r, six ? 1 : 0, S_V6);
    for (let j: u32 = 0; j < i; j++) {
      const q = recs + <usize> j * S_SIZE;
      if (load<u32>(q, S_NET) == ni && sameCell(q + S_VIP, r + S_VIP, six)) {
        return fail(SE_VIP_TAKEN, i, 0);
      }
    }
    t += vipLen;
    const mac = parseMac(t, macLen);
    if (mac < 0 || (mac >>> 40) & 1) return fail(SE_BAD_MAC, i, 0);
    t += macLen;
    store<u64>(r, <u64> mac, S_MAC);
    w += 28 + <usize> ports * 12;
    for (let k: u32 = 0; k < nb; k++) {
      const len = load<u32>(w);
      w += 4;
      // A backend of the VIP's family.
      const owner = six ? ipv6Cell(o, t, len, ni) : ipv4Cell(o, t, len, ni);
      t += len;
      if (owner == BAD) return fail(SE_BAD_BACKEND, i, k);
      store<u32>(o, owner, C_OWNER);
      o += CELL;
    }
  }
  return 0;
}

/**
 * Adds the lines of the services section in the input area (`words` u32 words, then the texts) to
 * those of the last `compile` (and `acl`), and joins them all again. Returns 0, or an error code
 * (arguments: serviceErrorArg).
 */
export function services(words: u32): i32 {
  const rd = buffer(B_INPUT);
  const count = load<u32>(rd);
  if (count == 0) return 0;
  const rc = check(count, rd + 4, rd + (<usize> words << 2));
  if (rc != 0) return rc;
  zones();
  // The table's default: what conntrack finds invalid, or a VIP port without its flow.
  begin(0, 0, ST_SERVICE, P_DEFAULT, LINE_BOUND);
  puts(",actions=drop");
  end();
  begin(0, 0, ST_HAIRPIN, P_DEFAULT, LINE_BOUND);
  puts(",actions=drop");
  end();
  hairpinned = grow(hairpinned, hairpinnedCap, <usize> netCount + 1);
  if (hairpinnedCap < <usize> netCount + 1) hairpinnedCap = <usize> netCount + 1;
  memory.fill(hairpinned, 0, <usize> netCount);
  // The advertisement an IPv6 VIP's answer goes through, unless a gateway's brought it already.
  let nd = v6Gateways;
  let w = rd + 4;
  let first: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const r = recs + <usize> i * S_SIZE;
    const ni = load<u32>(r, S_NET);
    const n = net(ni);
    const id = load<u32>(n);
    const vip = r + S_VIP;
    v6 = load<u32>(r, S_V6) != 0;
    const sid = load<u32>(w);
    const affinity = load<u32>(w, 8) != 0;
    const ports = load<u32>(w, 12);
    const nb = load<u32>(w, 16);
    if (v6) {
      vipNd(n, vip, load<u64>(r, S_MAC));
      if (!nd) ndReplyShared();
      nd = true;
    } else {
      ipv4ToSlot(SLOT, load<u32>(vip));
      arpReply(n, 0, load<u64>(r, S_MAC), SLOT);
    }
    vipGuard(id, vip);
    trackedFlow(id);
    const routed = routedTo(ni);
    let live: u32 = 0;
    for (let k: u32 = 0; k < nb; k++) {
      const at = cell(first + k);
      const owner = load<u32>(at, C_OWNER);
      if (owner == NONE || owner >= GATEWAY_REF) continue;
      live++;
      const cookie = owner >= REMOTE_REF ? 0 : load<u32>(local(owner), L_COOKIE);
      if (v6) nextHop(n, cookie, hopMac(owner), at + C_TEXT6, true);
      else {
        ipv4ToSlot(SLOT, load<u32>(at));
        nextHop(n, cookie, hopMac(owner), SLOT);
      }
      const z = idOf(zone(ni));
      if (owner >= REMOTE_REF || !hairpinZoneFits(z)) continue;
      hairpinBackend(id, z, local(owner), at, vip, v6);
      // Once per network and family: bit 1 IPv4, bit 2 IPv6.
      const bit: u8 = v6 ? 2 : 1;
      const had = load<u8>(hairpinned + ni);
      if ((had & bit) != 0) continue;
      store<u8>(hairpinned + ni, had | bit);
      hairpinNetwork(id, z, v6);
    }
    for (let p: u32 = 0; p < ports; p++) {
      const pw = w + 28 + <usize> p * 12;
      const code = load<u32>(pw);
      const port = load<u32>(pw, 4);
      const target = load<u32>(pw, 8);
      const g = live == 0 ? 0 : sid * GROUPS_PER_SERVICE + p;
      vipFlow(id, ni, vip, code, port, false);
      if (routed) vipFlow(id, ni, vip, code, port, true);
      newFlow(id, vip, code, port, g);
      if (g != 0) group(g, idOf(zone(ni)), code, affinity, first, nb, target);
      for (let k: u32 = 0; k < nb; k++) {
        const at = cell(first + k);
        const owner = load<u32>(at, C_OWNER);
        if (owner == NONE || owner >= GATEWAY_REF) continue;
        replyFlows(n, ni, at, owner, code, target);
      }
    }
    w += 28 + <usize> ports * 12 + (<usize> nb << 2);
    first += nb;
  }
  v6 = false;
  join();
  return 0;
}
