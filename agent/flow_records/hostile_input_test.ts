/**
 * Anyone on the node may send UDP to the agent's loopback port, not only Open vSwitch: whatever
 * arrives must be refused as an IpfixError (counted and logged by the agent), never thrown as
 * another error, which would end the agent from a socket's event. Random bytes and mutations of
 * real messages (seeded: a failure prints its seed).
 */
import assert from "node:assert/strict";
import { mulberry32 } from "@knitter/wasm";
import { decodeMessage, IpfixError, TemplateStore } from "./ipfix.ts";
import { samplesOf } from "./ovs_samples.ts";
import { encodeFlowRecords, IANA, readFlowRecords } from "./record_template.ts";
import { Connections } from "./connections.ts";
import { encodeMessage, unsignedBytes } from "./ipfix.ts";

const SEEDS = Array.from({ length: 200 }, (_, i) => i + 1);

/** A real message of the agent's own, as a base to mutate. */
const BASE = encodeFlowRecords([{
  src: "10.0.0.1",
  dst: "10.0.0.2",
  protocol: 6,
  srcPort: 1,
  dstPort: 2,
  bytes: 3,
  packets: 4,
  start: 5,
  end: 6,
  reason: "idle",
  tenant: "t",
  network: "n",
  srcPod: "a/b",
  dstPod: "c/d",
  decision: "allow",
  node: "n1",
}], { exportTime: 1, sequence: 0, domain: 0 }).messages[0];

function mutate(rand: () => number): Uint8Array {
  const m = BASE.slice();
  const kind = Math.floor(rand() * 3);
  if (kind === 0) {
    for (let i = 0; i < 1 + rand() * 8; i++) m[Math.floor(rand() * m.length)] = rand() * 256;
  } else if (kind === 1) {
    return Uint8Array.from({ length: Math.floor(rand() * 200) }, () => rand() * 256);
  } else {
    // A shorter message whose header is made to agree with its length.
    const cut = m.slice(0, 16 + Math.floor(rand() * (m.length - 16)));
    new DataView(cut.buffer).setUint16(2, cut.length);
    return cut;
  }
  return m;
}

Deno.test("hostile input: random and mutated messages are refused as IpfixError or read, never thrown otherwise", () => {
  for (const seed of SEEDS) {
    const rand = mulberry32(seed);
    const store = new TemplateStore();
    // A template learnt first, so that mutated data sets are read against it.
    decodeMessage(BASE, store, "x");
    for (let k = 0; k < 20; k++) {
      const msg = mutate(rand);
      try {
        const m = decodeMessage(msg, store, "x");
        samplesOf(m);
        readFlowRecords(m);
      } catch (err) {
        assert.ok(err instanceof IpfixError, `seed ${seed}, message ${k}: ${err}`);
      }
    }
  }
});

Deno.test("hostile input: a sample whose addresses are of two families is left out, not made into a record that cannot be sent", () => {
  // As OVS would send it, but with an IPv4 source and an IPv6 destination.
  const fields = [
    [IANA.observationPointId, 4],
    [IANA.interfaceName, 65535],
    [IANA.sourceIPv4Address, 4],
    [IANA.destinationIPv6Address, 16],
    [IANA.packetDeltaCount, 8],
    [IANA.octetDeltaCount, 8],
  ].map(([id, length]) => ({ id, length }));
  const values = [
    unsignedBytes(1, 4),
    new TextEncoder().encode("kn-a"),
    Uint8Array.of(10, 0, 0, 1),
    new Uint8Array(16).fill(1),
    unsignedBytes(1, 8),
    unsignedBytes(100, 8),
  ];
  const msg = encodeMessage({
    exportTime: 10,
    sequence: 0,
    domain: 0,
    templates: [{ id: 300, fields }],
    records: [{ templateId: 300, values }],
  });
  const decoded = decodeMessage(msg, new TemplateStore(), "local");
  assert.deepEqual(readFlowRecords(decoded), [], "a collector reads nothing of it either");
  const samples = samplesOf(decoded);
  const port = { tenant: "t", network: "n", networkId: "n1", pod: "p/a" };
  const table = new Connections({
    activeMs: 1,
    idleMs: 1,
    scale: 1,
    node: "n1",
    names: () => ({ byIfName: () => port, byMac: () => port, podOf: () => "" }),
  });
  table.add(samples, 10_000);
  const records = table.sweep(Infinity);
  assert.doesNotThrow(() => encodeFlowRecords(records, { exportTime: 1, sequence: 0, domain: 1 }));
  assert.deepEqual(records, [], "no record of it");
});
