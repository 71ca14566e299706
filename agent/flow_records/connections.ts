/**
 * Connections from Open vSwitch's samples: one entry per direction of a connection (network,
 * protocol, addresses, ports), its packets and bytes since its previous record, first and last
 * packet, and whether a security group dropped any of it. `sweep` turns entries into records:
 * at once when a TCP FIN or RST was seen, after `idleMs` without a packet, and every `activeMs`
 * while it goes on (each record holds what came since the one before).
 */
import { SAMPLE_POINT } from "@knitter/wasm";
import type { EndReason, FlowRecord } from "./record_template.ts";
import type { Sample } from "./ovs_samples.ts";

/** A local port as the records name it. */
export interface PortName {
  tenant: string;
  network: string;
  networkId: string;
  /** "namespace/name". */
  pod: string;
}

/** Where the agent finds the names (port_names.ts). */
export interface PortNames {
  /** The local port behind a veth on the bridge. */
  byIfName(name: string): PortName | undefined;
  /** The local port with this MAC. */
  byMac(mac: string): PortName | undefined;
  /** The pod of the port with this address in the network, local or remote; "" if none. */
  podOf(networkId: string, ip: string): string;
}

export interface ConnectionsOptions {
  activeMs: number;
  idleMs: number;
  /** Counts are multiplied by this: 65535 / the sampling probability (1 when every packet is). */
  scale: number;
  node: string;
  names: () => PortNames;
  /** At most this many connections are kept (default MAX_CONNECTIONS). */
  maxConnections?: number;
}

/**
 * Connections kept at once: OVS's cache holds 8,192 flows per 2 s, and anyone on the node may send
 * to the agent's port; past this, new connections are counted (overflow), not kept.
 */
export const MAX_CONNECTIONS = 65_536;

const TCP = 6;
const FIN_OR_RST = 0x01 | 0x04;

/** Packets and IP bytes since the previous record. */
interface Counts {
  packets: number;
  bytes: number;
}

interface Connection {
  sample: Sample;
  port: PortName;
  /** What the local pod sent (point SENT), and what a security group dropped (DENIED). */
  sent: Counts;
  denied: Counts;
  /** Ever denied: the record says deny from then on. */
  deniedEver: boolean;
  first: number;
  last: number;
  /** The end of the previous record (first, before any). */
  since: number;
  exportedAt: number;
  ended: boolean;
}

export class Connections {
  private readonly table = new Map<string, Connection>();
  /** Samples whose port is not (or no more) on this node. */
  unknown = 0;
  /** Samples of new connections past maxConnections. */
  overflow = 0;

  constructor(private readonly opts: ConnectionsOptions) {}

  get size(): number {
    return this.table.size;
  }

  add(samples: Sample[], now: number): void {
    const names = this.opts.names();
    for (const s of samples) {
      const port = s.point === SAMPLE_POINT.SENT
        ? names.byIfName(s.ifName)
        : names.byIfName(s.ifName) ?? names.byMac(s.dstMac);
      if (!port || (s.point !== SAMPLE_POINT.SENT && s.point !== SAMPLE_POINT.DENIED)) {
        this.unknown++;
        continue;
      }
      const key = [port.networkId, s.protocol, s.src, s.srcPort, s.dst, s.dstPort].join("|");
      let c = this.table.get(key);
      if (!c && this.table.size >= (this.opts.maxConnections ?? MAX_CONNECTIONS)) {
        this.overflow++;
        continue;
      }
      if (!c) {
        c = {
          sample: s,
          port,
          sent: { packets: 0, bytes: 0 },
          denied: { packets: 0, bytes: 0 },
          deniedEver: false,
          first: s.start,
          last: s.end,
          since: s.start,
          exportedAt: now,
          ended: false,
        };
        this.table.set(key, c);
      }
      const to = s.point === SAMPLE_POINT.SENT ? c.sent : c.denied;
      to.packets += s.packets;
      to.bytes += s.bytes;
      if (s.point === SAMPLE_POINT.DENIED) c.deniedEver = true;
      c.first = Math.min(c.first, s.start);
      c.last = Math.max(c.last, s.end);
      if (s.protocol === TCP && (s.tcpFlags & FIN_OR_RST) !== 0) c.ended = true;
    }
  }

  /** The records due at `now`; ended and idle connections are forgotten. */
  sweep(now: number): FlowRecord[] {
    const out: FlowRecord[] = [];
    for (const [key, c] of this.table) {
      const reason: EndReason | null = c.ended
        ? "end"
        : now - c.last >= this.opts.idleMs
        ? "idle"
        : now - c.exportedAt >= this.opts.activeMs
        ? "active"
        : null;
      if (reason === null) continue;
      const counted = c.sent.packets > 0 ? c.sent : c.denied;
      if (counted.packets > 0 || reason !== "active") out.push(this.record(c, counted, reason));
      c.sent = { packets: 0, bytes: 0 };
      c.denied = { packets: 0, bytes: 0 };
      c.since = c.last;
      c.exportedAt = now;
      if (reason !== "active") this.table.delete(key);
    }
    return out;
  }

  private record(c: Connection, counted: Counts, reason: EndReason): FlowRecord {
    const s = c.sample;
    const names = this.opts.names();
    return {
      src: s.src,
      dst: s.dst,
      protocol: s.protocol,
      srcPort: s.srcPort,
      dstPort: s.dstPort,
      bytes: Math.round(counted.bytes * this.opts.scale),
      packets: Math.round(counted.packets * this.opts.scale),
      start: c.since,
      end: c.last,
      reason,
      tenant: c.port.tenant,
      network: c.port.network,
      srcPod: names.podOf(c.port.networkId, s.src),
      dstPod: names.podOf(c.port.networkId, s.dst),
      decision: c.deniedEver ? "deny" : "allow",
      node: this.opts.node,
    };
  }
}
