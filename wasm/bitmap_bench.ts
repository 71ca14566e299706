/**
 * WASM vs TS bitmap on IPAM-shaped workloads (see bitmap_workloads.ts).
 * Run: deno bench --allow-read wasm/ — the TS twin is the baseline, so each group's summary says
 * how many times faster (or slower) the WASM bitmap is.
 */
import { wasmBitmap } from "./bitmap.ts";
import { tsBitmap } from "./bitmap_ts.ts";

// Distinct specifiers give each implementation its own instance of the workloads module, hence
// call sites that stay monomorphic, as in production (see bitmap_workloads.ts).
const forWasm = await import("./bitmap_workloads.ts?impl=wasm");
const forTs = await import("./bitmap_workloads.ts?impl=ts");

forWasm.register("wasm", wasmBitmap, false);
forTs.register("ts", tsBitmap, true);
