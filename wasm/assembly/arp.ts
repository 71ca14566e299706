// Builders of tables ARP and ARP_REPLY (see ../../agent/PIPELINE.md).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  ARP_REPLY_ACTIONS,
  F_ARP_OWNER_PRIORITY,
  F_ARP_OWNER_TABLE,
  F_ARP_REPLY_PRIORITY,
  F_ARP_REPLY_SHARED_PRIORITY,
  F_ARP_REPLY_SHARED_TABLE,
  F_ARP_REPLY_TABLE,
  F_GATEWAY_LINK_GUARD_PRIORITY,
  F_GATEWAY_LINK_GUARD_TABLE,
  F_GATEWAY_ND_PRIORITY,
  F_GATEWAY_ND_TABLE,
  F_GATEWAY_PING_PRIORITY,
  F_GATEWAY_PING_TABLE,
  F_ND_ADVERT_PRIORITY,
  F_ND_ADVERT_TABLE,
  F_ND_GUARD_PRIORITY,
  F_ND_GUARD_TABLE,
  F_ND_REPLY_SHARED_PRIORITY,
  F_ND_REPLY_SHARED_TABLE,
  F_ND_SOLICIT_PRIORITY,
  F_ND_SOLICIT_TABLE,
  G_AFTER_IP,
  G_AFTER_IP6,
  G_BEFORE_IP,
  G_BEFORE_IP6,
  G_BEFORE_MAC,
  M_LINK_LOCAL,
  M_NO_LL,
  ND_REPLY_ACTIONS,
  T_ARP_REPLY,
  T_FORWARD,
} from "./generated/pipeline";
import { L_COOKIE, L_MAC_TEXT, N_GW_MAC, N_GW_MAC_TEXT, N_ID, V4_SLOT, V6_SLOT } from "./layout";
import {
  begin,
  end,
  LINE_BOUND,
  putDec,
  putHex,
  putHexDigits,
  putMac,
  putNet,
  puts,
  putSlot,
} from "./text";

function regs(n: usize, p: usize, proto: string): void {
  puts(proto);
  putNet(n);
  puts(",reg1=");
  putHex(load<u32>(p, L_COOKIE));
}

export function arpOwner(n: usize, p: usize, ip: usize): void {
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_ARP_OWNER_TABLE,
    F_ARP_OWNER_PRIORITY,
    LINE_BOUND,
  );
  regs(n, p, ",arp,reg0=");
  puts(",arp_tpa=");
  putSlot(ip, V4_SLOT);
  puts(",arp_op=1,actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

/** A request for `ip`: the answering MAC into xreg1, then the shared reply (arpReplyShared). */
export function arpReply(n: usize, port: u32, mac: u64, ip: usize): void {
  begin(load<u32>(n, N_ID), port, F_ARP_REPLY_TABLE, F_ARP_REPLY_PRIORITY, LINE_BOUND);
  puts(",arp,reg0=");
  putNet(n);
  puts(",arp_tpa=");
  putSlot(ip, V4_SLOT);
  puts(",arp_op=1,actions=set_field:");
  putHex(mac);
  puts("->xreg1,goto_table:");
  putDec(T_ARP_REPLY);
  end();
}

/** The reply from the MAC in xreg1, IPs swapped through reg4 (ARP_REPLY_ACTIONS of ../pipeline.ts). */
export function arpReplyShared(): void {
  begin(0, 0, F_ARP_REPLY_SHARED_TABLE, F_ARP_REPLY_SHARED_PRIORITY, LINE_BOUND);
  puts(",arp,actions=");
  puts(ARP_REPLY_ACTIONS);
  end();
}

/** Neighbour solicitation carrying the port's MAC, or none (`own` false: 00:…). */
export function ndSolicit(n: usize, p: usize, own: bool): void {
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_ND_SOLICIT_TABLE,
    F_ND_SOLICIT_PRIORITY,
    LINE_BOUND,
  );
  regs(n, p, ",icmp6,reg0=");
  puts(",icmp_type=135,icmp_code=0,nd_sll=");
  if (own) putMac(p + L_MAC_TEXT);
  else puts(M_NO_LL);
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

/** Neighbour advertisement of an address (`ip` 0: fe80::/10) for the port's MAC or none. */
export function ndAdvert(n: usize, p: usize, ip: usize, own: bool): void {
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_ND_ADVERT_TABLE,
    F_ND_ADVERT_PRIORITY,
    LINE_BOUND,
  );
  regs(n, p, ",icmp6,reg0=");
  puts(",icmp_type=136,icmp_code=0,nd_target=");
  if (ip == 0) puts(M_LINK_LOCAL);
  else putSlot(ip, V6_SLOT);
  puts(",nd_tll=");
  if (own) putMac(p + L_MAC_TEXT);
  else puts(M_NO_LL);
  puts(",actions=goto_table:");
  putDec(T_FORWARD);
  end();
}

export function ndGuard(n: usize, type: u32): void {
  begin(load<u32>(n, N_ID), 0, F_ND_GUARD_TABLE, F_ND_GUARD_PRIORITY, LINE_BOUND);
  puts(",icmp6,reg0=");
  putNet(n);
  puts(",icmp_type=");
  putDec(type);
  puts(",actions=drop");
  end();
}

/**
 * An echo request for the gateway's address (text slot `ip`, IPv6 when `v6`): answered by the
 * gateway in place.
 */
export function gatewayPing(n: usize, ip: usize, v6: bool): void {
  const slot = v6 ? V6_SLOT : V4_SLOT;
  begin(load<u32>(n, N_ID), 0, F_GATEWAY_PING_TABLE, F_GATEWAY_PING_PRIORITY, LINE_BOUND);
  puts(v6 ? ",icmp6,reg0=" : ",icmp,reg0=");
  putNet(n);
  puts(v6 ? ",ipv6_dst=" : ",nw_dst=");
  putSlot(ip, slot);
  puts(v6 ? ",icmp_type=128,icmp_code=0,actions=" : ",icmp_type=8,icmp_code=0,actions=");
  puts(G_BEFORE_MAC);
  putMac(n + N_GW_MAC_TEXT);
  puts(v6 ? G_BEFORE_IP6 : G_BEFORE_IP);
  putSlot(ip, slot);
  puts(v6 ? G_AFTER_IP6 : G_AFTER_IP);
  end();
}

/**
 * A neighbour solicitation for the IPv6 gateway (text slot `ip`; with `linkLocal`, the gateway's
 * link-local address instead, which its router advertisements come from): on to the shared reply.
 */
export function gatewayNd(n: usize, ip: usize, linkLocal: bool = false): void {
  begin(load<u32>(n, N_ID), 0, F_GATEWAY_ND_TABLE, F_GATEWAY_ND_PRIORITY, LINE_BOUND);
  puts(",icmp6,reg0=");
  putNet(n);
  puts(",icmp_type=135,icmp_code=0,nd_target=");
  if (linkLocal) putLinkLocal(load<u64>(n, N_GW_MAC));
  else putSlot(ip, V6_SLOT);
  puts(",actions=set_field:");
  putHex(load<u64>(n, N_GW_MAC));
  puts("->xreg1,set_field:136->icmpv6_type,goto_table:");
  putDec(T_ARP_REPLY);
  end();
}

/**
 * No pod may advertise the gateway's link-local address (which its router advertisements come
 * from) as its own: above ndAdvert's allowance of every link-local target.
 */
export function gatewayLinkGuard(n: usize): void {
  begin(
    load<u32>(n, N_ID),
    0,
    F_GATEWAY_LINK_GUARD_TABLE,
    F_GATEWAY_LINK_GUARD_PRIORITY,
    LINE_BOUND,
  );
  puts(",icmp6,reg0=");
  putNet(n);
  puts(",icmp_type=136,icmp_code=0,nd_target=");
  putLinkLocal(load<u64>(n, N_GW_MAC));
  puts(",actions=drop");
  end();
}

/**
 * The link-local address of `mac` (modified EUI-64, RFC 4291 appendix A) as inet_ntop prints it:
 * `fe80::` and four groups (a gateway MAC's first group, 0x0858, is never 0).
 */
function putLinkLocal(mac: u64): void {
  puts("fe80::");
  putHexDigits(((macByte(mac, 0) ^ 2) << 8) | macByte(mac, 1));
  puts(":");
  putHexDigits((macByte(mac, 2) << 8) | 0xff);
  puts(":");
  putHexDigits(0xfe00 | macByte(mac, 3));
  puts(":");
  putHexDigits((macByte(mac, 4) << 8) | macByte(mac, 5));
}

/** Byte `k` (0 first) of a MAC held as a 48-bit number. */
function macByte(mac: u64, k: u32): u32 {
  return <u32> (mac >>> <u64> (40 - 8 * k)) & 0xff;
}

/** The shared neighbour advertisement (ND_REPLY_ACTIONS of ../pipeline.ts). */
export function ndReplyShared(): void {
  begin(0, 0, F_ND_REPLY_SHARED_TABLE, F_ND_REPLY_SHARED_PRIORITY, LINE_BOUND);
  puts(",icmp6,icmp_type=136,icmp_code=0,actions=");
  puts(ND_REPLY_ACTIONS);
  end();
}
