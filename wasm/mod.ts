/**
 * Address / ID bitmaps for the IPAM: `wasmBitmap` (WebAssembly, production) and `tsBitmap`
 * (plain TypeScript twin, the benchmark yardstick). The OpenFlow rule compiler of the node agent:
 * `compileFlows` (WebAssembly) and `compileFlowsTs` (its twin), with the helpers to read
 * dump-flows and to update a bridge by difference.
 *
 * @module
 */

export type { Bitmap } from "./bitmap.ts";
export { wasmBitmap } from "./bitmap.ts";
export { tsBitmap } from "./bitmap_ts.ts";
export type { FlowInput, FlowLocalPort, FlowNetwork, FlowRemotePort } from "./flows.ts";
export {
  compileFlows,
  compileFlowsTs,
  diffFlows,
  FLOW_TABLES,
  parseDumpFlows,
  PRIORITY,
  TABLE,
} from "./flows.ts";
