/**
 * WASM vs TS bitmap on IPAM-shaped workloads (see bitmap_workloads.ts).
 * Run: deno bench --allow-read wasm/bench/bitmap_bench.ts (`make bench` runs it too) — the TS twin
 * is the baseline, so each group's summary says how many times faster (or slower) the WASM bitmap
 * is.
 */
import { wasmBitmap } from "../bitmap.ts";
import { tsBitmap } from "../bitmap_ts.ts";

// Distinct specifiers give each implementation its own instance of the workloads module, hence
// call sites that stay monomorphic, as in production (see bitmap_workloads.ts).
const forWasm = await import("./bitmap_workloads.ts?impl=wasm");
const forTs = await import("./bitmap_workloads.ts?impl=ts");

const wasm = forWasm.workloads("wasm", wasmBitmap, false);
const ts = forTs.workloads("ts", tsBitmap, true);
// Deno runs benches in the order they are registered: group by group, WASM then TS, so each
// implementation runs a workload after the same history (JIT state, memory growth).
for (let k = 0; k < wasm.length; k++) {
  Deno.bench(wasm[k]);
  Deno.bench(ts[k]);
}
