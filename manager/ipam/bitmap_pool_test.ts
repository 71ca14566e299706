/** The chunked, persisted bitmap: allocation order, persistence, and the cache after a lost race. */
import assert from "node:assert/strict";
import { openKvStore, type Store } from "../mod.ts";
import { Tx } from "../store/tx.ts";
import { BitmapPool, type PoolEdit, type PoolHead } from "./bitmap_pool.ts";

const PREFIX = ["test_pool"];

/** A 300-bit pool in 64-bit chunks: five chunks, the last one 44 bits. */
async function setup(size = 300): Promise<{ store: Store; pool: BitmapPool } & Disposable> {
  const store = await openKvStore(":memory:");
  const pool = new BitmapPool(store, PREFIX, size, 64);
  return { store, pool, [Symbol.dispose]: () => store.close() };
}

/** Runs `fn` on one edit and commits it; asserts the commit went in. */
async function edit<T>(pool: BitmapPool, fn: (e: PoolEdit) => Promise<T>): Promise<T> {
  const tx = new Tx();
  const e = await pool.edit(tx);
  const result = await fn(e);
  e.flush();
  assert.ok(await tx.commit(pool.store), "commit");
  return result;
}

const allocate = (pool: BitmapPool, allowed?: [number, number][]) =>
  edit(pool, (e) => e.allocate(allowed));

async function storedHead(store: Store): Promise<PoolHead | null> {
  return (await store.get<PoolHead>([...PREFIX, "head"])).value;
}

Deno.test("bitmap pool: allocates every bit once across chunks, then reports exhaustion", async () => {
  using s = await setup();
  const got = [];
  for (let i = 0; i < 300; i++) got.push(await allocate(s.pool));
  assert.deepEqual(got, Array.from({ length: 300 }, (_, i) => i));
  assert.equal(await allocate(s.pool), null);
  const head = await storedHead(s.store);
  assert.equal(head?.used, 300);
  assert.deepEqual(head?.chunkUsed, { 0: 64, 1: 64, 2: 64, 3: 64, 4: 44 });
  assert.equal(await s.pool.count(0, 300), 300);

  // Another pool object on the same keys (a restarted manager) reads the same state.
  const again = new BitmapPool(s.store, PREFIX, 300, 64);
  assert.equal(await allocate(again), null);
  await edit(again, async (e) => {
    for (const i of [0, 63, 64, 299]) assert.equal(await e.test(i), true, `bit ${i}`);
    assert.equal(e.used, 300);
  });
});

Deno.test("bitmap pool: the cursor goes round before a freed bit comes back", async () => {
  using s = await setup();
  assert.deepEqual([await allocate(s.pool), await allocate(s.pool), await allocate(s.pool)], [
    0,
    1,
    2,
  ]);
  assert.equal(await edit(s.pool, (e) => e.release(1)), true);
  assert.equal(await allocate(s.pool), 3, "not the freed 1");
  // Fill up to the end: the search then wraps to the start and finds 1.
  for (let i = 4; i < 300; i++) assert.equal(await allocate(s.pool), i);
  assert.equal(await allocate(s.pool), 1);
  assert.equal(await allocate(s.pool), null);
  await edit(s.pool, (e) => e.release(150));
  await edit(s.pool, (e) => e.release(10));
  assert.equal(await allocate(s.pool), 10, "the cursor stands after 1: 10 comes before 150");
  assert.equal(await allocate(s.pool), 150);
  // The cursor survives a restart.
  await edit(s.pool, (e) => e.release(5));
  await edit(s.pool, (e) => e.release(200));
  assert.equal(await allocate(new BitmapPool(s.store, PREFIX, 300, 64)), 200);
});

Deno.test("bitmap pool: take and release report whether they changed the bit", async () => {
  using s = await setup();
  assert.equal(await edit(s.pool, (e) => e.take(70)), true);
  assert.equal(await edit(s.pool, (e) => e.take(70)), false);
  await edit(s.pool, async (e) => {
    assert.equal(await e.test(70), true);
    assert.equal(await e.test(71), false);
    assert.equal(e.used, 1);
  });
  assert.equal(await edit(s.pool, (e) => e.release(70)), true);
  assert.equal(await edit(s.pool, (e) => e.release(70)), false);
  assert.equal((await storedHead(s.store))?.used, 0);
  await assert.rejects(edit(s.pool, (e) => e.take(300)), RangeError);
  await assert.rejects(edit(s.pool, (e) => e.take(-1)), RangeError);
});

Deno.test("bitmap pool: reserved bits are never allocated and not counted as used", async () => {
  using s = await setup();
  const setBits = await edit(s.pool, async (e) => {
    await e.reserve(0, 5);
    await e.reserve(60, 130);
    await e.reserve(62, 66); // overlaps: counted once
    return e.setBits;
  });
  assert.equal(setBits, 75);
  const head = await storedHead(s.store);
  assert.equal(head?.used, 0);
  assert.deepEqual(head?.chunkUsed, { 0: 9, 1: 64, 2: 2 });
  assert.equal(await allocate(s.pool), 5);
  const rest = [];
  for (let a = await allocate(s.pool); a !== null; a = await allocate(s.pool)) rest.push(a);
  assert.equal(rest.length, 300 - 75 - 1);
  assert.ok(rest.every((i) => i >= 6 && (i < 60 || i >= 130)));
  assert.equal(await s.pool.count(0, 300), 300);
  assert.equal((await storedHead(s.store))?.used, 225);
});

Deno.test("bitmap pool: allocation within allowed ranges", async () => {
  using s = await setup();
  const allowed: [number, number][] = [[10, 12], [62, 66]];
  const got = [];
  for (let i = 0; i < 6; i++) got.push(await allocate(s.pool, allowed));
  assert.deepEqual(got, [10, 11, 62, 63, 64, 65]);
  assert.equal(await allocate(s.pool, allowed), null);
  assert.equal(await allocate(s.pool), 66, "outside the ranges bits are still free");
  assert.equal(await allocate(s.pool, [[0, 5]]), 0, "wraps round to a range before the cursor");
  assert.equal(await s.pool.count(60, 70), 5);
  assert.equal(await s.pool.count(0, 10), 1);
  assert.equal(await s.pool.count(200, 300), 0);
});

Deno.test("bitmap pool: a lost commit drops the cache; the retry sees the winner's state", async () => {
  using s = await setup();
  assert.equal(await allocate(s.pool), 0);

  const tx = new Tx();
  const e = await s.pool.edit(tx);
  assert.equal(await e.allocate(), 1);
  e.flush();
  // Another writer commits first: it took bit 1 itself and moved the cursor to 200.
  const other = new BitmapPool(s.store, PREFIX, 300, 64);
  await edit(other, async (o) => {
    assert.equal(await o.take(1), true);
    await o.allocate([[199, 200]]);
  });
  assert.equal(await tx.commit(s.store), false, "the head changed: the commit must fail");

  await edit(s.pool, async (retry) => {
    assert.equal(await retry.test(1), true, "fresh state: 1 is the other writer's");
    assert.equal(await retry.test(199), true);
    assert.equal(retry.used, 3);
    assert.equal(await retry.allocate(), 200, "fresh cursor");
  });
  assert.equal((await storedHead(s.store))?.used, 4);
});

Deno.test("bitmap pool: a head written behind the pool's back makes the commit fail and the cache reload", async () => {
  using s = await setup();
  await allocate(s.pool);
  const tx = new Tx();
  const e = await s.pool.edit(tx);
  assert.equal(await e.allocate(), 1);
  e.flush();
  const head: PoolHead = { cursor: 100, used: 1, chunkUsed: { 0: 1 } };
  assert.ok(
    (await s.store.commit([], [{ type: "set", key: [...PREFIX, "head"], value: head }])).ok,
  );
  assert.equal(await tx.commit(s.store), false);
  await edit(s.pool, async (retry) => {
    assert.equal(await retry.test(1), false, "the lost allocation is gone from the cache");
    assert.equal(await retry.allocate(), 100);
  });
});

Deno.test("bitmap pool: an aborted edit leaves nothing behind", async () => {
  using s = await setup();
  const tx = new Tx();
  const e = await s.pool.edit(tx);
  for (let i = 0; i < 70; i++) await e.allocate();
  tx.abort();
  assert.equal(await storedHead(s.store), null);
  await edit(s.pool, async (fresh) => {
    assert.equal(fresh.used, 0);
    assert.equal(await fresh.test(0), false);
    assert.equal(await fresh.allocate(), 0);
  });
});

Deno.test("bitmap pool: destroy deletes the head and every chunk", async () => {
  using s = await setup();
  await edit(s.pool, async (e) => {
    await e.take(0);
    await e.take(299);
  });
  await edit(s.pool, (e) => Promise.resolve(e.destroy()));
  const left = [];
  for await (const entry of s.store.list(PREFIX)) left.push(entry.key);
  assert.deepEqual(left, []);
  assert.equal(await allocate(s.pool), 0, "a destroyed pool starts empty");
});

Deno.test("bitmap pool: exclusive runs sections one at a time, in order", async () => {
  using s = await setup();
  const log: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const first = s.pool.exclusive(async () => {
    log.push("first in");
    await gate;
    log.push("first out");
  });
  const second = s.pool.exclusive(() => {
    log.push("second");
    return Promise.resolve();
  });
  const failing = s.pool.exclusive(() => Promise.reject(new Error("boom")));
  const third = s.pool.exclusive(() => Promise.resolve(log.push("third")));
  await Promise.resolve();
  assert.deepEqual(log, ["first in"]);
  release();
  await Promise.all([first, second, assert.rejects(failing, /boom/), third]);
  assert.deepEqual(log, ["first in", "first out", "second", "third"]);
});
