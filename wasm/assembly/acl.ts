// The security group flows (see ../../agent/PIPELINE.md, "Security groups"): after `compile`,
// `acl` reads the acls section of the model from the input area, checks it (errors worded by
// ../acl_input.ts), adds its lines to the records and joins them all again.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.
//
// Words: acl count; per acl: cookie, rule count; per rule: direction (0 ingress, 1 egress),
// protocol (PROTOCOLS), portMin, portMax (0, 65535 when the rule has none), remote count
// (0xffffffff when absent), then the length of each remote. The remotes' text follows the words.

import {
  AE_BAD_REMOTE,
  AE_DUP_COOKIE,
  AE_HOST_BITS,
  AE_UNKNOWN_COOKIE,
  AF_ACL_COMMIT_PRIORITY,
  AF_ACL_COMMIT_TABLE,
  AF_EGRESS_HOOK_PRIORITY,
  AF_EGRESS_HOOK_TABLE,
  AF_EGRESS_RULE_PRIORITY,
  AF_EGRESS_RULE_TABLE,
  AF_EGRESS_TRACKED_PRIORITY,
  AF_EGRESS_TRACKED_TABLE,
  AF_HOST_COMMIT_PRIORITY,
  AF_HOST_COMMIT_TABLE,
  AF_INGRESS_HOOK_PRIORITY,
  AF_INGRESS_HOOK_TABLE,
  AF_INGRESS_RULE_PRIORITY,
  AF_INGRESS_RULE_TABLE,
  AF_INGRESS_TRACKED_PRIORITY,
  AF_INGRESS_TRACKED_TABLE,
  AS_DONE,
  AS_NEW_ALLOWED,
  AS_UNTRACKED,
  AT_EGRESS_ACL,
  AT_INGRESS_ACL,
  ND_TYPE_0,
  ND_TYPE_1,
  ND_TYPE_2,
  ND_TYPE_3,
  P_DEFAULT,
  PROTO_ANY,
  PROTO_ICMP,
  PROTO_ICMPV6,
  PROTO_TCP,
  PROTO_UDP,
  SAMPLE_DOMAIN,
  SP_DENIED,
  T_FORWARD,
} from "./generated/pipeline";
import { parseIpv4, parseIpv6, wordAt } from "./address";
import { localByCookie, localRecord, net, netCount } from "./input";
import { route, routeCount } from "./route";
import {
  B_INPUT,
  buffer,
  L_COOKIE,
  L_MAC_TEXT,
  L_NET,
  L_OFPORT,
  L_V4_COUNT,
  L_V6_COUNT,
  N_GW6_SLOT,
  N_GW_V6,
  N_HOST_PORT,
  N_ID,
  RT_FROM,
  RT_TO,
} from "./layout";
import { join } from "./output";
import {
  conjunctionOf,
  conjunctionsInit,
  grow,
  mergeConjunctions,
  putConjunction,
} from "./conjunction";
import { putSample } from "./sample";
import {
  actionsEnd,
  begin,
  end,
  LINE_BOUND,
  putc,
  putDec,
  putHex,
  putIpv4,
  putIpv6,
  putMac,
  puts,
  wp,
} from "./text";

const NONE: u32 = 0xffffffff;
const ERROR_ARGS = memory.data(3 * 4);

function fail(code: i32, i: u32, k: u32, j: u32): i32 {
  store<u32>(ERROR_ARGS, i);
  store<u32>(ERROR_ARGS, k, 4);
  store<u32>(ERROR_ARGS, j, 8);
  return code;
}

/** Argument i (0..2) of the last acls error: acl, rule, remote. */
export function aclErrorArg(i: i32): u32 {
  return load<u32>(ERROR_ARGS + (<usize> i << 2));
}

// Own growable buffers: the local port of each acl, and a mark per local port (listed once).
let ports: usize = 0;
let portsCap: usize = 0;
let marks: usize = 0;
let marksCap: usize = 0;

// Rules of all acls (matchPorts counts them), for the conjunctions' table.
let ruleTotal: u32 = 0;

/** The local port index of each acl, checked: a local port's cookie, at most once. */
function matchPorts(acls: u32, rd: usize): i32 {
  const bytes = <usize> acls << 2;
  ports = grow(ports, portsCap, bytes);
  if (portsCap < bytes) portsCap = bytes;
  let p = rd;
  for (let i: u32 = 0; i < acls; i++) {
    const li = localByCookie(load<u32>(p));
    if (li == NONE) return unmark(i, fail(AE_UNKNOWN_COOKIE, i, 0, 0));
    const need = <usize> li + 1;
    if (marksCap < need) {
      const size = need < 4096 ? 4096 : need * 2;
      marks = grow(marks, marksCap, size);
      memory.fill(marks + marksCap, 0, size - marksCap);
      marksCap = size;
    }
    if (load<u8>(marks + li) != 0) return unmark(i, fail(AE_DUP_COOKIE, i, 0, 0));
    store<u8>(marks + li, 1);
    store<u32>(ports + (<usize> i << 2), li);
    const rules = load<u32>(p, 4);
    ruleTotal += rules;
    p += 8;
    for (let k: u32 = 0; k < rules; k++) {
      const remotes = load<u32>(p, 16);
      p += 20 + (remotes == NONE ? 0 : <usize> remotes << 2);
    }
  }
  return unmark(acls, 0);
}

/** Clears the marks of the first `n` acls' ports for the next compile; returns rc. */
function unmark(n: u32, rc: i32): i32 {
  for (let i: u32 = 0; i < n; i++) store<u8>(marks + load<u32>(ports + (<usize> i << 2)), 0);
  return rc;
}

// The zone of each network (by index: the index of the network whose number is the zone): the
// networks the routes join share the smallest number (see `zones`). And per
// zone's index, the families ports with groups send in it (1 IPv4, 2 IPv6): its commit flows.
let zoneOf: usize = 0;
let zoneCap: usize = 0;
let sends: usize = 0;
let sendsCap: usize = 0;

export function idOf(ni: u32): u32 {
  return load<u32>(net(ni), N_ID);
}

export function zone(ni: u32): u32 {
  return load<u32>(zoneOf + (<usize> ni << 2));
}

/** The zone of every network: labels spread along the routes until none gets smaller. */
export function zones(): void {
  const bytes = <usize> netCount << 2;
  zoneOf = grow(zoneOf, zoneCap, bytes);
  if (zoneCap < bytes) zoneCap = bytes;
  sends = grow(sends, sendsCap, <usize> netCount);
  if (sendsCap < <usize> netCount) sendsCap = <usize> netCount;
  for (let i: u32 = 0; i < netCount; i++) {
    store<u32>(zoneOf + (<usize> i << 2), i);
    store<u8>(sends + i, 0);
  }
  let changed = true;
  while (changed) {
    changed = false;
    for (let i: u32 = 0; i < routeCount; i++) {
      const from = load<u32>(route(i), RT_FROM);
      const to = load<u32>(route(i), RT_TO);
      const a = zone(from);
      const b = zone(to);
      if (a == b) continue;
      const z = idOf(a) < idOf(b) ? a : b;
      store<u32>(zoneOf + (<usize> from << 2), z);
      store<u32>(zoneOf + (<usize> to << 2), z);
      changed = true;
    }
  }
}

// A remote, parsed: its address in v4 (IPv4) or WORDS (IPv6, parsed again when written), its
// family and prefix; `prefix` 0 means any address of the family.
let rV6 = false;
let rPrefix: u32 = 0;
let rV4: u32 = 0;
let rAddr: usize = 0;
let rLen: u32 = 0;

/** Parses the remote text at p (len bytes); 0, AE_BAD_REMOTE or AE_HOST_BITS. */
function parseRemote(p: usize, len: u32): i32 {
  let slash: u32 = len;
  for (let i: u32 = 0; i < len; i++) {
    if (load<u8>(p + i) == 47) {
      slash = i;
      break;
    }
  }
  rV6 = false;
  for (let i: u32 = 0; i < slash; i++) {
    if (load<u8>(p + i) == 58) {
      rV6 = true;
      break;
    }
  }
  const bits: u32 = rV6 ? 128 : 32;
  let prefix: u32 = bits;
  if (slash < len) {
    // Digits only, no leading zero (but "0"), at most 3.
    const n = len - slash - 1;
    if (n == 0 || n > 3 || (n > 1 && load<u8>(p + slash + 1) == 48)) return AE_BAD_REMOTE;
    prefix = 0;
    for (let i: u32 = slash + 1; i < len; i++) {
      const d = <u32> load<u8>(p + i) - 48;
      if (d > 9) return AE_BAD_REMOTE;
      prefix = prefix * 10 + d;
    }
    if (prefix > bits) return AE_BAD_REMOTE;
  }
  rPrefix = prefix;
  rAddr = p;
  rLen = slash;
  if (rV6) {
    if (!parseIpv6(p, slash)) return AE_BAD_REMOTE;
    for (let i: u32 = 0; i < 8; i++) {
      const keep = prefix > 16 * i ? (prefix - 16 * i > 16 ? 16 : prefix - 16 * i) : 0;
      const mask: u32 = keep == 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
      if ((wordAt(<i32> i) & ~mask & 0xffff) != 0) return AE_HOST_BITS;
    }
  } else {
    const v = parseIpv4(p, slash);
    if (v < 0) return AE_BAD_REMOTE;
    rV4 = <u32> v;
    if (prefix < 32 && (rV4 << prefix) != 0) return AE_HOST_BITS;
  }
  return 0;
}

/** `,nw_dst=…` (or src, or ipv6_…) for the remote parsed last; nothing for a /0. */
function putRemote(egress: bool): void {
  if (rPrefix == 0) return;
  if (rV6) {
    puts(egress ? ",ipv6_dst=" : ",ipv6_src=");
    parseIpv6(rAddr, rLen);
    putIpv6();
  } else {
    puts(egress ? ",nw_dst=" : ",nw_src=");
    putIpv4(rV4);
  }
  if (rPrefix != (rV6 ? 128 : 32)) {
    putc(47);
    putDec(rPrefix);
  }
}

function protocol(proto: u32, v6: bool): string | null {
  if (proto == PROTO_TCP) return v6 ? "tcp6" : "tcp";
  if (proto == PROTO_UDP) return v6 ? "udp6" : "udp";
  if (proto == PROTO_ICMP) return v6 ? null : "icmp";
  if (proto == PROTO_ICMPV6) return v6 ? "icmp6" : null;
  if (proto == PROTO_ANY) return v6 ? "ipv6" : "ip";
  return null;
}

/** The size of the port block that starts at `a` (the largest aligned one up to `max`). */
export function blockSize(a: u32, max: u32): u32 {
  let size: u32 = 1;
  while (a % (size * 2) == 0 && a + size * 2 - 1 <= max) size *= 2;
  return size;
}

/** How many prefix blocks cover min..max (1 for a rule without ports). */
function blockCount(min: u32, max: u32): u32 {
  if (min == 0 && max == 65535) return 1;
  let n: u32 = 0;
  for (let a = min; a <= max; a += blockSize(a, max)) n++;
  return n;
}

/** `,tp_dst=…` of the block of `size` ports at `a`. */
export function putBlock(a: u32, size: u32): void {
  puts(",tp_dst=");
  if (size == 1) {
    putDec(a);
  } else {
    putHex(a);
    putc(47);
    putHex(0x10000 - size);
  }
}

/** The match of local port p in a rule table. Out: the port alone (reg1), as a route may have
 * changed the network (reg0) already. */
function putPort(p: usize, egress: bool): void {
  if (egress) {
    puts(",reg1=");
    putHex(load<u32>(p, L_COOKIE));
  } else {
    puts(",reg0=");
    putHex(load<u32>(net(load<u32>(p, L_NET)), N_ID));
    puts(",reg7=");
    putHex(load<u32>(p, L_OFPORT));
  }
}

/** What a rule that allows a new connection does: on to FORWARD, or committed and delivered. */
function putAllow(p: usize, egress: bool, z: u32): void {
  if (egress) {
    puts(",actions=set_field:");
    putHex(AS_NEW_ALLOWED);
    puts("->reg6,resubmit(,");
    putDec(T_FORWARD);
    putc(41);
  } else {
    puts(",actions=ct(commit,zone=");
    putDec(z);
    puts("),output:");
    putDec(load<u32>(p, L_OFPORT));
  }
}

function ruleBegin(p: usize, egress: bool, shared: bool): void {
  begin(
    shared ? 0 : load<u32>(net(load<u32>(p, L_NET)), N_ID),
    shared ? 0 : load<u32>(p, L_COOKIE),
    egress ? AF_EGRESS_RULE_TABLE : AF_INGRESS_RULE_TABLE,
    egress ? AF_EGRESS_RULE_PRIORITY : AF_INGRESS_RULE_PRIORITY,
    LINE_BOUND,
  );
}

/** One rule line of local port p for the remote parsed last, per port block. */
function ruleLines(p: usize, egress: bool, proto: string, min: u32, max: u32, z: u32): void {
  const all = min == 0 && max == 65535;
  let a = min;
  while (true) {
    const size = all ? 1 : blockSize(a, max);
    ruleBegin(p, egress, false);
    puts(",ct_state=+new+trk,");
    puts(proto);
    putPort(p, egress);
    putRemote(egress);
    if (!all) putBlock(a, size);
    putAllow(p, egress, z);
    end();
    if (all) return;
    a += size;
    if (a > max) return;
  }
}

/**
 * A rule of local port p in one family as a conjunctive match: the port (with the state and
 * protocol) × its peers (`peers` of them in lens/text, 0: anyone) × the blocks of min..max, one
 * flow per value and one for the conjunction, instead of one per combination. Ports with an
 * equal rule (same words, peers, family and, for ingress, zone) share the conjunction: they add
 * their port's flow only. Peers and blocks are also shared by every rule that names them
 * (conjunction.ts merges equal matches).
 */
function conjunctive(
  p: usize,
  egress: bool,
  proto: string,
  v6: bool,
  rule: usize,
  z: u32,
  peers: u32,
  text: usize,
): void {
  const min = load<u32>(rule, 8);
  const max = load<u32>(rule, 12);
  const remotes = load<u32>(rule, 16);
  const lens = rule + 20;
  const listed: u32 = remotes == NONE ? 0 : remotes;
  let len: usize = 0;
  for (let j: u32 = 0; j < listed; j++) len += load<u32>(lens + (<usize> j << 2));
  const found = conjunctionOf(rule, 20 + (<usize> listed << 2), text, len, v6, egress ? 0 : z);
  const id = found & 0x7fffffff;
  const ranged = !(min == 0 && max == 65535);
  const n: u32 = 1 + (peers > 0 ? 1 : 0) + (ranged ? 1 : 0);
  ruleBegin(p, egress, false);
  puts(",ct_state=+new+trk,");
  puts(proto);
  putPort(p, egress);
  putConjunction(id, 1, n);
  end();
  if (found == id) return;
  if (peers > 0) {
    let at = text;
    for (let j: u32 = 0; j < remotes; j++) {
      at = remoteAt(at, lens, j);
      if (rV6 != v6) continue;
      ruleBegin(p, egress, true);
      puts(v6 ? ",ipv6" : ",ip");
      putRemote(egress);
      putConjunction(id, 2, n);
      end();
    }
  }
  if (ranged) {
    for (let a = min; a <= max;) {
      const size = blockSize(a, max);
      ruleBegin(p, egress, true);
      putc(44);
      puts(proto);
      putBlock(a, size);
      putConjunction(id, n, n);
      end();
      a += size;
    }
  }
  // Shared by the ports: ingress delivers to the port INGRESS_ACL's hook put in reg7.
  ruleBegin(p, egress, true);
  puts(",conj_id=");
  putDec(id);
  puts(v6 ? ",ipv6" : ",ip");
  if (egress) {
    putAllow(p, egress, z);
  } else {
    puts(",actions=ct(commit,zone=");
    putDec(z);
    puts("),output:NXM_NX_REG7[0..15]");
  }
  end();
}

/** Parses remote j of a rule (lengths at `lens`, its text at `at`); returns where the next starts. */
function remoteAt(at: usize, lens: usize, j: u32): usize {
  const len = load<u32>(lens + (<usize> j << 2));
  parseRemote(at, len);
  return at + len;
}

/**
 * The peers of a rule in one family: how many, or NONE when one of them is anyone (a /0), so
 * that the rule needs no peer match.
 */
function familyPeers(remotes: u32, lens: usize, text: usize, v6: bool): u32 {
  let n: u32 = 0;
  let at = text;
  for (let j: u32 = 0; j < remotes; j++) {
    at = remoteAt(at, lens, j);
    if (rV6 != v6) continue;
    if (rPrefix == 0) return NONE;
    n++;
  }
  return n;
}

/** The FORWARD hooks of local port p in one family. */
function hooks(p: usize, v6: bool, z: u32): void {
  const netId = load<u32>(net(load<u32>(p, L_NET)), N_ID);
  const cookie = load<u32>(p, L_COOKIE);
  begin(netId, cookie, AF_EGRESS_HOOK_TABLE, AF_EGRESS_HOOK_PRIORITY, LINE_BOUND);
  // The port alone: a routed packet is in its destination's network (reg0) by now.
  puts(v6 ? ",ipv6,reg1=" : ",ip,reg1=");
  putHex(cookie);
  puts(",reg6=");
  putDec(AS_UNTRACKED);
  puts(",actions=ct(table=");
  putDec(AT_EGRESS_ACL);
  puts(",zone=");
  putDec(z);
  putc(41);
  end();
  begin(netId, cookie, AF_INGRESS_HOOK_TABLE, AF_INGRESS_HOOK_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putHex(netId);
  puts(",reg6=0/0x1,dl_dst=");
  putMac(p + L_MAC_TEXT);
  puts(",actions=set_field:");
  putHex(load<u32>(p, L_OFPORT));
  puts("->reg7,ct(table=");
  putDec(AT_INGRESS_ACL);
  puts(",zone=");
  putDec(z);
  putc(41);
  end();
}

/** A new connection allowed out, now in network `id`: committed in zone `z`. */
function commit(id: u32, z: u32, v6: bool): void {
  begin(id, 0, AF_ACL_COMMIT_TABLE, AF_ACL_COMMIT_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putHex(id);
  puts(",reg6=");
  putHex(AS_NEW_ALLOWED);
  puts(",actions=ct(commit,zone=");
  putDec(z);
  puts("),set_field:");
  putHex(AS_DONE);
  puts("->reg6,resubmit(,");
  putDec(T_FORWARD);
  putc(41);
  end();
}

/**
 * IPv4 (IPv6: `v6`) from the node through network `id`'s host port: committed in zone `z`, past
 * the rules.
 */
function hostCommit(id: u32, hostPort: u32, z: u32, v6: bool): void {
  begin(id, 0, AF_HOST_COMMIT_TABLE, AF_HOST_COMMIT_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg6=" : ",ip,reg6=");
  putDec(AS_UNTRACKED);
  puts(",in_port=");
  putDec(hostPort);
  puts(",actions=ct(commit,zone=");
  putDec(z);
  puts("),set_field:");
  putHex(AS_DONE);
  puts("->reg6,resubmit(,");
  putDec(T_FORWARD);
  putc(41);
  end();
}

/** The pass of tracked traffic and ND, in both tables, and their defaults. */
function shared(): void {
  for (let t = 0; t < 2; t++) {
    const table = t == 0 ? AF_EGRESS_TRACKED_TABLE : AF_INGRESS_TRACKED_TABLE;
    const prio = t == 0 ? AF_EGRESS_TRACKED_PRIORITY : AF_INGRESS_TRACKED_PRIORITY;
    for (let m = 0; m < 6; m++) {
      begin(0, 0, table, prio, LINE_BOUND);
      if (m == 0) puts(",ct_state=+est+trk");
      else if (m == 1) puts(",ct_state=+rel+trk");
      else {
        puts(",icmp6,icmp_type=");
        putDec(m == 2 ? ND_TYPE_0 : m == 3 ? ND_TYPE_1 : m == 4 ? ND_TYPE_2 : ND_TYPE_3);
      }
      if (t == 0) {
        puts(",actions=set_field:");
        putHex(AS_DONE);
        puts("->reg6,resubmit(,");
        putDec(T_FORWARD);
        putc(41);
      } else {
        puts(",actions=output:NXM_NX_REG7[0..15]");
      }
      end();
    }
    begin(0, 0, t == 0 ? AT_EGRESS_ACL : AT_INGRESS_ACL, P_DEFAULT, LINE_BOUND);
    // Flow records: a drop is sampled as denied, and dropped all the same (no output).
    puts(",actions=");
    const start = wp;
    putSample(SAMPLE_DOMAIN, SP_DENIED);
    actionsEnd(start);
    end();
  }
}

/**
 * Adds the security group lines of the acls section in the input area (`words` u32 words, then
 * the remotes' text) to those of the last `compile`, and joins them all again. Returns 0, or an
 * error code (arguments: aclErrorArg).
 */
export function acl(words: u32): i32 {
  const rd = buffer(B_INPUT);
  const count = load<u32>(rd);
  if (count == 0) return 0;
  ruleTotal = 0;
  let rc = matchPorts(count, rd + 4);
  if (rc != 0) return rc;
  shared();
  zones();
  conjunctionsInit(ruleTotal);
  let w = rd + 4;
  let text = rd + (<usize> words << 2);
  for (let i: u32 = 0; i < count; i++) {
    const p = localRecord(load<u32>(ports + (<usize> i << 2)));
    const has4 = load<u32>(p, L_V4_COUNT) > 0;
    const has6 = load<u32>(p, L_V6_COUNT) > 0;
    const zi = zone(load<u32>(p, L_NET));
    const z = idOf(zi);
    if (has4) hooks(p, false, z);
    if (has6) hooks(p, true, z);
    store<u8>(sends + zi, load<u8>(sends + zi) | (has4 ? 1 : 0) | (has6 ? 2 : 0));
    const rules = load<u32>(w, 4);
    w += 8;
    for (let k: u32 = 0; k < rules; k++) {
      const rule = w;
      const egress = load<u32>(w) == 1;
      const proto = load<u32>(w, 4);
      const min = load<u32>(w, 8);
      const max = load<u32>(w, 12);
      const remotes = load<u32>(w, 16);
      const lens = w + 20;
      w = lens + (remotes == NONE ? 0 : <usize> remotes << 2);
      // Every remote is checked, whichever family the port has.
      if (remotes != NONE) {
        let at = text;
        for (let j: u32 = 0; j < remotes; j++) {
          const len = load<u32>(lens + (<usize> j << 2));
          rc = parseRemote(at, len);
          if (rc != 0) return fail(rc, i, k, j);
          at += len;
        }
      }
      for (let f = 0; f < 2; f++) {
        const v6 = f == 1;
        const name = protocol(proto, v6);
        if (!(v6 ? has6 : has4) || name === null) continue;
        const peers = remotes == NONE ? NONE : familyPeers(remotes, lens, text, v6);
        if (peers == 0) continue;
        // One combination: its line as it is; more: a conjunction of the dimensions.
        if ((peers == NONE ? 1 : peers) * blockCount(min, max) > 1) {
          conjunctive(p, egress, name, v6, rule, z, peers == NONE ? 0 : peers, text);
          continue;
        }
        if (remotes == NONE) {
          rPrefix = 0;
          ruleLines(p, egress, name, min, max, z);
          continue;
        }
        let at = text;
        for (let j: u32 = 0; j < remotes; j++) {
          const len = load<u32>(lens + (<usize> j << 2));
          parseRemote(at, len);
          at += len;
          if (rV6 == v6) ruleLines(p, egress, name, min, max, z);
        }
      }
      if (remotes != NONE) {
        for (let j: u32 = 0; j < remotes; j++) text += load<u32>(lens + (<usize> j << 2));
      }
    }
  }
  // Every network of a zone: a route may take the connection into any of them.
  for (let ni: u32 = 0; ni < netCount; ni++) {
    const zi = zone(ni);
    const f = load<u8>(sends + zi);
    if (f & 1) commit(idOf(ni), idOf(zi), false);
    if (f & 2) commit(idOf(ni), idOf(zi), true);
    const hostPort = load<u32>(net(ni), N_HOST_PORT);
    // A host port carries the families the network has gateways of (builders.ts).
    const n = net(ni);
    const gw6 = load<u32>(n, N_GW_V6) != 0;
    if (f & 1 && hostPort != 0 && !gw6) hostCommit(idOf(ni), hostPort, idOf(zi), false);
    const v6Host = hostPort != 0 && (gw6 || load<u32>(n, N_GW6_SLOT) != 0);
    if (f & 2 && v6Host) hostCommit(idOf(ni), hostPort, idOf(zi), true);
  }
  join();
  mergeConjunctions();
  return 0;
}
