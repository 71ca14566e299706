/**
 * What Open vSwitch's IPFIX says of the sampled packets (agent/PIPELINE.md, "Flow records"): per
 * cached flow, the observation point (sent or denied), the ingress port's name, the 5-tuple and
 * MACs, and the packets and IP bytes since its previous record. OVS's templates vary with the
 * packet (L2, IPv4, IPv6, TCP, UDP, ICMP, tunnel); the fields are read by element, whatever the
 * template. Records without IP addresses (ARP) are not connections and are left out, as are
 * records whose addresses are not both IPv4 or both IPv6.
 */
import { type Decoded, readUnsigned, recordFields } from "./ipfix.ts";
import { addressesOf, addressText, IANA } from "./record_template.ts";

export interface Sample {
  /** SAMPLE_POINT: 1 sent by a local pod, 2 denied by a security group. */
  point: number;
  /** The message's observation domain: the network number (sent) or 0 (denied). */
  domain: number;
  /** The ingress port's name on the bridge: a local pod's veth, or the tunnel's. */
  ifName: string;
  src: string;
  dst: string;
  protocol: number;
  srcPort: number;
  dstPort: number;
  srcMac: string;
  dstMac: string;
  packets: number;
  /** IP bytes (octetDeltaCount: the IP header and what it carries). */
  bytes: number;
  /** TCP flags seen (FIN 0x01, RST 0x04), 0 for other protocols. */
  tcpFlags: number;
  /** First and last packet, milliseconds since the epoch. */
  start: number;
  end: number;
}

const text = new TextDecoder();
const mac = (b: Uint8Array | undefined) =>
  b ? [...b].map((x) => x.toString(16).padStart(2, "0")).join(":") : "";

export function samplesOf(m: Decoded): Sample[] {
  const out: Sample[] = [];
  const exported = m.exportTime * 1000;
  for (const r of m.records) {
    const f = recordFields(r);
    const get = (id: number) => f.get(String(id));
    // Both ends of one family, at their lengths: anyone on the node can send to the agent's
    // port, and a record of two families could not be encoded again.
    const ends = addressesOf(f);
    if (!ends) continue;
    const [src, dst] = ends;
    out.push({
      point: readUnsigned(get(IANA.observationPointId)),
      domain: m.domain,
      ifName: text.decode(get(IANA.interfaceName) ?? new Uint8Array()),
      src: addressText(src),
      dst: addressText(dst),
      protocol: readUnsigned(get(IANA.protocolIdentifier)),
      srcPort: readUnsigned(get(IANA.sourceTransportPort)),
      dstPort: readUnsigned(get(IANA.destinationTransportPort)),
      srcMac: mac(get(IANA.sourceMacAddress)),
      dstMac: mac(get(IANA.destinationMacAddress)),
      packets: readUnsigned(get(IANA.packetDeltaCount)),
      bytes: readUnsigned(get(IANA.octetDeltaCount)),
      tcpFlags: readUnsigned(get(IANA.tcpControlBits)),
      // OVS gives the times as microseconds before the export time (whole seconds).
      start: exported - Math.round(readUnsigned(get(IANA.flowStartDeltaMicroseconds)) / 1000),
      end: exported - Math.round(readUnsigned(get(IANA.flowEndDeltaMicroseconds)) / 1000),
    });
  }
  return out;
}
