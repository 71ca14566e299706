import assert from "node:assert/strict";
import { type Bitmap, wasmBitmap, wasmMemoryBytes } from "./bitmap.ts";
import { tsBitmap } from "./bitmap_ts.ts";
import { mulberry32 } from "./mulberry32.ts";

type Factory = (size: number, bytes?: Uint8Array) => Bitmap;
const impls: [string, Factory][] = [["wasm", wasmBitmap], ["ts", tsBitmap]];

/** Runs fn on a fresh bitmap and frees it even when an assertion fails. */
function withBitmap(make: Factory, size: number, fn: (b: Bitmap) => void, bytes?: Uint8Array) {
  const b = make(size, bytes);
  try {
    fn(b);
  } finally {
    b.free();
  }
}

for (const [name, make] of impls) {
  Deno.test(`${name}: empty bitmap`, () => {
    withBitmap(make, 0, (b) => {
      assert.equal(b.size, 0);
      assert.equal(b.findFree(0, 0, 0), -1);
      assert.equal(b.count(), 0);
      assert.deepEqual(b.toBytes(), new Uint8Array(0));
      assert.throws(() => b.set(0), RangeError);
    });
  });

  Deno.test(`${name}: allocating every bit of odd sizes ends with -1`, () => {
    for (const size of [1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 1000]) {
      withBitmap(make, size, (b) => {
        let cursor = 0;
        for (let n = 0; n < size; n++) {
          const i = b.findFree(0, size, cursor);
          assert.equal(i, n, `size ${size}`);
          b.set(i);
          cursor = i + 1;
        }
        assert.equal(b.findFree(0, size, cursor), -1);
        assert.equal(b.findFree(0, size, 0), -1);
        assert.equal(b.count(), size);
        const bytes = b.toBytes();
        assert.equal(bytes.length, Math.ceil(size / 8));
        // Padding bits of the last byte are never set.
        assert.equal(bytes[bytes.length - 1], size % 8 ? (1 << (size % 8)) - 1 : 0xff);
      });
    }
  });

  Deno.test(`${name}: set, clear and test across word boundaries`, () => {
    withBitmap(make, 200, (b) => {
      for (const i of [0, 31, 32, 63, 64, 65, 127, 128, 199]) {
        assert.equal(b.test(i), false);
        b.set(i);
        b.set(i); // idempotent
        assert.equal(b.test(i), true);
      }
      assert.equal(b.count(), 9);
      b.clear(64);
      b.clear(64);
      b.clear(1); // already clear
      assert.equal(b.test(64), false);
      assert.equal(b.test(63), true);
      assert.equal(b.test(65), true);
      assert.equal(b.count(), 8);
    });
  });

  Deno.test(`${name}: count over ranges crossing words`, () => {
    withBitmap(make, 300, (b) => {
      for (let i = 0; i < 300; i += 3) b.set(i);
      const expected = (lo: number, hi: number) => {
        let n = 0;
        for (let i = lo; i < hi; i++) if (i % 3 === 0) n++;
        return n;
      };
      const ranges = "0-300 0-0 5-5 60-70 63-64 64-65 1-299 31-97 128-256 200-300".split(" ");
      for (const [lo, hi] of ranges.map((r) => r.split("-").map(Number))) {
        assert.equal(b.count(lo, hi), expected(lo, hi), `count(${lo}, ${hi})`);
      }
      assert.equal(b.count(), 100);
      assert.equal(b.count(150), expected(150, 300));
    });
  });

  Deno.test(`${name}: findFree wraps around within [start, end)`, () => {
    withBitmap(make, 200, (b) => {
      for (let i = 150; i < 200; i++) b.set(i);
      assert.equal(b.findFree(0, 200, 150), 0);
      assert.equal(b.findFree(100, 200, 180), 100);
      for (let i = 100; i < 150; i++) b.set(i);
      assert.equal(b.findFree(100, 200, 180), -1, "range full, rest of the map free");
      assert.equal(b.findFree(64, 200, 200), 64, "from = end starts at start");
      assert.equal(b.findFree(10, 10, 10), -1, "empty range");
      b.set(64);
      b.clear(190);
      assert.equal(b.findFree(64, 200, 191), 65, "wraps past the end");
      assert.equal(b.findFree(64, 200, 190), 190, "from itself is free");
      assert.equal(b.findFree(64, 190, 120), 65, "end excludes 190");
      assert.equal(b.findFree(189, 190, 189), -1);
      assert.equal(b.findFree(189, 191, 189), 190);
    });
  });

  Deno.test(`${name}: the one free bit of a full 65,536-bit map is found from any cursor`, () => {
    const size = 65536;
    withBitmap(make, size, (b) => {
      for (const hole of [0, 1, 63, 64, 4095, 40000, 65535]) {
        b.clear(hole);
        for (const from of [0, hole, hole + 1, 32768, 65535, 65536].filter((f) => f <= size)) {
          assert.equal(b.findFree(0, size, from), hole, `hole ${hole}, from ${from}`);
        }
        assert.equal(b.count(), size - 1);
        b.set(hole);
        assert.equal(b.findFree(0, size, hole), -1);
      }
    }, new Uint8Array(size / 8).fill(0xff));
  });

  Deno.test(`${name}: load and toBytes use the stored byte layout`, () => {
    withBitmap(make, 80, (b) => {
      for (const i of [0, 9, 63, 64, 79]) b.set(i);
      const bytes = b.toBytes();
      assert.deepEqual(bytes, Uint8Array.of(0x01, 0x02, 0, 0, 0, 0, 0, 0x80, 0x01, 0x80));
      bytes[0] = 0; // a copy: does not write through
      assert.equal(b.test(0), true);

      b.load(Uint8Array.of(0b1010_0101, 0xff));
      const probes = [0, 1, 2, 5, 7, 8, 15];
      const expected = [true, false, true, true, true, true, true];
      assert.deepEqual(probes.map((i) => b.test(i)), expected);
      assert.equal(b.test(64), false, "shorter input clears the rest");
      assert.equal(b.count(), 12);
      assert.throws(() => b.load(new Uint8Array(11)), RangeError);
    });
    // Padding bits of input are dropped.
    withBitmap(make, 10, (b) => {
      assert.equal(b.count(), 10);
      assert.deepEqual(b.toBytes(), Uint8Array.of(0xff, 0x03));
      assert.equal(b.findFree(0, 10, 0), -1);
    }, Uint8Array.of(0xff, 0xff));
    assert.throws(() => make(10, new Uint8Array(3)), RangeError);
  });

  Deno.test(`${name}: bad indexes and ranges throw RangeError`, () => {
    assert.throws(() => make(-1), RangeError);
    assert.throws(() => make(1.5), RangeError);
    assert.throws(() => make(2 ** 31), RangeError);
    withBitmap(make, 100, (b) => {
      for (const i of [-1, 100, 1.5, NaN, Infinity, 2 ** 32]) {
        assert.throws(() => b.set(i), RangeError, `set(${i})`);
        assert.throws(() => b.clear(i), RangeError, `clear(${i})`);
        assert.throws(() => b.test(i), RangeError, `test(${i})`);
      }
      assert.throws(() => b.findFree(10, 20, 5), RangeError, "from < start");
      assert.throws(() => b.findFree(10, 20, 21), RangeError, "from > end");
      assert.throws(() => b.findFree(0, 101, 0), RangeError, "end > size");
      assert.throws(() => b.findFree(-1, 10, 0), RangeError);
      assert.throws(() => b.count(5, 3), RangeError);
      assert.throws(() => b.count(0, 101), RangeError);
      assert.throws(() => b.count(-1), RangeError);
    });
  });

  Deno.test(`${name}: allocate takes what step-by-step findFree + set would, wrapping`, () => {
    for (const size of [1, 7, 63, 64, 65, 200, 1000]) {
      withBitmap(make, size, (b) => {
        const out = new Uint32Array(size + 5);
        assert.equal(b.allocate(out, 0, size, 0), size, `size ${size}`);
        assert.deepEqual([...out.subarray(0, size)], Array.from({ length: size }, (_, i) => i));
        assert.equal(b.count(), size);
        assert.equal(b.allocate(out, 0, size, 0), 0, "full");
      });
    }
    withBitmap(make, 200, (b) => {
      for (const i of [3, 64, 150, 151, 199]) b.set(i);
      const out = new Uint32Array(4);
      assert.equal(b.allocate(out, 100, 200, 197), 4);
      assert.deepEqual([...out], [197, 198, 100, 101], "wraps to start");
      assert.equal(b.allocate(new Uint32Array(0), 0, 200, 0), 0);
      assert.equal(b.allocate(out, 60, 66, 66), 4);
      assert.deepEqual([...out], [60, 61, 62, 63]);
      assert.equal(b.allocate(out, 60, 66, 60), 1, "64 was set: only 65 is left");
      assert.equal(out[0], 65);
      assert.throws(() => b.allocate(out, 10, 20, 5), RangeError);
      assert.throws(() => b.allocate(out, 0, 201, 0), RangeError);
    });
  });

  Deno.test(`${name}: setRange and clearMany report what changed`, () => {
    withBitmap(make, 300, (b) => {
      for (const i of [5, 64, 130]) b.set(i);
      assert.equal(b.setRange(0, 0), 0);
      assert.equal(b.setRange(60, 70), 9);
      assert.equal(b.setRange(0, 300), 300 - 12);
      assert.equal(b.count(), 300);
      assert.deepEqual(b.toBytes().at(-1), 0x0f, "no padding bit set");
      assert.equal(b.clearMany([5, 5, 64, 299]), 3, "a repeated index counts once");
      assert.equal(b.count(), 297);
      assert.equal(b.clearMany(Uint32Array.of(5, 6)), 1);
      assert.throws(() => b.clearMany([7, 300]), RangeError);
      assert.equal(b.test(7), true, "nothing cleared on a bad index");
      assert.throws(() => b.clearMany([-1]), RangeError);
      assert.throws(() => b.setRange(5, 3), RangeError);
      assert.throws(() => b.setRange(0, 301), RangeError);
    });
  });

  Deno.test(`${name}: use after free throws`, () => {
    const b = make(64);
    b.set(3);
    b.free();
    assert.equal(b.size, 64);
    const uses = [
      () => b.test(3),
      () => b.set(3),
      () => b.clear(3),
      () => b.findFree(0, 64, 0),
      () => b.count(),
      () => b.allocate(new Uint32Array(1), 0, 64, 0),
      () => b.setRange(0, 1),
      () => b.clearMany([3]),
      () => b.load(new Uint8Array(0)),
      () => b.toBytes(),
      () => b.free(),
    ];
    for (const use of uses) {
      assert.throws(use, /after free/);
    }
  });
}

Deno.test("wasm: freed regions are reused", () => {
  const before = wasmMemoryBytes();
  // 2,000 × 8 KiB would need 16 MiB without reuse.
  for (let n = 0; n < 2000; n++) {
    const b = wasmBitmap(65536);
    b.set(n);
    b.free();
  }
  assert.ok(wasmMemoryBytes() - before <= 1 << 20, `grew ${wasmMemoryBytes() - before} bytes`);
});

Deno.test("wasm: bitmaps survive memory growth", () => {
  const pattern = new Uint8Array(8192).map((_, i) => (i * 37) & 0xff);
  const first = wasmBitmap(65536, pattern);
  const before = wasmMemoryBytes();
  const others: Bitmap[] = [];
  // Allocate until the memory has grown, which replaces memory.buffer.
  while (wasmMemoryBytes() === before) others.push(wasmBitmap(65536));
  try {
    assert.deepEqual(first.toBytes(), pattern);
    first.load(pattern.map((x) => x ^ 0xff));
    assert.equal(first.test(0), true);
    for (const b of others) assert.equal(b.count(), 0);
    // Views made before the growth (bitmaps and the batch scratch region) were re-created.
    const out = new Uint32Array(3);
    assert.equal(others[0].allocate(out, 0, 65536, 10), 3);
    assert.deepEqual([...out], [10, 11, 12]);
    assert.equal(others[0].test(11), true);
    assert.equal(others[0].clearMany(Uint32Array.of(11, 12, 13)), 2);
    const grownAgain = wasmMemoryBytes();
    while (wasmMemoryBytes() === grownAgain) others.push(wasmBitmap(65536));
    assert.equal(others[0].count(), 1);
    assert.equal(others[0].test(10), true);
    assert.equal(others[0].clearMany(Uint32Array.of(10)), 1);
  } finally {
    first.free();
    for (const b of others) b.free();
  }
});

/** Reference model: the set of set bits, searched bit by bit. */
class Model {
  readonly bits = new Set<number>();
  constructor(readonly size: number) {}

  findFree(start: number, end: number, from: number): number {
    for (let i = from; i < end; i++) if (!this.bits.has(i)) return i;
    for (let i = start; i < from; i++) if (!this.bits.has(i)) return i;
    return -1;
  }

  count(start: number, end: number): number {
    let n = 0;
    for (const i of this.bits) if (i >= start && i < end) n++;
    return n;
  }

  toBytes(): Uint8Array {
    const bytes = new Uint8Array(Math.ceil(this.size / 8));
    for (const i of this.bits) bytes[i >> 3] |= 1 << (i & 7);
    return bytes;
  }

  load(bytes: Uint8Array): void {
    this.bits.clear();
    for (let i = 0; i < Math.min(this.size, bytes.length * 8); i++) {
      if (bytes[i >> 3] & (1 << (i & 7))) this.bits.add(i);
    }
  }
}

/**
 * Applies one random op sequence to the model and to both implementations, comparing every
 * result. `fill` is the initial density and the chance that a write sets rather than clears, so
 * that full ranges (-1) and long scans both occur.
 */
function runSequence(seed: number, size: number, fill: number, steps: number): void {
  const rand = mulberry32(seed);
  const int = (n: number) => Math.floor(rand() * n);
  /** n sorted random positions in [0, size], for ranges. */
  const bounds = (n: number) =>
    Array.from({ length: n }, () => int(size + 1)).sort((a, b) => a - b);
  // Start at the target density so large maps see near-full scans too.
  const initial = new Uint8Array(Math.ceil(size / 8));
  for (let i = 0; i < size; i++) if (rand() < fill) initial[i >> 3] |= 1 << (i & 7);
  const model = new Model(size);
  model.load(initial);
  const bitmaps = impls.map(([name, make]) => [name, make(size, initial)] as const);
  let cursor = int(size);
  let op = "";
  const check = (actual: unknown, expected: unknown, name: string, step: number) => {
    assert.deepEqual(actual, expected, `${name}: seed ${seed}, size ${size}, step ${step}: ${op}`);
  };
  try {
    for (let step = 0; step < steps; step++) {
      const r = rand();
      if (r < 0.3) {
        const i = int(size);
        const on = rand() < fill;
        op = `${on ? "set" : "clear"}(${i})`;
        if (on) model.bits.add(i);
        else model.bits.delete(i);
        for (const [, b] of bitmaps) on ? b.set(i) : b.clear(i);
      } else if (r < 0.55) {
        // IPAM-style allocation from a moving cursor.
        op = `allocate from ${cursor}`;
        const expected = model.findFree(0, size, cursor);
        for (const [name, b] of bitmaps) check(b.findFree(0, size, cursor), expected, name, step);
        if (expected >= 0) {
          model.bits.add(expected);
          for (const [, b] of bitmaps) b.set(expected);
          cursor = expected + 1;
        }
      } else if (r < 0.75) {
        const [start, from, end] = bounds(3);
        op = `findFree(${start}, ${end}, ${from})`;
        const expected = model.findFree(start, end, from);
        for (const [name, b] of bitmaps) check(b.findFree(start, end, from), expected, name, step);
      } else if (r < 0.88) {
        const [lo, hi] = bounds(2);
        op = `count(${lo}, ${hi})`;
        const expected = model.count(lo, hi);
        for (const [name, b] of bitmaps) check(b.count(lo, hi), expected, name, step);
      } else if (r < 0.97) {
        const i = int(size);
        op = `test(${i})`;
        for (const [name, b] of bitmaps) check(b.test(i), model.bits.has(i), name, step);
      } else if (r < 0.985) {
        // Random (possibly short) input, padding bits included.
        const bytes = new Uint8Array(int(Math.ceil(size / 8) + 1)).map(() => int(256));
        op = `load(${bytes.length} random bytes)`;
        model.load(bytes);
        for (const [, b] of bitmaps) b.load(bytes);
      } else {
        op = "toBytes()";
        const expected = model.toBytes();
        for (const [name, b] of bitmaps) check(b.toBytes(), expected, name, step);
      }
    }
    op = "final toBytes()";
    for (const [name, b] of bitmaps) check(b.toBytes(), model.toBytes(), name, steps);
  } finally {
    for (const [, b] of bitmaps) b.free();
  }
}

Deno.test("property: wasm and ts match a Set model on random op sequences", () => {
  // Fixed seeds keep known cases covered; the clock seed explores new ones (in the message).
  const seeds = [1, 2, 0xc0ffee, Date.now() >>> 0];
  const sizes = [1, 5, 8, 31, 64, 65, 100, 129, 256, 1000, 4099, 8191];
  let seq = 0;
  for (const seed of seeds) {
    for (const size of sizes) {
      for (const fill of [0.5, 0.9, 0.99, 0.999]) {
        runSequence((seed + seq++ * 0x9e3779b9) >>> 0, size, fill, 600);
      }
    }
  }
});

Deno.test("property: batch operations match step-by-step ones on both implementations", () => {
  const seeds = [3, 4, Date.now() >>> 0];
  for (const seed of seeds) {
    const rand = mulberry32(seed);
    const int = (n: number) => Math.floor(rand() * n);
    for (const size of [1, 31, 64, 65, 129, 1000, 4099, 40000]) {
      const fill = [0.1, 0.5, 0.9, 0.999][int(4)];
      const initial = new Uint8Array(Math.ceil(size / 8));
      for (let i = 0; i < size; i++) if (rand() < fill) initial[i >> 3] |= 1 << (i & 7);
      const model = new Model(size);
      model.load(initial);
      const bitmaps = impls.map(([name, make]) => [name, make(size, initial)] as const);
      try {
        for (let step = 0; step < 60; step++) {
          const at = `seed ${seed}, size ${size}, step ${step}`;
          const r = rand();
          if (r < 0.5) {
            const [start, from, end] = [int(size + 1), int(size + 1), int(size + 1)]
              .sort((a, b) => a - b);
            const want = int(size + 2);
            const expected: number[] = [];
            let cursor = from;
            while (expected.length < want) {
              const i = model.findFree(start, end, cursor);
              if (i < 0) break;
              model.bits.add(i);
              expected.push(i);
              cursor = i + 1;
            }
            for (const [name, b] of bitmaps) {
              const out = new Uint32Array(want);
              const n = b.allocate(out, start, end, from);
              assert.deepEqual([...out.subarray(0, n)], expected, `${name} allocate: ${at}`);
            }
          } else if (r < 0.75) {
            const indices = Array.from({ length: int(size) + 1 }, () => int(size));
            let expected = 0;
            for (const i of indices) if (model.bits.delete(i)) expected++;
            for (const [name, b] of bitmaps) {
              assert.equal(b.clearMany(indices), expected, `${name} clearMany: ${at}`);
            }
          } else {
            const [lo, hi] = [int(size + 1), int(size + 1)].sort((a, b) => a - b);
            let expected = 0;
            for (let i = lo; i < hi; i++) {
              if (!model.bits.has(i)) expected++;
              model.bits.add(i);
            }
            for (const [name, b] of bitmaps) {
              assert.equal(b.setRange(lo, hi), expected, `${name} setRange: ${at}`);
            }
          }
          for (const [name, b] of bitmaps) {
            assert.deepEqual(b.toBytes(), model.toBytes(), `${name} contents: ${at}`);
          }
        }
      } finally {
        for (const [, b] of bitmaps) b.free();
      }
    }
  }
});
