/**
 * Address / ID bitmaps for the IPAM: `wasmBitmap` (WebAssembly, production) and `tsBitmap`
 * (plain TypeScript twin, the benchmark yardstick). The OpenFlow rule compiler of the node agent:
 * `compileFlows` (WebAssembly) and `compileFlowsTs` (the same source as plain JavaScript), the
 * pipeline they compile as data, and the reader of dump-flows that gives lines comparable with the
 * compiled ones.
 *
 * @module
 */

export type { Bitmap } from "./bitmap.ts";
export { wasmBitmap } from "./bitmap.ts";
export { tsBitmap } from "./bitmap_ts.ts";
export type {
  FlowInput,
  FlowLocalPort,
  FlowNetwork,
  FlowRemotePort,
  FlowRoute,
} from "./flow_input.ts";
export { flowGateways, gatewayMac } from "./flow_input.ts";
export type { FlowAcl, FlowAclRule } from "./acl_input.ts";
export type { FlowSampling } from "./flow_sampling.ts";
export { SAMPLE_DOMAIN, SAMPLE_POINT, sampleProbability } from "./flow_sampling.ts";
export type { FlowInactivePort } from "./inactive_input.ts";
export type { FlowMirrorFilter } from "./mirror_input.ts";
export type { FlowService, FlowServicePort } from "./service_input.ts";
export { GROUP_PREFIX, splitGroups } from "./service_pipeline.ts";
export { compileFlows, compileFlowsTs, parseDumpFlows } from "./flows.ts";
export type { Collision, ConflictReason, FlowConflict, IsolatedInput } from "./flow_conflicts.ts";
export { compileIsolated, CONFLICT_REASONS, isolateConflicts } from "./flow_conflicts.ts";
export { FLOW_TABLES, PRIORITY, PUNT, PUNT_REGISTER, TABLE } from "./pipeline.ts";
export type { EvalPacket, ParsedFlow } from "./flow_eval.ts";
export { evaluate, flowGroups, flowTables, parseFlowLine } from "./flow_eval.ts";
export type {
  TraceHop,
  TraceIngress,
  TraceOutcome,
  TracePacket,
  TraceStep,
  TraceTarget,
  TraceView,
} from "./flow_trace.ts";
export { evalPacket, explainHop, ofprotoFlow, parseOfprotoTrace, portLabel } from "./flow_trace.ts";
/** The seeded generator of the property tests: a member's tests replay a failure by its seed. */
export { mulberry32 } from "./mulberry32.ts";
