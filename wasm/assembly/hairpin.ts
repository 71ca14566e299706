// Hairpin (see ../../agent/PIPELINE.md, "Services"): a backend's connection to its own service.
// The select group may pick the client itself; delivered as it is, the backend would get a packet
// from its own address (dropped by its kernel as a martian) on the port it came in on (which
// Open vSwitch does not output to). So a connection translated to the backend that opened it is
// source-NATed to the VIP in a second conntrack zone (the network's zone holds its DNAT) and sent
// back out of its port; the replies are un-NATed in both zones, in the reverse order.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  HAIRPIN_ZONE_BASE,
  SF_HAIRPIN_AGAIN_PRIORITY,
  SF_HAIRPIN_AGAIN_TABLE,
  SF_HAIRPIN_DELIVER_PRIORITY,
  SF_HAIRPIN_DELIVER_TABLE,
  SF_HAIRPIN_REPLY_PRIORITY,
  SF_HAIRPIN_REPLY_TABLE,
  SF_HAIRPIN_SNAT_PRIORITY,
  SF_HAIRPIN_SNAT_TABLE,
  SF_HAIRPIN_UNDO_PRIORITY,
  SF_HAIRPIN_UNDO_TABLE,
  ST_HAIRPIN,
  T_ARP,
} from "./generated/pipeline";
import { begin, end, LINE_BOUND, putDec, putHex, putMac, puts } from "./text";
import { putCell } from "./service_cell";
import { L_COOKIE, L_MAC_TEXT } from "./layout";

/** Whether a network of conntrack zone `z` can have hairpin flows (its hairpin zone fits). */
export function hairpinZoneFits(z: u32): bool {
  return z < HAIRPIN_ZONE_BASE;
}

function zoneOf(z: u32): void {
  puts(",zone=");
  putDec(HAIRPIN_ZONE_BASE + z);
}

/**
 * The flows of one local backend (port record `lp`, address cell `backend`) of a service on `vip`
 * (a cell) of network `id` in zone `z`, IPv6 ones if `v6`: its connections translated to itself are
 * source-NATed to the VIP; what it sends to the VIP first meets the hairpin zone (a reply there is
 * un-SNATed); what comes from the VIP to it, both NATs done, goes back out of its port.
 */
export function hairpinBackend(
  id: u32,
  z: u32,
  lp: usize,
  backend: usize,
  vip: usize,
  v6: bool,
): void {
  const cookie = load<u32>(lp, L_COOKIE);
  const ip = v6 ? ",ipv6" : ",ip";
  const src = v6 ? ",ipv6_src=" : ",nw_src=";
  const dst = v6 ? ",ipv6_dst=" : ",nw_dst=";
  begin(id, cookie, SF_HAIRPIN_SNAT_TABLE, SF_HAIRPIN_SNAT_PRIORITY, LINE_BOUND);
  puts(v6 ? ",ct_state=-inv+trk,ct_ipv6_dst=" : ",ct_state=-inv+trk,ct_nw_dst=");
  putCell(vip, v6);
  puts(ip);
  puts(",reg0=");
  putHex(id);
  puts(src);
  putCell(backend, v6);
  puts(dst);
  putCell(backend, v6);
  puts(",actions=ct(commit,table=");
  putDec(ST_HAIRPIN);
  zoneOf(z);
  // Without a port ovs-ofctl prints an IPv6 address bare: `nat(src=fd00::100)`.
  puts(",nat(src=");
  putCell(vip, v6);
  puts("))");
  end();

  begin(id, cookie, SF_HAIRPIN_REPLY_TABLE, SF_HAIRPIN_REPLY_PRIORITY, LINE_BOUND);
  puts(",ct_state=-trk");
  puts(ip);
  puts(",reg0=");
  putHex(id);
  puts(src);
  putCell(backend, v6);
  puts(dst);
  putCell(vip, v6);
  puts(",actions=ct(table=");
  putDec(ST_HAIRPIN);
  zoneOf(z);
  puts(",nat)");
  end();

  begin(id, cookie, SF_HAIRPIN_DELIVER_TABLE, SF_HAIRPIN_DELIVER_PRIORITY, LINE_BOUND);
  puts(ip);
  puts(",reg0=");
  putHex(id);
  puts(src);
  putCell(vip, v6);
  puts(dst);
  putCell(backend, v6);
  puts(",actions=set_field:");
  putMac(lp + L_MAC_TEXT);
  puts("->eth_dst,IN_PORT");
  end();
}

/**
 * The two flows of a network with hairpin backends: a reply un-SNATed in the hairpin zone is
 * un-DNATed in the network's; anything else that met the hairpin zone (a new connection to the
 * VIP) goes back to ARP, where it now is tracked and takes the VIP's own flows.
 */
export function hairpinNetwork(id: u32, z: u32, v6: bool): void {
  begin(id, 0, SF_HAIRPIN_UNDO_TABLE, SF_HAIRPIN_UNDO_PRIORITY, LINE_BOUND);
  puts(",ct_state=+rpl+trk,ct_zone=");
  putDec(HAIRPIN_ZONE_BASE + z);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putHex(id);
  puts(",actions=ct(table=");
  putDec(ST_HAIRPIN);
  puts(",zone=");
  putDec(z);
  puts(",nat)");
  end();

  begin(id, 0, SF_HAIRPIN_AGAIN_TABLE, SF_HAIRPIN_AGAIN_PRIORITY, LINE_BOUND);
  puts(",ct_state=-rpl+trk,ct_zone=");
  putDec(HAIRPIN_ZONE_BASE + z);
  puts(v6 ? ",ipv6,reg0=" : ",ip,reg0=");
  putHex(id);
  puts(",actions=resubmit(,");
  putDec(T_ARP);
  puts(")");
  end();
}
