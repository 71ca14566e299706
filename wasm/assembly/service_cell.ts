// An address cell of the service flows (see ../../agent/PIPELINE.md, "Services"): a VIP or a
// backend, of either family, written as the line's family asks. Shared by service.ts and hairpin.ts.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import { V6_SLOT } from "./layout";
import { putIpv4, puts, putSlot } from "./text";

// A cell: the IPv4 address (u32), the owner (u32), the IPv6 text (a V6_SLOT).
export const C_OWNER = 4;
export const C_TEXT6: usize = 8;
export const CELL: usize = 8 + V6_SLOT;

/** The cell's address: its IPv6 text (`v6`) or its dotted quad. */
export function putCell(cell: usize, v6: bool): void {
  if (v6) putSlot(cell + C_TEXT6, V6_SLOT);
  else putIpv4(load<u32>(cell));
}

/**
 * A NAT's address before its port: an IPv6 one in brackets, as ovs-ofctl prints it
 * (`nat(dst=[fd00::3]:8080)`; without a port it prints the address bare).
 */
export function putNatCell(cell: usize, v6: bool): void {
  if (v6) puts("[");
  putCell(cell, v6);
  if (v6) puts("]");
}
