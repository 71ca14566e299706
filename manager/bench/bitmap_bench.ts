/** The WASM bitmap against the same algorithm in plain TypeScript, on the allocator's workloads. */
import { type Bitmap, tsBitmap, wasmBitmap } from "@knitter/wasm";

const BITS = 65536;

export interface BitmapFigures {
  workload: string;
  wasmOpsPerSecond: number;
  tsOpsPerSecond: number;
}

function fill(make: (n: number) => Bitmap): number {
  const b = make(BITS);
  let cursor = 0;
  const start = performance.now();
  for (let k = 0; k < BITS; k++) {
    const i = b.findFree(0, BITS, cursor);
    b.set(i);
    cursor = i + 1 === BITS ? 0 : i + 1;
  }
  const ops = BITS / ((performance.now() - start) / 1000);
  b.free();
  return ops;
}

/** Random release + allocate at 90 % full: the long-running cluster's pattern. */
function churn(make: (n: number) => Bitmap, rounds: number): number {
  const b = make(BITS);
  for (let i = 0; i < BITS * 0.9; i++) b.set(i);
  let seed = 42;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % BITS;
  let cursor = 0;
  const start = performance.now();
  for (let k = 0; k < rounds; k++) {
    let victim = rand();
    while (!b.test(victim)) victim = rand();
    b.clear(victim);
    const i = b.findFree(0, BITS, cursor);
    b.set(i);
    cursor = i + 1 === BITS ? 0 : i + 1;
  }
  const ops = rounds / ((performance.now() - start) / 1000);
  b.free();
  return ops;
}

function count(make: (n: number) => Bitmap, rounds: number): number {
  const b = make(BITS);
  for (let i = 0; i < BITS; i += 3) b.set(i);
  const start = performance.now();
  let total = 0;
  for (let k = 0; k < rounds; k++) total += b.count(0, BITS);
  const ops = rounds / ((performance.now() - start) / 1000);
  if (total === 0) throw new Error("count returned nothing");
  b.free();
  return ops;
}

export function bitmapFigures(): BitmapFigures[] {
  const w = (n: number) => wasmBitmap(n);
  const t = (n: number) => tsBitmap(n);
  // Warm both up so the JIT has compiled the TS twin before it is timed.
  fill(w), fill(t), churn(w, 1000), churn(t, 1000), count(w, 100), count(t, 100);
  return [
    {
      workload: "fill 65,536 bits (findFree + set)",
      wasmOpsPerSecond: fill(w),
      tsOpsPerSecond: fill(t),
    },
    {
      workload: "churn at 90 % full (clear + findFree + set)",
      wasmOpsPerSecond: churn(w, 20000),
      tsOpsPerSecond: churn(t, 20000),
    },
    {
      workload: "count 65,536 bits",
      wasmOpsPerSecond: count(w, 2000),
      tsOpsPerSecond: count(t, 2000),
    },
  ];
}
