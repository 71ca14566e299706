/**
 * Flow records (issue 30): the `sampling` section of the flow compiler's input and what its
 * `sample(...)` actions mean. With it, every packet a local pod sends is sampled where it enters
 * br-int (CLASSIFY), and every packet a security group drops where it is dropped (the defaults
 * of EGRESS_ACL and INGRESS_ACL); the observation point says which. Open vSwitch sends the samples as IPFIX to
 * the agent (agent/flow_records/). Without it the lines are exactly those of a node without flow
 * records. See ../agent/PIPELINE.md, "Flow records".
 *
 * @module
 */

/** Open vSwitch's sampling of flows to one Flow_Sample_Collector_Set. */
export interface FlowSampling {
  /** Packets sampled out of 65535 (1 in N: 65535 / N, at least 1). */
  probability: number;
  /** The Flow_Sample_Collector_Set's id, whose IPFIX row names the agent as collector. */
  collectorSetId: number;
}

/** What an observation point ID says (IPFIX observationPointId, element 138). */
export const SAMPLE_POINT = {
  /** A local pod sent it (CLASSIFY): counts the connection's packets and bytes. */
  SENT: 1,
  /** A security group dropped it (the default of EGRESS_ACL or INGRESS_ACL). */
  DENIED: 2,
} as const;

/**
 * The observation domain of every sample. One for all: Open vSwitch announces its templates once
 * per exporter, in the domain of its first message, and its data messages of another domain
 * would name templates never announced there (seen with OVS 3.1). The agent finds the port from
 * the record's interface name and MACs, not from the domain.
 */
export const SAMPLE_DOMAIN = 0;

/** OpenFlow's probability of sampling 1 packet in `n`. */
export function sampleProbability(n: number): number {
  return Math.max(1, Math.floor(65535 / n));
}

/** Checks the section's shape; throws naming the field. */
export function checkSampling(s: FlowSampling | undefined): void {
  if (s === undefined) return;
  if (typeof s !== "object" || s === null) fail("sampling", "an object", s);
  if (!Number.isInteger(s.probability) || s.probability < 1 || s.probability > 65535) {
    fail("sampling.probability", "an integer in [1, 65535]", s.probability);
  }
  if (
    !Number.isInteger(s.collectorSetId) || s.collectorSetId < 1 || s.collectorSetId > 0xffffffff
  ) {
    fail("sampling.collectorSetId", "an integer in [1, 4294967295]", s.collectorSetId);
  }
}

function fail(path: string, expected: string, value: unknown): never {
  throw new Error(`${path}: expected ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}
