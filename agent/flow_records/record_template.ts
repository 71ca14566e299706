/**
 * The flow records the agent exports, as IPFIX (RFC 7011): one template per address family, the
 * connection's 5-tuple, counts and times in IANA's information elements, and what only Knitter
 * knows (tenant, network, pods, node, the security group decision) in enterprise-specific ones.
 *
 * The enterprise number is a PLACEHOLDER: 32473 is the number IANA reserves for documentation and
 * examples (RFC 5612), not one assigned to Knitter; a deployment that keeps records alongside other
 * exporters' should have its own registered and put it here (`KNITTER_PEN`). Element IDs under it
 * are ours (`KNITTER_ELEMENTS`). knitctl's collector decodes with the same tables.
 */
import { formatIp, parseIp } from "@knitter/common/address";
import {
  type Decoded,
  decodeMessage,
  encodeMessage,
  type FieldSpec,
  readUnsigned,
  recordFields,
  recordLength,
  type Template,
  type TemplateStore,
  unsignedBytes,
  VARIABLE,
} from "./ipfix.ts";

/** Private enterprise number of Knitter's elements: a placeholder (RFC 5612's example number). */
export const KNITTER_PEN = 32473;

/** Knitter's information elements under KNITTER_PEN: strings, variable length. */
export const KNITTER_ELEMENTS = {
  tenantName: 1,
  networkName: 2,
  sourcePodName: 3,
  destinationPodName: 4,
  /** "allow", or "deny" when a security group dropped packets of the flow. */
  securityDecision: 5,
  nodeName: 6,
} as const;

/** IANA elements the records use (RFC 7012 and the IANA registry). */
export const IANA = {
  octetDeltaCount: 1,
  packetDeltaCount: 2,
  protocolIdentifier: 4,
  tcpControlBits: 6,
  sourceTransportPort: 7,
  sourceIPv4Address: 8,
  destinationTransportPort: 11,
  destinationIPv4Address: 12,
  sourceIPv6Address: 27,
  destinationIPv6Address: 28,
  interfaceName: 82,
  flowEndReason: 136,
  observationPointId: 138,
  flowStartMilliseconds: 152,
  flowEndMilliseconds: 153,
  flowStartDeltaMicroseconds: 158,
  flowEndDeltaMicroseconds: 159,
  sourceMacAddress: 56,
  destinationMacAddress: 80,
} as const;

/** flowEndReason values (RFC 5102): why a record was sent. */
export const END_REASON = { idle: 1, active: 2, end: 3 } as const;
export type EndReason = keyof typeof END_REASON;

export type Decision = "allow" | "deny";

/** One record: a direction of a connection, counted over [start, end]. */
export interface FlowRecord {
  src: string;
  dst: string;
  /** IP protocol number (6 TCP, 17 UDP, 1 ICMP...). */
  protocol: number;
  srcPort: number;
  dstPort: number;
  /** IP bytes and packets since the connection's previous record (estimated: scaled by sampling). */
  bytes: number;
  packets: number;
  /** Milliseconds since the epoch. */
  start: number;
  end: number;
  reason: EndReason;
  tenant: string;
  network: string;
  /** "namespace/name" of the pod at each end, "" when not known here. */
  srcPod: string;
  dstPod: string;
  decision: Decision;
  node: string;
}

const TEMPLATE_V4 = 256;
const TEMPLATE_V6 = 257;
/** A message fits an Ethernet MTU with room for IP and UDP headers. */
const MAX_MESSAGE = 1400;

const knitter = (id: number): FieldSpec => ({ id, length: VARIABLE, enterprise: KNITTER_PEN });

function template(id: number, v6: boolean): Template {
  return {
    id,
    fields: [
      { id: v6 ? IANA.sourceIPv6Address : IANA.sourceIPv4Address, length: v6 ? 16 : 4 },
      { id: v6 ? IANA.destinationIPv6Address : IANA.destinationIPv4Address, length: v6 ? 16 : 4 },
      { id: IANA.protocolIdentifier, length: 1 },
      { id: IANA.sourceTransportPort, length: 2 },
      { id: IANA.destinationTransportPort, length: 2 },
      { id: IANA.octetDeltaCount, length: 8 },
      { id: IANA.packetDeltaCount, length: 8 },
      { id: IANA.flowStartMilliseconds, length: 8 },
      { id: IANA.flowEndMilliseconds, length: 8 },
      { id: IANA.flowEndReason, length: 1 },
      ...Object.values(KNITTER_ELEMENTS).map(knitter),
    ],
  };
}

export const RECORD_TEMPLATES: Template[] = [
  template(TEMPLATE_V4, false),
  template(TEMPLATE_V6, true),
];

const text = new TextEncoder();

function values(r: FlowRecord): Uint8Array[] {
  return [
    addressBytes(r.src),
    addressBytes(r.dst),
    unsignedBytes(r.protocol, 1),
    unsignedBytes(r.srcPort, 2),
    unsignedBytes(r.dstPort, 2),
    unsignedBytes(r.bytes, 8),
    unsignedBytes(r.packets, 8),
    unsignedBytes(r.start, 8),
    unsignedBytes(r.end, 8),
    unsignedBytes(END_REASON[r.reason], 1),
    text.encode(r.tenant),
    text.encode(r.network),
    text.encode(r.srcPod),
    text.encode(r.dstPod),
    text.encode(r.decision),
    text.encode(r.node),
  ];
}

/**
 * The records as IPFIX messages of at most MAX_MESSAGE bytes, each with the templates (over UDP
 * a collector that starts late reads the next message; RFC 7011 section 8.4). `sequence` is the
 * count of records sent before; the next one is returned.
 */
export function encodeFlowRecords(
  records: FlowRecord[],
  at: { exportTime: number; sequence: number; domain: number },
): { messages: Uint8Array[]; sequence: number } {
  const messages: Uint8Array[] = [];
  const base = encodeMessage({ ...at, templates: RECORD_TEMPLATES, records: [] }).length;
  let sequence = at.sequence;
  let batch: { templateId: number; values: Uint8Array[] }[] = [];
  let size = base;
  const flush = () => {
    if (batch.length === 0) return;
    messages.push(encodeMessage({ ...at, sequence, templates: RECORD_TEMPLATES, records: batch }));
    sequence += batch.length;
    batch = [];
    size = base;
  };
  for (const r of records) {
    const t = r.src.includes(":") ? RECORD_TEMPLATES[1] : RECORD_TEMPLATES[0];
    const v = values(r);
    // A data set header (4 bytes) per template at most.
    const n = recordLength(v, t) + 4;
    if (size + n > MAX_MESSAGE) flush();
    batch.push({ templateId: t.id, values: v });
    size += n;
  }
  flush();
  return { messages, sequence };
}

export { TemplateStore } from "./ipfix.ts";

/**
 * Knitter's records in one IPFIX message from `source` (templates learnt into `store`); throws an
 * IpfixError for a malformed message.
 */
export function readMessage(bytes: Uint8Array, store: TemplateStore, source: string): FlowRecord[] {
  return readFlowRecords(decodeMessage(bytes, store, source));
}

/** Knitter's records of a decoded message; records of other templates are left out. */
export function readFlowRecords(m: Decoded): FlowRecord[] {
  const out: FlowRecord[] = [];
  const decoder = new TextDecoder();
  const k = (f: Map<string, Uint8Array>, id: number) =>
    decoder.decode(f.get(`${KNITTER_PEN}:${id}`) ?? new Uint8Array());
  for (const r of m.records) {
    const f = recordFields(r);
    const ends = addressesOf(f);
    if (!ends || !f.has(`${KNITTER_PEN}:${KNITTER_ELEMENTS.securityDecision}`)) continue;
    const [src, dst] = ends;
    const reason = readUnsigned(f.get(String(IANA.flowEndReason)));
    out.push({
      src: addressText(src),
      dst: addressText(dst),
      protocol: readUnsigned(f.get(String(IANA.protocolIdentifier))),
      srcPort: readUnsigned(f.get(String(IANA.sourceTransportPort))),
      dstPort: readUnsigned(f.get(String(IANA.destinationTransportPort))),
      bytes: readUnsigned(f.get(String(IANA.octetDeltaCount))),
      packets: readUnsigned(f.get(String(IANA.packetDeltaCount))),
      start: readUnsigned(f.get(String(IANA.flowStartMilliseconds))),
      end: readUnsigned(f.get(String(IANA.flowEndMilliseconds))),
      reason: (Object.keys(END_REASON) as EndReason[]).find((x) => END_REASON[x] === reason) ??
        "end",
      tenant: k(f, KNITTER_ELEMENTS.tenantName),
      network: k(f, KNITTER_ELEMENTS.networkName),
      srcPod: k(f, KNITTER_ELEMENTS.sourcePodName),
      dstPod: k(f, KNITTER_ELEMENTS.destinationPodName),
      decision: k(f, KNITTER_ELEMENTS.securityDecision) === "deny" ? "deny" : "allow",
      node: k(f, KNITTER_ELEMENTS.nodeName),
    });
  }
  return out;
}

/**
 * A record's source and destination addresses when both are IPv4 (4 bytes) or both IPv6 (16),
 * else undefined: whoever sends to a collector's port may send anything.
 */
export function addressesOf(f: Map<string, Uint8Array>): [Uint8Array, Uint8Array] | undefined {
  for (const family of FAMILIES) {
    const src = f.get(String(family.src));
    const dst = f.get(String(family.dst));
    if (src?.length === family.bytes && dst?.length === family.bytes) return [src, dst];
  }
  return undefined;
}

const FAMILIES = [
  { src: IANA.sourceIPv4Address, dst: IANA.destinationIPv4Address, bytes: 4 },
  { src: IANA.sourceIPv6Address, dst: IANA.destinationIPv6Address, bytes: 16 },
];

/** An address's 4 or 16 bytes. */
export function addressBytes(ip: string): Uint8Array {
  const p = parseIp(ip);
  if (!p) throw new Error(`flow record: "${ip}" is not an IP address`);
  const out = new Uint8Array(p.family === 4 ? 4 : 16);
  let v = p.value;
  for (let i = out.length - 1; i >= 0; i--, v >>= 8n) out[i] = Number(v & 0xffn);
  return out;
}

/** 4 bytes as a dotted quad, 16 as IPv6 text (RFC 5952). */
export function addressText(b: Uint8Array): string {
  const value = b.reduce((v, x) => v << 8n | BigInt(x), 0n);
  return formatIp({ family: b.length === 4 ? 4 : 6, value });
}
