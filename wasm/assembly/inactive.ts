// Builders of the flows of inactive ports: a live migration's other end (../../agent/PIPELINE.md,
// "Inactive ports"). Such a port is in no other table: nothing is delivered to it and nothing it
// sends goes on. Flows in CLASSIFY count what its guest sends from the claim's MAC and drop
// it; the agent reads those counters to see the guest announce itself (agent/dataplane/migration.ts).
// A third call on the model the compile decoded (after compile, and acl when there are groups).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { F_INACTIVE_PORT_PRIORITY, F_INACTIVE_PORT_TABLE } from "./generated/pipeline";
import { parseMac } from "./address";
import { B_INPUT, buffer } from "./layout";
import { join } from "./output";
import { begin, end, LINE_BOUND, macText, putDec, puts, writerAt } from "./text";

/** Error code: the MAC of inactive port i is malformed or not unicast (../flow_input.ts). */
const IE_BAD_MAC: i32 = 1;
let failed: u32 = 0;

/** The index of the inactive port the last error names. */
export function inactiveErrorArg(): u32 {
  return failed;
}

/**
 * Adds the flows of the inactive ports in the input area and joins the lines again. Words: count,
 * then per port: ofport, network id, cookie, MAC length; the MACs follow in the same order.
 */
export function inactive(words: u32): i32 {
  const rd = buffer(B_INPUT);
  const count = load<u32>(rd);
  let text = rd + (<usize> words << 2);
  let w = rd + 4;
  for (let i: u32 = 0; i < count; i++) {
    const len = load<u32>(w, 12);
    const mac = parseMac(text, len);
    if (mac < 0) {
      failed = i;
      return IE_BAD_MAC;
    }
    for (let k = 0; k < ANNOUNCEMENTS.length; k++) {
      inactivePort(load<u32>(w), load<u32>(w, 4), load<u32>(w, 8), <u64> mac, ANNOUNCEMENTS[k]);
    }
    text += len;
    w += 16;
  }
  join();
  return 0;
}

/**
 * What a guest that runs sends, each with a flow of its own, before `in_port=`: an ARP (a
 * gratuitous one), a RARP (what QEMU announces after a migration), IPv4, an IPv6 neighbour
 * advertisement, TCP or UDP over IPv6. Not the rest of IPv6: a pod's interface coming up sends
 * duplicate address detection, router solicitations and multicast listener reports by itself.
 */
const ANNOUNCEMENTS: StaticArray<string> = [",arp", ",rarp", ",ip", ",icmp6", ",tcp6", ",udp6"];

/**
 * `PROTO,in_port=P,dl_src=M,actions=drop`: the guest's first frame from here shows in the
 * counter of one of the port's flows.
 */
function inactivePort(ofport: u32, net: u32, cookie: u32, mac: u64, proto: string): void {
  begin(net, cookie, F_INACTIVE_PORT_TABLE, F_INACTIVE_PORT_PRIORITY, LINE_BOUND);
  puts(proto);
  puts(",in_port=");
  putDec(ofport);
  puts(",dl_src=");
  const at = writerAt(0);
  macText(at, mac);
  writerAt(at + 17);
  if (proto == ",icmp6") puts(",icmp_type=136");
  puts(",actions=drop");
  end();
}
