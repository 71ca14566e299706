/**
 * The benchmark workloads of bitmap_bench.ts, over one 65,536-bit chunk (the largest chunk).
 *
 * bitmap_bench.ts imports this module once per implementation under distinct specifiers, so each
 * implementation gets its own copy of these functions. V8 keeps type feedback per function: a
 * shared copy would see both implementations, turn polymorphic and slow down whichever runs
 * second, while production code only ever sees one.
 *
 * @module
 */
import type { Bitmap } from "../bitmap.ts";
import { mulberry32 } from "../mulberry32.ts";

const SIZE = 65536;

const rand = mulberry32(42);

/** Stored bytes of a SIZE-bit map where each bit is set with probability `density`. */
function randomBytes(density: number): Uint8Array {
  const bytes = new Uint8Array(SIZE / 8);
  for (let i = 0; i < SIZE; i++) if (rand() < density) bytes[i >> 3] |= 1 << (i & 7);
  return bytes;
}

const EMPTY = new Uint8Array(0);
const NINETY = randomBytes(0.9);
const HALF = randomBytes(0.5);
const CHURN_OPS = 1024;
const VICTIMS = Uint32Array.from({ length: CHURN_OPS }, () => Math.floor(rand() * SIZE));
const HOLE = 100;
const FULL_BUT_HOLE = new Uint8Array(SIZE / 8).fill(0xff);
FULL_BUT_HOLE[HOLE >> 3] &= ~(1 << (HOLE & 7));

// Results flow here so the optimizer cannot drop the work.
let sink = 0;
globalThis.addEventListener("unload", () => {
  if (sink === -1) console.log(sink);
});

/** One benchmark of one implementation. */
export interface Workload {
  name: string;
  group: string;
  baseline: boolean;
  fn(): void;
}

/**
 * Every workload for one implementation; `baseline` marks the yardstick. bitmap_bench.ts registers
 * them group by group, so that both implementations run each workload after the same history.
 */
export function workloads(
  name: string,
  make: (size: number, bytes?: Uint8Array) => Bitmap,
  baseline: boolean,
): Workload[] {
  const list: Workload[] = [];
  // One bitmap per workload, reset by load() in each iteration; never freed, as the process
  // ends with the bench.
  const all = make(SIZE);
  list.push({
    name: `${name}: allocate all 65,536 bits (findFree + set from a moving cursor)`,
    group: "allocate all",
    baseline,
    fn() {
      all.load(EMPTY);
      let cursor = 0;
      for (let n = 0; n < SIZE; n++) {
        const i = all.findFree(0, SIZE, cursor);
        all.set(i);
        cursor = i + 1;
      }
      sink += cursor;
    },
  });

  const churn = make(SIZE);
  list.push({
    name: `${name}: churn at 90% full (${CHURN_OPS} × clear + findFree + set)`,
    group: "churn at 90%",
    baseline,
    fn() {
      churn.load(NINETY);
      let cursor = 0;
      for (const victim of VICTIMS) {
        // Only release an allocated bit, so the density stays at 90%.
        if (!churn.test(victim)) continue;
        churn.clear(victim);
        const i = churn.findFree(0, SIZE, cursor);
        churn.set(i);
        cursor = i + 1;
      }
      sink += cursor;
    },
  });

  const batch = make(SIZE);
  const out = new Uint32Array(SIZE);
  list.push({
    name: `${name}: allocate all 65,536 bits in one batch call (allocate)`,
    group: "allocate all, batch",
    baseline,
    fn() {
      batch.load(EMPTY);
      const n = batch.allocate(out, 0, SIZE, 0);
      sink += out[n - 1];
    },
  });

  const churnBatch = make(SIZE);
  list.push({
    name: `${name}: churn at 90% full in one batch (clearMany ${CHURN_OPS} + allocate as many)`,
    group: "churn at 90%, batch",
    baseline,
    fn() {
      churnBatch.load(NINETY);
      // Only bits that were allocated are released, so as many are allocated again.
      const released = churnBatch.clearMany(VICTIMS);
      const n = churnBatch.allocate(out.subarray(0, released), 0, SIZE, 0);
      sink += n;
    },
  });

  const half = make(SIZE, HALF);
  list.push({
    name: `${name}: count over 65,536 bits`,
    group: "count",
    baseline,
    fn() {
      sink += half.count();
    },
  });

  const full = make(SIZE, FULL_BUT_HOLE);
  list.push({
    name: `${name}: findFree in a full map, the only free bit just behind the cursor`,
    group: "scan a full map",
    baseline,
    fn() {
      sink += full.findFree(0, SIZE, HOLE + 1);
    },
  });
  return list;
}
