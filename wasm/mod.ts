/**
 * Address / ID bitmaps for the IPAM: `wasmBitmap` (WebAssembly, production) and `tsBitmap`
 * (plain TypeScript twin, the benchmark yardstick).
 *
 * @module
 */

export type { Bitmap } from "./bitmap.ts";
export { wasmBitmap } from "./bitmap.ts";
export { tsBitmap } from "./bitmap_ts.ts";
