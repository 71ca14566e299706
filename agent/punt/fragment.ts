/**
 * IPv4 fragmentation by the router (RFC 791 section 3.2; RFC 1812 section 5.2.6): a routed packet
 * without DF that is larger than its destination network's MTU is cut into fragments that fit,
 * each with the original header (its total length, flags, offset and checksum made anew). A packet
 * that is itself a fragment keeps its place: the pieces' offsets start at its own, and all but
 * the last piece of the last fragment say "more fragments". Options are copied into every
 * fragment (pods rarely send any; RFC 791 copies only those with the copy bit).
 * @module
 */
import { internetChecksum } from "./frames.ts";

const MORE_FRAGMENTS = 0x2000;
const DONT_FRAGMENT = 0x4000;
const OFFSET_MASK = 0x1fff;

/** Whether the IPv4 packet says "don't fragment". */
export function dontFragment(packet: Uint8Array): boolean {
  return (((packet[6] << 8) | packet[7]) & DONT_FRAGMENT) !== 0;
}

/** The IPv4 packet as fragments of at most `mtu` bytes; null when it cannot be cut so. */
export function fragment(packet: Uint8Array, mtu: number): Uint8Array[] | null {
  const header = (packet[0] & 0x0f) * 4;
  const total = (packet[2] << 8) | packet[3];
  if (total > packet.length || total <= header) return null;
  // Every piece but the last carries a multiple of 8 bytes.
  const step = Math.floor((mtu - header) / 8) * 8;
  if (step < 8) return null;
  const flags = (packet[6] << 8) | packet[7];
  const offset = flags & OFFSET_MASK;
  const payload = packet.subarray(header, total);
  const out: Uint8Array[] = [];
  for (let at = 0; at < payload.length; at += step) {
    const piece = payload.subarray(at, Math.min(at + step, payload.length));
    const last = at + piece.length >= payload.length;
    const f = new Uint8Array(header + piece.length);
    f.set(packet.subarray(0, header));
    f.set(piece, header);
    const v = new DataView(f.buffer);
    v.setUint16(2, f.length);
    const more = !last || (flags & MORE_FRAGMENTS) !== 0;
    v.setUint16(6, (more ? MORE_FRAGMENTS : 0) | (offset + at / 8));
    v.setUint16(10, 0);
    v.setUint16(10, internetChecksum(f.subarray(0, header)));
    out.push(f);
  }
  return out;
}
