/** Pools of addresses as one dense index, gaps and all. */
import assert from "node:assert/strict";
import { IndexSpace } from "./index_space.ts";

// 10..14, 20..20, 100..102: 9 values.
const space = new IndexSpace([
  { start: 10n, end: 14n },
  { start: 20n, end: 20n },
  { start: 100n, end: 102n },
]);

Deno.test("index space: size and the value of every index, in order", () => {
  assert.equal(space.size, 9);
  const values = Array.from({ length: space.size }, (_, i) => space.valueAt(i));
  assert.deepEqual(values, [10n, 11n, 12n, 13n, 14n, 20n, 100n, 101n, 102n]);
  values.forEach((v, i) => assert.equal(space.indexOf(v), i));
});

Deno.test("index space: values in the gaps or outside have no index", () => {
  for (const v of [0n, 9n, 15n, 19n, 21n, 99n, 103n, 1n << 100n]) {
    assert.equal(space.indexOf(v), -1, String(v));
  }
});

Deno.test("index space: valueAt refuses indexes outside the space", () => {
  for (const i of [-1, 9, 1.5, NaN]) assert.throws(() => space.valueAt(i), RangeError, String(i));
});

Deno.test("index space: index ranges of a value range, clipped to the pools", () => {
  assert.deepEqual(space.indexRanges(12n, 13n), [[2, 4]]);
  assert.deepEqual(space.indexRanges(0n, 1000n), [[0, 5], [5, 6], [6, 9]]);
  assert.deepEqual(space.indexRanges(13n, 100n), [[3, 5], [5, 6], [6, 7]]);
  assert.deepEqual(space.indexRanges(15n, 19n), [], "a gap holds no index");
  assert.deepEqual(space.indexRanges(20n, 20n), [[5, 6]]);
});

Deno.test("index space: large IPv6-sized values keep exact offsets", () => {
  const base = 0xfd00_0000_0000_0000_0000_0000_0000_0000n;
  const big = new IndexSpace([{ start: base + 16n, end: base + 31n }, {
    start: base + (1n << 64n),
    end: base + (1n << 64n) + 3n,
  }]);
  assert.equal(big.size, 20);
  assert.equal(big.valueAt(16), base + (1n << 64n));
  assert.equal(big.indexOf(base + (1n << 64n) + 3n), 19);
  assert.equal(big.indexOf(base + 32n), -1);
});

Deno.test("index space: an empty space has size 0 and no index", () => {
  const empty = new IndexSpace([]);
  assert.equal(empty.size, 0);
  assert.equal(empty.indexOf(1n), -1);
  assert.throws(() => empty.valueAt(0), RangeError);
  assert.deepEqual(empty.indexRanges(0n, 10n), []);
});
