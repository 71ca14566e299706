import assert from "node:assert/strict";
import { Backoff, backoffMs, retry, sleep } from "./backoff.ts";
import { FakeClock, settle } from "./clock_fake.ts";

Deno.test("backoffMs grows by the factor from firstMs and stops at maxMs", () => {
  const o = { firstMs: 100, maxMs: 1000 };
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((n) => backoffMs(n, o)), [
    100,
    200,
    400,
    800,
    1000,
    1000,
  ]);
  assert.equal(backoffMs(2, { firstMs: 10, factor: 3 }), 30);
  // Defaults: 200 ms doubling to 30 s.
  assert.equal(backoffMs(1), 200);
  assert.equal(backoffMs(50), 30_000);
});

Deno.test("backoffMs with jitter shortens each wait by up to that fraction", () => {
  const o = { firstMs: 1000, jitter: 0.5 };
  assert.equal(backoffMs(1, { ...o, random: () => 0 }), 1000);
  assert.equal(backoffMs(1, { ...o, random: () => 0.5 }), 750);
  assert.equal(backoffMs(1, { ...o, random: () => 0.9 }), 550);
});

Deno.test("Backoff counts failures in a row and starts over after reset", () => {
  const b = new Backoff({ firstMs: 50, maxMs: 150 });
  assert.equal(b.peek(), 50);
  assert.deepEqual([b.next(), b.next(), b.next()], [50, 100, 150]);
  assert.equal(b.attempts, 3);
  b.reset();
  assert.equal(b.attempts, 0);
  assert.equal(b.next(), 50);
});

Deno.test("retry() waits a growing backoff between failures and answers the first success", async () => {
  const clock = new FakeClock();
  const seen: [string, number, number][] = [];
  let calls = 0;
  const done = retry(() => {
    calls++;
    return calls < 4 ? Promise.reject(new Error(`failure ${calls}`)) : Promise.resolve("ok");
  }, {
    firstMs: 100,
    clock,
    onError: (err, wait, attempt) => seen.push([(err as Error).message, wait, attempt]),
  });
  await settle();
  assert.equal(calls, 1);
  await clock.advance(100);
  assert.equal(calls, 2);
  await clock.advance(200);
  assert.equal(calls, 3);
  await clock.advance(400);
  assert.equal(await done, "ok");
  assert.deepEqual(seen, [["failure 1", 100, 1], ["failure 2", 200, 2], ["failure 3", 400, 3]]);
  assert.deepEqual(clock.slept, [100, 200, 400]);
});

Deno.test("retry() throws a non-retryable error at once, and the last one when attempts run out", async () => {
  const clock = new FakeClock();
  await assert.rejects(
    retry(() => Promise.reject(new TypeError("bad input")), {
      clock,
      retryable: (e) => !(e instanceof TypeError),
    }),
    TypeError,
  );
  assert.deepEqual(clock.slept, []);

  let n = 0;
  const p = retry(() => Promise.reject(new Error(`try ${++n}`)), { clock, attempts: 2 });
  p.catch(() => {});
  await settle();
  await clock.advance(200);
  await assert.rejects(p, /try 2/);
  assert.equal(n, 2);
});

Deno.test("retry() stops when its signal aborts during a wait, with the last error", async () => {
  const clock = new FakeClock();
  const stop = new AbortController();
  let n = 0;
  const p = retry(() => Promise.reject(new Error(`try ${++n}`)), { clock, signal: stop.signal });
  p.catch(() => {});
  await settle();
  assert.equal(clock.sleeping, 1);
  stop.abort();
  await assert.rejects(p, /try 1/);
  assert.equal(n, 1);
});

Deno.test("sleep() resolves at once on an aborted signal", async () => {
  const stop = new AbortController();
  const p = sleep(3_600_000, stop.signal);
  stop.abort();
  await p;
  await sleep(3_600_000, stop.signal);
});
