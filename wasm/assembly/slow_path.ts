// The router's punts (see ../../agent/PIPELINE.md, "Router errors"): the flows that hand a routed
// packet to the agent's slow path, which answers as the gateway with an ICMP error. A TTL that
// runs out needs no flow of its own: routeTo's `dec_ttl` hands it up.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  F_GATEWAY_SELF_PRIORITY,
  F_GATEWAY_SELF_TABLE,
  F_RA_SOLICIT_PRIORITY,
  F_RA_SOLICIT_TABLE,
  F_ROUTE_MISS_PRIORITY,
  F_ROUTE_MISS_TABLE,
  F_TOO_BIG_PRIORITY,
  F_TOO_BIG_TABLE,
  PUNT_ACTION,
  PUNT_GATEWAY,
  PUNT_LARGER_BIT,
  PUNT_REGISTER,
  PUNT_SOLICIT,
  PUNT_TOO_BIG,
  PUNT_UNREACHABLE,
} from "./generated/pipeline";
import { v4Slot, v6Slot } from "./input";
import { N_GW6_SLOT, N_GW_SLOT, N_GW_V6, N_ID, V4_SLOT, V6_SLOT } from "./layout";
import { begin, end, LINE_BOUND, putDec, putHex, putNet, puts, putSlot } from "./text";

/** Ethernet's header: check_pkt_larger counts it, an MTU does not. */
const ETH_HEADER: u32 = 14;

/** `set_field:WHY->reg5,CONTROLLER:65535`: the reason, then up to the agent. */
function punt(why: u32): void {
  puts("set_field:");
  putHex(why);
  puts("->");
  puts(PUNT_REGISTER);
  puts(",");
  puts(PUNT_ACTION);
}

/**
 * IPv4 (IPv6: `v6`) of a routed network that no route takes: destination unreachable (ICMPv6: no
 * route).
 */
export function routeMiss(n: usize, v6: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_ROUTE_MISS_TABLE, F_ROUTE_MISS_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  puts(",actions=");
  punt(PUNT_UNREACHABLE);
  end();
}

/**
 * IPv4 (IPv6: `v6`) to the gateway's own address of that family that it does not answer (not a
 * ping, nor ND): port unreachable.
 */
export function gatewaySelf(n: usize, v6: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_GATEWAY_SELF_TABLE, F_GATEWAY_SELF_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  if (v6) {
    puts(",ipv6_dst=");
    putSlot(v6Slot(gateway6(n) - 1), V6_SLOT);
  } else {
    puts(",nw_dst=");
    putSlot(v4Slot(load<u32>(n, N_GW_SLOT) - 1), V4_SLOT);
  }
  puts(",actions=");
  punt(PUNT_GATEWAY);
  end();
}

/** 1 + the v6 text index of network n's IPv6 gateway: an IPv6-only one's, or dual stack's gateway6. */
function gateway6(n: usize): u32 {
  return load<u32>(n, N_GW_V6) != 0 ? load<u32>(n, N_GW_SLOT) : load<u32>(n, N_GW6_SLOT);
}

/**
 * In a route's actions: bit 0 of reg5 says whether the packet is larger than the destination's
 * `mtu` (FORWARD's tooBig then hands it up).
 */
export function checkLarger(mtu: u32): void {
  puts("check_pkt_larger(");
  putDec(mtu + ETH_HEADER);
  puts(")->");
  puts(PUNT_LARGER_BIT);
  puts(",");
}

/**
 * A routed IPv4 (IPv6: `v6`) packet into network `n` larger than its `mtu` (marked by
 * checkLarger): to the slow path, which answers "fragmentation needed" / "packet too big" with the
 * MTU (or fragments an IPv4 one without DF; an IPv6 router never fragments).
 */
export function tooBig(n: usize, mtu: u32, v6: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_TOO_BIG_TABLE, F_TOO_BIG_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putNet(n);
  puts(",");
  puts(PUNT_REGISTER);
  puts("=0x1/0x1,actions=");
  punt((mtu << 16) | PUNT_TOO_BIG);
  end();
}

/**
 * A router solicitation from a pod of network `n`, whose gateway advertises: to the slow path,
 * which answers with the network's router advertisement.
 */
export function raSolicit(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_RA_SOLICIT_TABLE, F_RA_SOLICIT_PRIORITY, LINE_BOUND);
  puts(",icmp6,reg0=");
  putNet(n);
  puts(",icmp_type=133,icmp_code=0,actions=");
  punt(PUNT_SOLICIT);
  end();
}
