// Input decoding: the words and strings ../flows.ts writes, parsed and checked (address syntax,
// references, uniqueness in one open-addressing hash table), into the model's records, grouped
// by network.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  E_BAD_GATEWAY,
  E_BAD_GATEWAY6,
  E_BAD_GATEWAY_MAC,
  E_BAD_IP,
  E_BAD_MAC,
  E_BAD_NODE_IP,
  E_DUP_COOKIE,
  E_DUP_IP,
  E_DUP_MAC,
  E_DUP_NETWORK,
  E_DUP_OFPORT,
  E_DUP_SEGMENT,
  E_DUP_VNI,
  E_OFPORT_IS_PHYSNET,
  E_OFPORT_IS_TUNNEL,
  E_PHYSNET_IS_TUNNEL,
  E_UNKNOWN_NETWORK,
  K_LOCAL,
  K_NETWORK,
  K_REMOTE,
  VXLAN,
} from "./generated/pipeline";
import { parseIpv4, parseIpv6, parseMac, unicastIpv4, unicastIpv6, wordAt } from "./address";
import {
  B_HASH,
  B_HASH_ENTRIES,
  B_INPUT,
  B_LOCAL_ORDER,
  B_LOCALS,
  B_NET_ORDER,
  B_NETS,
  B_NODES,
  B_REMOTE_ORDER,
  B_REMOTES,
  B_SORT_TMP,
  B_V4,
  B_V6,
  buffer,
  GATEWAY_REF,
  L_COOKIE,
  L_MAC,
  L_MAC_TEXT,
  L_NET,
  L_OFPORT,
  L_V4_COUNT,
  L_V4_FIRST,
  L_V6_COUNT,
  L_V6_FIRST,
  LOCAL_SIZE,
  N_ADVERTS,
  N_DSCP,
  N_GW6_SLOT,
  N_GW_MAC,
  N_GW_MAC_TEXT,
  N_GW_SLOT,
  N_GW_V6,
  N_HOST_PORT,
  N_ID,
  N_LOCAL_FIRST,
  N_NODE_FIRST,
  N_PHYSNET,
  N_REMOTE_FIRST,
  N_SEGMENT,
  N_TYPE,
  NET_SIZE,
  R_MAC,
  R_MAC_TEXT,
  R_NET,
  R_NODE,
  R_NODE_TEXT,
  R_V4_COUNT,
  R_V4_FIRST,
  R_V6_COUNT,
  R_V6_FIRST,
  REMOTE_REF,
  REMOTE_SIZE,
  reserve,
  V4_SLOT,
  V6_SLOT,
} from "./layout";
import { ipv4ToSlot, ipv6ToSlot, macText, textInit } from "./text";

let rd: usize = 0; // next word
let blob: usize = 0; // next string byte

export function word(): u32 {
  const v = load<u32>(rd);
  rd += 4;
  return v;
}

/** The next `len` bytes of the blob: their address (the caller reads them before the next call). */
export function bytes(len: u32): usize {
  const p = blob;
  blob += len;
  return p;
}

/** Returns the input area for `bytes` bytes of words and strings (called by ../flows.ts). */
export function input(bytes: u32): usize {
  return reserve(B_INPUT, <usize> bytes);
}

const ERROR_ARGS = memory.data(5 * 4);

export function fail(code: i32, kind: u32, index: u32, sub: u32, otherKind: u32, other: u32): i32 {
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
  return ref >= GATEWAY_REF ? K_NETWORK : ref >= REMOTE_REF ? K_REMOTE : K_LOCAL;
}

function refIndex(ref: u32): u32 {
  return ref >= GATEWAY_REF ? ref - GATEWAY_REF : ref >= REMOTE_REF ? ref - REMOTE_REF : ref;
}

const H_NET_ID: u64 = 1;
const H_VNI: u64 = 2;
const H_SEGMENT: u64 = 3;
const H_OFPORT: u64 = 5;
const H_COOKIE: u64 = 6;
const H_MAC: u64 = 7;
const H_IP4: u64 = 8;
const H_IP6: u64 = 9;
export const NONE: u32 = 0xffffffff;
// The claims: an open-addressing table of u32 slots over the entries in claim order (k0, k1, k2,
// owner: 32 bytes). A slot holds 1 + the entry's index in its low bits (0: empty) and bits of the
// key's hash in the others, so that a probe reads the entry only on a likely match. Compact slots
// keep the part probed at random small (4 bytes a slot: 512 KB at 10,000 ports, where 32-byte
// slots of the keys took 4 MB), and the entries are written one after another.
let hashBase: usize = 0;
let hashMask: u32 = 0;
let tagMask: u32 = 0;
let entryBase: usize = 0;
let entryCount: u32 = 0;

/** Makes room for at most `entries` claims. */
function hashInit(entries: u32): void {
  let cap: u32 = 64;
  // Load ≤ 2/3 (entries is an upper bound).
  while (cap < entries + (entries >>> 1)) cap <<= 1;
  hashBase = reserve(B_HASH, <usize> cap << 2);
  memory.fill(hashBase, 0, <usize> cap << 2);
  entryBase = reserve(B_HASH_ENTRIES, <usize> entries << 5);
  entryCount = 0;
  hashMask = cap - 1;
  // The bits above the largest index + 1 carry the hash (none from 2^31 entries on).
  tagMask = <u32> ~((<u64> 1 << <u64> (32 - clz(entries))) - 1);
}

function key0(tag: u64, net: u32): u64 {
  return (tag << 32) | <u64> net;
}

function hash(k0: u64, k1: u64, k2: u64): u64 {
  const h = (k0 ^ (k1 * 0x9e3779b97f4a7c15) ^ (k2 * 0xc2b2ae3d27d4eb4f)) * 0xff51afd7ed558ccd;
  return h ^ (h >>> 29);
}

// Where `find` stopped (the empty slot a new key goes to) and the key's tag.
let slot: usize = 0;
let slotTag: u32 = 0;

/** The entry of key (k0, k1, k2), or 0 when it has none (then `slot` is where it goes). */
function find(k0: u64, k1: u64, k2: u64): usize {
  const h = hash(k0, k1, k2);
  const tag = <u32> (h >>> 32) & tagMask;
  slotTag = tag;
  let i = <u32> h & hashMask;
  while (true) {
    slot = hashBase + (<usize> i << 2);
    const s = load<u32>(slot);
    if (s == 0) return 0;
    if ((s & tagMask) == tag) {
      const e = entryBase + (<usize> ((s & ~tagMask) - 1) << 5);
      if (load<u64>(e) == k0 && load<u64>(e, 8) == k1 && load<u64>(e, 16) == k2) return e;
    }
    i = (i + 1) & hashMask;
  }
}

/** The owner of key (k0, k1, k2); when there is none, makes it `owner` and returns NONE. */
function claim(k0: u64, k1: u64, k2: u64, owner: u32): u32 {
  const found = find(k0, k1, k2);
  if (found != 0) return load<u32>(found, 24);
  const e = entryBase + (<usize> entryCount << 5);
  store<u64>(e, k0);
  store<u64>(e, k1, 8);
  store<u64>(e, k2, 16);
  store<u32>(e, owner, 24);
  entryCount++;
  store<u32>(slot, slotTag | entryCount);
  return NONE;
}

/** The owner of a key, or NONE (nothing inserted). */
function owner(k0: u64, k1: u64): u32 {
  const found = find(k0, k1, 0);
  return found == 0 ? NONE : load<u32>(found, 24);
}

export let tunnelPort: u32 = 0;
/** Whether a network has an IPv6 gateway (then the shared neighbour advertisement is needed). */
export let v6Gateways = false;
export let netCount: u32 = 0;
let nets: usize = 0;
let locals: usize = 0;
let remotes: usize = 0;
let v4Texts: usize = 0;
let v6Texts: usize = 0;

export function net(i: u32): usize {
  return nets + <usize> i * NET_SIZE;
}

export function local(i: u32): usize {
  return locals + <usize> i * LOCAL_SIZE;
}

export function remote(i: u32): usize {
  return remotes + <usize> i * REMOTE_SIZE;
}

/** The index of the local port with `cookie`, or NONE (acl.ts, after a compile). */
export function localByCookie(cookie: u32): u32 {
  return owner(key0(H_COOKIE, 0), <u64> cookie);
}

/** The index of the local port with `ofport`, or NONE (mirror.ts, after a compile). */
export function localByOfport(ofport: u32): u32 {
  const i = owner(key0(H_OFPORT, 0), <u64> ofport);
  return i < REMOTE_REF ? i : NONE;
}

/** The record of local port i (acl.ts). */
export function localRecord(i: u32): usize {
  return local(i);
}

export function localAt(order: u32): usize {
  return local(<u32> load<u64>(buffer(B_LOCAL_ORDER) + (<usize> order << 3)));
}

export function remoteAt(order: u32): usize {
  return remote(<u32> load<u64>(buffer(B_REMOTE_ORDER) + (<usize> order << 3)));
}

export function v4Slot(i: u32): usize {
  return v4Texts + <usize> i * V4_SLOT;
}

export function v6Slot(i: u32): usize {
  return v6Texts + <usize> i * V6_SLOT;
}

let ipCount: u32 = 0;
let v4Count: u32 = 0;
let v6Count: u32 = 0;

/**
 * Parses the `count` addresses of port `ref` (kind, index) from the blob, claims them in network
 * `ni` and appends new ones to the pools.
 */
function addresses(kind: u32, index: u32, ref: u32, ni: u32, count: u32): i32 {
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
      const other = claimIpv6(ni, ref);
      if (other == ref) continue;
      if (other != NONE) return fail(E_DUP_IP, kind, index, k, refKind(other), refIndex(other));
      ipv6ToSlot(v6Slot(v6Count++));
    } else {
      const v = parseIpv4(p, len);
      if (v < 0 || !unicastIpv4(<u32> v)) return fail(E_BAD_IP, kind, index, k, 0, 0);
      const other = claim(key0(H_IP4, ni), <u64> v, 0, ref);
      if (other == ref) continue;
      if (other != NONE) return fail(E_DUP_IP, kind, index, k, refKind(other), refIndex(other));
      ipv4ToSlot(v4Slot(v4Count++), <u32> v);
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

/** The owner (see REMOTE_REF) of IPv4 `v` in network `ni`, or NONE. */
export function ipv4Owner(ni: u32, v: u32): u32 {
  return owner(key0(H_IP4, ni), <u64> v);
}

/** Index of the network with `id`, or NONE. */
export function findNet(id: u32): u32 {
  return owner(key0(H_NET_ID, 0), <u64> id);
}

function parseNetworks(): i32 {
  for (let i: u32 = 0; i < netCount; i++) {
    const n = net(i);
    const id = word();
    const type = word();
    const segment = word();
    const physnet = word();
    const gwLen = word();
    const gwMacLen = word();
    const gw6Len = word();
    const dscp = word();
    const hostPort = word();
    const adverts = word();
    memory.fill(n, 0, NET_SIZE);
    store<u32>(n, adverts, N_ADVERTS);
    store<u32>(n, dscp, N_DSCP);
    store<u32>(n, hostPort, N_HOST_PORT);
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
      // Its port number is taken for the local ports (the first network on it owns it).
      claim(key0(H_OFPORT, 0), <u64> physnet, 0, GATEWAY_REF + i);
    }
    if (gwLen > 0) {
      const rc = parseGateway(n, i, gwLen - 1, gwMacLen - 1);
      if (rc != 0) return rc;
    }
    if (gw6Len > 0) {
      const rc = parseGateway6(n, i, gw6Len - 1);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

/**
 * A dual-stack network's IPv6 gateway (`len` bytes of the blob), besides its gateway: claimed
 * like it, into the v6 texts (N_GW6_SLOT). Its MAC is the gateway's.
 */
function parseGateway6(n: usize, i: u32, len: u32): i32 {
  const p = blob;
  blob += len;
  if (!parseIpv6(p, len) || !unicastIpv6()) return fail(E_BAD_GATEWAY6, K_NETWORK, i, 0, 0, 0);
  store<u32>(n, putGatewayIpv6(i), N_GW6_SLOT);
  return 0;
}

/** Words `first`..`first + 3` of the IPv6 address just parsed, as one number. */
function v6Half(first: i32): u64 {
  return (<u64> wordAt(first) << 48) | (<u64> wordAt(first + 1) << 32) |
    (<u64> wordAt(first + 2) << 16) | <u64> wordAt(first + 3);
}

/** Claims the IPv6 address just parsed for `ref` in network `net`: the claimant it had before. */
function claimIpv6(net: u32, ref: u32): u32 {
  return claim(key0(H_IP6, net), v6Half(0), v6Half(4), ref);
}

/** The owner (see REMOTE_REF) of the IPv6 address just parsed in network `ni`, or NONE. */
export function ipv6Owner(ni: u32): u32 {
  const found = find(key0(H_IP6, ni), v6Half(0), v6Half(4));
  return found == 0 ? NONE : load<u32>(found, 24);
}

/** The IPv6 gateway just parsed, of network index i: claimed, written as text; its v6 slot count. */
function putGatewayIpv6(i: u32): u32 {
  claimIpv6(i, GATEWAY_REF + i);
  ipv6ToSlot(v6Slot(v6Count++));
  v6Gateways = true;
  return v6Count;
}

/**
 * The gateway of network `n` (index i) from the blob: its address (`len` bytes; IPv4 or IPv6),
 * then its MAC. The address goes to the v4 or v6 texts (N_GW_SLOT, N_GW_V6).
 */
function parseGateway(n: usize, i: u32, len: u32, macLen: u32): i32 {
  const p = blob;
  blob += len;
  let v6 = false;
  for (let k: u32 = 0; k < len; k++) {
    if (load<u8>(p + k) == 58) {
      v6 = true;
      break;
    }
  }
  let v: i64 = 0;
  if (v6) {
    if (!parseIpv6(p, len) || !unicastIpv6()) return fail(E_BAD_GATEWAY, K_NETWORK, i, 0, 0, 0);
  } else {
    v = parseIpv4(p, len);
    if (v < 0 || !unicastIpv4(<u32> v)) return fail(E_BAD_GATEWAY, K_NETWORK, i, 0, 0, 0);
  }
  const mac = parseMac(blob, macLen);
  blob += macLen;
  if (mac < 0) return fail(E_BAD_GATEWAY_MAC, K_NETWORK, i, 0, 0, 0);
  // The gateway's address and MAC are the network's: no port may claim them.
  claim(key0(H_MAC, i), <u64> mac, 0, GATEWAY_REF + i);
  if (v6) {
    store<u32>(n, putGatewayIpv6(i), N_GW_SLOT);
    store<u32>(n, 1, N_GW_V6);
  } else {
    claim(key0(H_IP4, i), <u64> v, 0, GATEWAY_REF + i);
    ipv4ToSlot(v4Slot(v4Count++), <u32> v);
    store<u32>(n, v4Count, N_GW_SLOT);
  }
  store<u64>(n, <u64> mac, N_GW_MAC);
  macText(n + N_GW_MAC_TEXT, <u64> mac);
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
    // A physnet port's number is claimed by its network (parseNetworks).
    let other = claim(key0(H_OFPORT, 0), <u64> ofport, 0, i);
    if (other >= GATEWAY_REF && other != NONE) {
      return fail(E_OFPORT_IS_PHYSNET, K_LOCAL, i, 0, K_NETWORK, other - GATEWAY_REF);
    }
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
    rc = addresses(K_LOCAL, i, i, ni, ips);
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
    ipv4ToSlot(r + R_NODE_TEXT, <u32> node);
    const v4 = v4Count;
    const v6 = v6Count;
    rc = addresses(K_REMOTE, i, ref, ni, ips);
    if (rc != 0) return rc;
    store<u32>(r, v4, R_V4_FIRST);
    store<u32>(r, v4Count - v4, R_V4_COUNT);
    store<u32>(r, v6, R_V6_FIRST);
    store<u32>(r, v6Count - v6, R_V6_COUNT);
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

/**
 * Decodes and checks the model in the input area (`words` u32 words, then the strings; layout at
 * `compile` in flows.ts) and groups it by network, networks in id order. Returns 0, or an error
 * code (arguments: errorArg).
 */
export function decode(words: u32): i32 {
  rd = buffer(B_INPUT);
  blob = rd + (<usize> words << 2);
  tunnelPort = word();
  netCount = word();
  const localCount = word();
  const remoteCount = word();
  ipCount = word();
  v6Gateways = false;
  v4Count = 0;
  v6Count = 0;

  nets = reserve(B_NETS, <usize> netCount * NET_SIZE);
  locals = reserve(B_LOCALS, <usize> localCount * LOCAL_SIZE);
  remotes = reserve(B_REMOTES, <usize> remoteCount * REMOTE_SIZE);
  v4Texts = reserve(B_V4, <usize> ipCount * V4_SLOT + 64);
  v6Texts = reserve(B_V6, <usize> ipCount * V6_SLOT + 64);
  reserve(B_NET_ORDER, <usize> netCount << 3);
  reserve(B_LOCAL_ORDER, <usize> localCount << 3);
  reserve(B_REMOTE_ORDER, <usize> remoteCount << 3);
  reserve(B_NODES, <usize> remoteCount << 3);
  hashInit(5 * netCount + 4 * localCount + remoteCount + ipCount);
  // No lines yet (addresses are rendered straight into their slots).
  textInit();

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
  return 0;
}
