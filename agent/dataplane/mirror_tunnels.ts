/**
 * The tunnel ports through which a node sends a mirror's copies to a remote collector (an admin's
 * choice: manager/README.md, "Port mirrors"): one port per collector, named from what it sends to
 * so that two mirrors to one collector share it and a changed collector is a new port.
 *
 * - gre: Ethernet in GRE (protocol 0x6558).
 * - erspan: ERSPAN type II (GRE protocol 0x88be, erspan_ver=1), the admin's session ID as its key
 *   (0 when not given); the header's index (which source port) is one for all of a node's copies.
 * - vxlan: UDP port 4789, the admin's VNI.
 */
import type { MirrorRemote } from "@knitter/common";

/** Names of the tunnel ports towards remote collectors start with it. */
export const TUNNEL_PREFIX = "kmir-";

/** A tunnel port as wanted: its OVS name, interface type and options. */
export interface Tunnel {
  name: string;
  type: MirrorRemote["remote"]["protocol"];
  options: Record<string, string>;
}

/** A GRE port's name: the prefix, then the IPv4 address in hex (13 characters). */
export function tunnelName(ip: string): string {
  return TUNNEL_PREFIX + hexIp(ip);
}

/** The tunnel port that carries copies to the collector. */
export function tunnelOf({ remote }: MirrorRemote): Tunnel {
  const { ip, protocol } = remote;
  if (protocol === "gre") return { name: tunnelName(ip), type: "gre", options: { remote_ip: ip } };
  const options: Record<string, string> = protocol === "erspan"
    ? { remote_ip: ip, erspan_ver: "1", erspan_idx: ERSPAN_INDEX, key: String(remote.session ?? 0) }
    : { remote_ip: ip, key: String(remote.vni) };
  // A letter for the kind and a hash of the options: 14 characters, an interface name's room (15)
  // on any datapath, apart from a GRE port's 13.
  const name = TUNNEL_PREFIX + protocol[0] + fnv1a(`${protocol} ${JSON.stringify(options)}`);
  return { name, type: protocol, options };
}

/** ERSPAN type II's index field (the source port, for the collector): one for all of a node's. */
const ERSPAN_INDEX = "0x1";

/**
 * The tunnel ports the rows need, by name. Two collectors whose names collide (a 32-bit hash) are
 * an error that names both, never one port carrying the other's copies.
 */
export function tunnelsNeeded(rows: Iterable<{ tunnel?: Tunnel }>): Map<string, Tunnel> {
  const need = new Map<string, Tunnel>();
  for (const { tunnel } of rows) {
    if (!tunnel) continue;
    const had = need.get(tunnel.name);
    if (had && JSON.stringify(had) !== JSON.stringify(tunnel)) {
      throw new Error(
        `mirror tunnels ${JSON.stringify(had.options)} and ${
          JSON.stringify(tunnel.options)
        } would share the port name ${tunnel.name}: change one collector's session or VNI`,
      );
    }
    need.set(tunnel.name, tunnel);
  }
  return need;
}

const hexIp = (ip: string) =>
  ip.split(".").map((b) => Number(b).toString(16).padStart(2, "0")).join("");

/** FNV-1a, 32 bits, as 8 hex digits. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}
