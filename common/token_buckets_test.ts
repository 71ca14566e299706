/** Token buckets per key: a burst, then the rate; each key its own; none without a rate. */
import assert from "node:assert/strict";
import { TokenBuckets } from "./token_buckets.ts";

Deno.test("token buckets: a key spends its burst, then gets the rate; other keys keep theirs", () => {
  let now = 0;
  const b = new TokenBuckets<string>(10, 5, () => now);
  const takes = (key: string, n: number) => Array.from({ length: n }, () => b.take(key));
  assert.deepEqual(takes("a", 6), [true, true, true, true, true, false]);
  assert.deepEqual(takes("b", 5), [true, true, true, true, true], "b has its own burst");
  now += 300; // 3 tokens at 10 a second
  assert.deepEqual(takes("a", 4), [true, true, true, false]);
  now += 60_000; // a long pause fills the bucket up to the burst, no more
  assert.equal(takes("a", 10).filter((x) => x).length, 5);
});

Deno.test("token buckets: no rate, no limit", () => {
  const b = new TokenBuckets<number>(0, 0);
  for (let i = 0; i < 1000; i++) assert.ok(b.take(1));
});
