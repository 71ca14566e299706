/**
 * Captures to a pcap file (tcpdump -w inside a netns) and the TCP payload a test reads back from
 * one: one direction of a connection, reassembled by sequence number (retransmissions counted
 * once), so a test compares it byte for byte with what was sent. Frames in GRE, ERSPAN type II or
 * VXLAN (a mirror's remote collector) are read inside their tunnel.
 */
import type { Cleanup } from "../../devstack/cleanup.ts";
import { inNetns } from "./traffic.ts";

export interface PcapCapture {
  /** The file's bytes so far (each packet is written as it comes: immediate mode, -U). */
  read(): Promise<Uint8Array>;
  /** Stops tcpdump (SIGINT: it flushes) and answers the file's bytes. */
  stop(): Promise<Uint8Array>;
}

export async function startPcap(
  cleanup: Cleanup,
  netns: string,
  iface: string,
  filter: string,
  seconds = 30,
): Promise<PcapCapture> {
  const file = await Deno.makeTempFile({ suffix: ".pcap" });
  cleanup.defer(() => Deno.remove(file).catch(() => {}));
  const [cmd, ...enter] = inNetns(netns);
  const child = new Deno.Command(cmd, {
    args: [
      ...enter,
      ...["timeout", "-s", "INT", String(seconds)],
      // Immediate mode's ring has a slot per snapshot length: a short one (frames of an MTU of
      // up to 9000) and 8 MB make room for thousands of packets, not 8 (tcpdump's default 256 KiB).
      ...["tcpdump", "--immediate-mode", "-U", "-nn", "-s", "9100", "-B", "8192"],
      ...["-i", iface, "-w", file, filter],
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  cleanup.pid(child.pid);
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let err = "";
  // tcpdump says "listening on IFACE" once its filter is attached: only then may traffic flow.
  while (!err.includes("listening on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`tcpdump on ${iface} in ${netns} ended: ${err}`);
    err += value;
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      err += value;
    }
  })();
  return {
    read: () => Deno.readFile(file),
    async stop() {
      try {
        child.kill("SIGINT");
      } catch { /* ended by its timeout */ }
      await child.status;
      await rest;
      return await Deno.readFile(file);
    },
  };
}

/** Whether `needle`'s bytes are somewhere in `haystack` (a payload in a capture file). */
export function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

/** One direction of a TCP connection: from `src`(:`sport`) to `dst`(:`dport`) (IPv4). */
export interface TcpFlow {
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
}

/**
 * The bytes of the first connection of `flow` in an Ethernet pcap, in sequence order from its SYN;
 * a gap (a segment the capture missed) ends it there.
 */
export function tcpPayload(pcap: Uint8Array, flow: TcpFlow): Uint8Array {
  const segments = new Map<number, Uint8Array>();
  let isn: number | undefined;
  for (const frame of frames(pcap)) {
    const seg = tcpSegment(frame);
    if (!seg || !matches(seg, flow)) continue;
    if (seg.syn && isn === undefined) isn = seg.seq + 1;
    if (isn === undefined || seg.payload.length === 0) continue;
    const offset = (seg.seq - isn) >>> 0;
    if (!segments.has(offset)) segments.set(offset, seg.payload);
  }
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const offset of [...segments.keys()].sort((a, b) => a - b)) {
    const data = segments.get(offset)!;
    if (offset > at) break;
    if (offset + data.length <= at) continue;
    parts.push(data.subarray(at - offset));
    at = offset + data.length;
  }
  const out = new Uint8Array(at);
  let k = 0;
  for (const p of parts) out.set(p, (k += p.length) - p.length);
  return out;
}

function matches(seg: Segment, flow: TcpFlow): boolean {
  return seg.src === flow.src && seg.dst === flow.dst &&
    (flow.sport === undefined || seg.sport === flow.sport) &&
    (flow.dport === undefined || seg.dport === flow.dport);
}

/** The frames of a pcap file (microsecond or nanosecond, either byte order). */
function* frames(pcap: Uint8Array): Generator<Uint8Array> {
  const view = new DataView(pcap.buffer, pcap.byteOffset, pcap.byteLength);
  const magic = view.getUint32(0, true);
  const little = magic === 0xa1b2c3d4 || magic === 0xa1b23c4d;
  if (
    !little && view.getUint32(0, false) !== 0xa1b2c3d4 && view.getUint32(0, false) !== 0xa1b23c4d
  ) {
    throw new Error("not a pcap file");
  }
  for (let at = 24; at + 16 <= pcap.length;) {
    const len = view.getUint32(at + 8, little);
    yield pcap.subarray(at + 16, at + 16 + len);
    at += 16 + len;
  }
}

/**
 * The keys the tunnel packets of an Ethernet pcap carry, each once in the order seen: an ERSPAN
 * type II header's session ID ("erspan:7"), a VXLAN header's VNI ("vxlan:5001").
 */
export function tunnelKeys(pcap: Uint8Array): string[] {
  const keys = new Set<string>();
  for (const frame of frames(pcap)) {
    if (((frame[12] << 8) | frame[13]) !== 0x0800) continue;
    const ip = frame.subarray(14);
    const inner = (ip[0] & 0x0f) * 4;
    if (ip[9] === 47 && ((ip[inner + 2] << 8) | ip[inner + 3]) === 0x88be) {
      const options = [0x80, 0x20, 0x10].filter((bit) => ip[inner] & bit).length * 4;
      const erspan = inner + 4 + options;
      keys.add(`erspan:${((ip[erspan + 2] << 8) | ip[erspan + 3]) & 0x3ff}`);
    }
    if (ip[9] === 17 && ((ip[inner + 2] << 8) | ip[inner + 3]) === VXLAN_PORT) {
      const vxlan = inner + 8;
      keys.add(`vxlan:${(ip[vxlan + 4] << 16) | (ip[vxlan + 5] << 8) | ip[vxlan + 6]}`);
    }
  }
  return [...keys];
}

/** What GRE carries Ethernet in: bytes of its own before the frame, by GRE protocol. */
const GRE_INNER: Record<number, number> = {
  0x6558: 0, // transparent Ethernet bridging
  0x88be: 8, // ERSPAN type II: its header (version, VLAN, session ID, index)
};

/** The segment in an IPv4 packet of GRE carrying Ethernet, with or without its options. */
function greInner(ip: Uint8Array): Segment | null {
  const gre = (ip[0] & 0x0f) * 4;
  const flags = ip[gre];
  const header = GRE_INNER[(ip[gre + 2] << 8) | ip[gre + 3]];
  if (header === undefined) return null;
  // Checksum, key and sequence number: 4 bytes each, when their flag is set.
  const options = [0x80, 0x20, 0x10].filter((bit) => flags & bit).length * 4;
  return tcpSegment(ip.subarray(gre + 4 + options + header));
}

/** VXLAN's UDP port (RFC 7348). */
const VXLAN_PORT = 4789;

/** The segment in an IPv4 packet of UDP to VXLAN's port: the frame after its 8-byte header. */
function vxlanInner(ip: Uint8Array): Segment | null {
  const udp = (ip[0] & 0x0f) * 4;
  if (((ip[udp + 2] << 8) | ip[udp + 3]) !== VXLAN_PORT) return null;
  return tcpSegment(ip.subarray(udp + 8 + 8));
}

interface Segment {
  src: string;
  dst: string;
  sport: number;
  dport: number;
  seq: number;
  syn: boolean;
  payload: Uint8Array;
}

function tcpSegment(frame: Uint8Array): Segment | null {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  let at = 12;
  let type = view.getUint16(at);
  if (type === 0x8100) type = view.getUint16(at += 4);
  at += 2;
  if (type !== 0x0800) return null;
  const ipTotal = view.getUint16(at + 2);
  if (frame[at + 9] === 47) return greInner(frame.subarray(at, at + ipTotal));
  if (frame[at + 9] === 17) return vxlanInner(frame.subarray(at, at + ipTotal));
  if (frame[at + 9] !== 6) return null;
  const ip = (o: number) => frame.subarray(at + o, at + o + 4).join(".");
  const tcp = at + (frame[at] & 0x0f) * 4;
  const data = tcp + (frame[tcp + 12] >> 4) * 4;
  return {
    src: ip(12),
    dst: ip(16),
    sport: view.getUint16(tcp),
    dport: view.getUint16(tcp + 2),
    seq: view.getUint32(tcp + 4),
    syn: (frame[tcp + 13] & 0x02) !== 0,
    payload: frame.subarray(data, at + ipTotal),
  };
}
