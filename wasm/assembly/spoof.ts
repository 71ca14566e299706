// Builders of table SPOOF (see ../../agent/PIPELINE.md).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  DSCP_AFTER,
  DSCP_BEFORE,
  F_SPOOF_ARP_PRIORITY,
  F_SPOOF_ARP_TABLE,
  F_SPOOF_DAD_PRIORITY,
  F_SPOOF_DAD_TABLE,
  F_SPOOF_IPV4_PRIORITY,
  F_SPOOF_IPV4_TABLE,
  F_SPOOF_IPV6_PRIORITY,
  F_SPOOF_IPV6_TABLE,
  M_LINK_LOCAL,
  T_ARP,
} from "./generated/pipeline";
import { L_COOKIE, L_MAC_TEXT, L_OFPORT, N_DSCP, N_ID, V4_SLOT, V6_SLOT } from "./layout";
import { begin, end, LINE_BOUND, putDec, putMac, puts, putSlot } from "./text";

/** The head of a SPOOF flow of port p: `PROTO,in_port=P,dl_src=M` (proto: ",ip,in_port="). */
export function spoofHead(n: usize, p: usize, table: u32, priority: u32, proto: string): void {
  begin(load<u32>(n, N_ID), load<u32>(p, L_COOKIE), table, priority, LINE_BOUND);
  puts(proto);
  putDec(load<u32>(p, L_OFPORT));
  puts(",dl_src=");
  putMac(p + L_MAC_TEXT);
}

/**
 * The actions of a SPOOF flow that lets IP of network n through: the network's DSCP marking, if it
 * has one, then on to ARP.
 */
export function spoofIpActions(n: usize): void {
  puts(",actions=");
  const dscp = load<u32>(n, N_DSCP);
  if (dscp > 0) {
    puts(DSCP_BEFORE);
    putDec(dscp - 1);
    puts(DSCP_AFTER);
  }
  puts("goto_table:");
  putDec(T_ARP);
}

export function spoofIpv4(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, F_SPOOF_IPV4_TABLE, F_SPOOF_IPV4_PRIORITY, ",ip,in_port=");
  puts(",nw_src=");
  putSlot(ip, V4_SLOT);
  spoofIpActions(n);
  end();
}

/** ARP from the port's MAC and IPv4; `ip` 0 stands for 0.0.0.0 (ARP probe, RFC 5227). */
export function spoofArp(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, F_SPOOF_ARP_TABLE, F_SPOOF_ARP_PRIORITY, ",arp,in_port=");
  puts(",arp_spa=");
  if (ip == 0) puts("0.0.0.0");
  else putSlot(ip, V4_SLOT);
  puts(",arp_sha=");
  putMac(p + L_MAC_TEXT);
  puts(",actions=goto_table:");
  putDec(T_ARP);
  end();
}

/** IPv6 from the port's MAC and one of its addresses; `ip` 0 stands for fe80::/10. */
export function spoofIpv6(n: usize, p: usize, ip: usize): void {
  spoofHead(n, p, F_SPOOF_IPV6_TABLE, F_SPOOF_IPV6_PRIORITY, ",ipv6,in_port=");
  puts(",ipv6_src=");
  if (ip == 0) puts(M_LINK_LOCAL);
  else putSlot(ip, V6_SLOT);
  spoofIpActions(n);
  end();
}

export function spoofDad(n: usize, p: usize): void {
  spoofHead(n, p, F_SPOOF_DAD_TABLE, F_SPOOF_DAD_PRIORITY, ",icmp6,in_port=");
  puts(",ipv6_src=::,icmp_type=135,icmp_code=0");
  spoofIpActions(n);
  end();
}
