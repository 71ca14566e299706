// Growable buffers in linear memory and the layout of the parsed model's records.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

/**
 * Local port i owns an address as i, remote port j as REMOTE_REF + j, network n's gateway as
 * GATEWAY_REF + n.
 */
export const REMOTE_REF: u32 = 1 << 30;
export const GATEWAY_REF: u32 = 1 << 31;

export const B_INPUT = 0;
export const B_NETS = 1;
export const B_LOCALS = 2;
export const B_REMOTES = 3;
export const B_V4 = 4;
export const B_V6 = 5;
export const B_HASH = 6;
export const B_NET_ORDER = 7;
export const B_LOCAL_ORDER = 8;
export const B_REMOTE_ORDER = 9;
export const B_NODES = 10;
export const B_SORT_TMP = 11;
export const B_TEXT = 12;
export const B_RECS = 13;
export const B_RECS_TMP = 14;
export const B_OUT = 15;
export const B_ROUTES = 16;
export const B_KEY = 17;
export const B_HASH_ENTRIES = 18;
const BUFFERS = memory.data(19 * 8);

export function buffer(id: i32): usize {
  return <usize> load<u32>(BUFFERS + (<usize> id << 3));
}

export function capacity(id: i32): usize {
  return <usize> load<u32>(BUFFERS + (<usize> id << 3), 4);
}

/** Grows buffer `id` to at least `bytes` (keeping its contents) and returns its address. */
export function reserve(id: i32, bytes: usize): usize {
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

// Network, 96 bytes; its gateway as a v4 text slot, a number and the MAC's 17 characters.
export const NET_SIZE: usize = 104;

export const N_ID = 0;
export const N_TYPE = 4;
export const N_SEGMENT = 8;
export const N_PHYSNET = 12;
export const N_LOCAL_FIRST = 16; // into B_LOCAL_ORDER
export const N_LOCAL_COUNT = 20;
export const N_REMOTE_FIRST = 24; // into B_REMOTE_ORDER
export const N_REMOTE_COUNT = 28;
export const N_NODE_FIRST = 32; // into B_NODES
export const N_NODE_COUNT = 36;
export const N_GW_SLOT = 40; // 1 + index into the v4 (or v6) texts; 0: no gateway
export const N_GW_V6 = 44; // 1: the gateway is IPv6
export const N_GW_MAC = 48;
export const N_GW_MAC_TEXT = 64; // 17 characters
export const N_GW6_SLOT = 84; // 1 + index into the v6 texts of a dual-stack network's IPv6 gateway
export const N_DSCP = 88; // 1 + the DSCP its pods' IP traffic is marked with; 0: no marking
export const N_HOST_PORT = 92; // ofport of the network's host port; 0: none
export const N_ADVERTS = 96; // 1: the gateway sends router advertisements

// Local port, 64 bytes; the MAC as its 17 characters and as a number (what ARP replies stash).
export const LOCAL_SIZE: usize = 64;

export const L_OFPORT = 0;
export const L_NET = 4;
export const L_COOKIE = 8;
export const L_V4_FIRST = 12;
export const L_V4_COUNT = 16;
export const L_V6_FIRST = 20;
export const L_V6_COUNT = 24;
export const L_MAC_TEXT = 32;
export const L_MAC = 56;

// Remote port, 72 bytes; the node IP as text slot, the MAC as its 17 characters and a number.
export const REMOTE_SIZE: usize = 72;

export const R_NET = 0;
export const R_V4_FIRST = 4;
export const R_V4_COUNT = 8;
export const R_NODE = 12;
export const R_NODE_TEXT = 16; // 16-byte text slot (see putSlot)
export const R_MAC_TEXT = 32;
export const R_MAC = 56;
export const R_V6_FIRST = 64; // its IPv6 addresses: the next hops of IPv6 routes (route6.ts)
export const R_V6_COUNT = 68;

// Address texts: slots of a length byte and the characters (IPv4 16 bytes, IPv6 48 bytes).
export const V4_SLOT: usize = 16;

export const V6_SLOT: usize = 48;

// Route, 80 bytes (route.ts): the networks (indexes), the CIDR, whether static, the next hop, the
// MTU to check; an IPv6 route (route6.ts) has its destination as a v6 text slot instead of RT_BASE.
export const ROUTE_SIZE: usize = 80;
export const RT_FROM = 0;
export const RT_TO = 4;
export const RT_BASE = 8;
export const RT_PREFIX = 12;
export const RT_STATIC = 16; // 1: a static route (via)
export const RT_HOP = 20; // the next hop's owner ref (REMOTE_REF…), or NONE while it has none
export const RT_MTU = 24; // the destination's MTU to check (0: none)
export const RT_V6 = 28; // 1: an IPv6 route
export const RT_DST6 = 32; // an IPv6 route's destination base, a v6 text slot (48 bytes)
