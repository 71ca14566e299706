// Builders of filtered mirrors (../../agent/PIPELINE.md, "Filtered mirrors"): what a local port
// sends that a mirror's rule matches is copied (`clone(output:N)`) to the collector's port or the
// mirror's tunnel port, then classified as any packet of the port. A flow per rule and port
// block, above the port's classification in CLASSIFY; the rest of its traffic is not copied.
// A call on the model the compile decoded (after compile; joins the lines again).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.
//
// Words: rule count; per rule: source ofport, output ofport, protocol (MIRROR_PROTOCOLS), portMin,
// portMax (0, 65535 when the rule has none), remote IPv4, remote prefix (0: any).

import {
  F_MIRROR_OUT_PRIORITY,
  F_MIRROR_OUT_TABLE,
  M_UNTAGGED,
  MPROTO_ANY,
  MPROTO_ICMP,
  MPROTO_TCP,
} from "./generated/pipeline";
import { blockSize, putBlock } from "./acl";
import { classifyLocalActions } from "./classify";
import { localByOfport, localRecord, net, NONE } from "./input";
import { B_INPUT, buffer, L_COOKIE, L_NET, N_ID } from "./layout";
import { join } from "./output";
import { begin, end, LINE_BOUND, putc, putDec, putIpv4, puts } from "./text";

/** Error code: the source of rule i is no local port (../mirror_input.ts). */
const ME_UNKNOWN_SOURCE: i32 = 1;
let failed: u32 = 0;

/** The index of the rule the last error names. */
export function mirrorErrorArg(): u32 {
  return failed;
}

/** Adds the flows of the mirror rules in the input area and joins the lines again. */
export function mirrors(words: u32): i32 {
  const rd = buffer(B_INPUT);
  const count = load<u32>(rd);
  let w = rd + 4;
  for (let i: u32 = 0; i < count; i++) {
    const li = localByOfport(load<u32>(w));
    if (li == NONE) {
      failed = i;
      return ME_UNKNOWN_SOURCE;
    }
    rule(localRecord(li), w);
    w += 28;
  }
  join();
  return 0;
}

/** The flows of one rule (at w) of local port p: one per block of its port range. */
function rule(p: usize, w: usize): void {
  const min = load<u32>(w, 12);
  const max = load<u32>(w, 16);
  const all = min == 0 && max == 65535;
  let a = min;
  while (true) {
    const size = all ? 1 : blockSize(a, max);
    mirrorOut(p, w, a, all ? 0 : size);
    if (all) return;
    a += size;
    if (a > max) return;
  }
}

/**
 * `PROTO,in_port=S,vlan_tci=…[,nw_dst=R][,tp_dst=B],actions=clone(output:N),<the port's
 * classification>`; block size 0: every port.
 */
function mirrorOut(p: usize, w: usize, a: u32, size: u32): void {
  const n = net(load<u32>(p, L_NET));
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_MIRROR_OUT_TABLE,
    F_MIRROR_OUT_PRIORITY,
    LINE_BOUND,
  );
  const proto = load<u32>(w, 8);
  puts(
    proto == MPROTO_TCP
      ? ",tcp"
      : proto == MPROTO_ICMP
      ? ",icmp"
      : proto == MPROTO_ANY
      ? ",ip"
      : ",udp",
  );
  puts(",in_port=");
  putDec(load<u32>(w));
  putc(44);
  puts(M_UNTAGGED);
  const prefix = load<u32>(w, 24);
  if (prefix > 0) {
    puts(",nw_dst=");
    putIpv4(load<u32>(w, 20));
    if (prefix < 32) {
      putc(47);
      putDec(prefix);
    }
  }
  if (size > 0) putBlock(a, size);
  puts(",actions=clone(output:");
  putDec(load<u32>(w, 4));
  puts("),");
  classifyLocalActions(n, p);
  end();
}
