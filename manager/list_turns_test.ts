import assert from "node:assert/strict";
import { FakeClock, settle } from "../common/clock_fake.ts";
import { LIST_PAGE, ListTurns } from "./list_turns.ts";
import { must, net, testApp, TOKEN } from "./test_support.ts";

async function tempDir() {
  const path = await Deno.makeTempDir({ prefix: "knitter-list-turns-" });
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

/** Whether `p` has settled by now (after the event loop moved a few turns). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(() => done = true);
  await settle();
  return done;
}

Deno.test("a list goes on at once when no call is in progress", async () => {
  const turns = new ListTurns(10, new FakeClock());
  assert.equal(await settled(turns.giveWay()), true);
});

Deno.test("a list waits between pages while a call is in progress, and goes on when it ends", async () => {
  const turns = new ListTurns(10, new FakeClock());
  const endA = turns.call();
  const endB = turns.call();
  const waiting = turns.giveWay();
  assert.equal(await settled(waiting), false);
  endA();
  assert.equal(await settled(waiting), false, "one call is still in progress");
  endB();
  assert.equal(await settled(waiting), true);
  // Ending a call twice counts once.
  endB();
  const endC = turns.call();
  assert.equal(await settled(turns.giveWay()), false);
  endC();
});

Deno.test("a steady stream of calls slows a list but never stops it: maxWaitMs a page at most", async () => {
  const clock = new FakeClock();
  const turns = new ListTurns(10, clock);
  turns.call(); // never ends
  const waiting = turns.giveWay();
  assert.equal(await settled(waiting), false);
  await clock.advance(9);
  assert.equal(await settled(waiting), false);
  await clock.advance(1);
  assert.equal(await settled(waiting), true);
  // Pages that gave up waiting leave nothing behind to wake.
  for (let i = 0; i < 3; i++) {
    const next = turns.giveWay();
    await settle();
    await clock.advance(10);
    assert.equal(await settled(next), true);
  }
  assert.equal(turns.waiting, 0);
  assert.equal(clock.sleeping, 0);
});

Deno.test("a list read in pages, giving way to calls in progress, answers every port in the store's order", async () => {
  await using dir = await tempDir();
  // Pages and their order are the subject here, not a tenant's share of the manager's time
  // (fairness_test.ts): without this budget, 250 PUTs on a machine busy with other test files
  // at once took more than acme's share and were refused (429).
  using t = await testApp({
    path: `${dir.path}/list.kv`,
    tenants: ["acme", "globex"],
    fairness: { tenant: { busyMsPerSecond: 10_000, busyBurstMs: 60_000 } },
  });
  for (const tenant of ["acme", "globex"]) {
    must(await t.call("POST", `tenants/${tenant}/networks`, net("blue", "10.1.0.0/16")), 201);
  }
  // 2.5 pages of ports, made in an order other than the store's.
  const ids = Array.from({ length: LIST_PAGE * 2.5 }, (_, i) => `p${(i * 37) % 250}`);
  for (let i = 0; i < ids.length; i += 25) {
    await Promise.all(
      ids.slice(i, i + 25).map(async (id) =>
        must(await t.call("PUT", `tenants/acme/networks/blue/ports/${id}`, {}, TOKEN.acme), 201)
      ),
    );
  }
  const inStore = [...ids].sort();
  // While the lists read, another tenant's calls come and go.
  const lists = Array.from(
    { length: 4 },
    () => t.call("GET", "tenants/acme/networks/blue/ports", undefined, TOKEN.acme),
  );
  const calls = Array.from(
    { length: 20 },
    (_, i) => t.call("PUT", `tenants/globex/networks/blue/ports/g${i}`, {}, TOKEN.globex),
  );
  for (const r of await Promise.all(calls)) must(r, 201);
  for (const r of await Promise.all(lists)) {
    must(r, 200);
    assert.deepEqual(r.body.items.map((p: { id: string }) => p.id), inStore);
  }
  const all = must(await t.call("GET", "ports?tenant=acme", undefined, TOKEN.acme), 200);
  assert.deepEqual(all.items.map((p: { id: string }) => p.id), inStore);
});

Deno.test("lists read their pages one at a time, in the order they asked, paced while others wait", async () => {
  const clock = new FakeClock();
  const turns = new ListTurns(10, clock, 1);
  const order: string[] = [];
  let finishA!: () => void;
  const a = turns.page(async () => {
    order.push("a starts");
    await new Promise<void>((r) => finishA = r);
    order.push("a ends");
  });
  const b = turns.page(() => Promise.resolve(void order.push("b")));
  assert.equal(await settled(b), false, "b waits for a's page");
  finishA();
  assert.equal(await settled(a), false, "b waits: a's page is followed by a pause");
  assert.deepEqual(order, ["a starts", "a ends"]);
  await clock.advance(1);
  await Promise.all([a, b]);
  assert.deepEqual(order, ["a starts", "a ends", "b"]);
  // A list alone is not paced.
  assert.equal(await settled(turns.page(() => Promise.resolve(order.push("c")))), true);
});

Deno.test("a list is paced while calls come and go: a request on its way in meets one page, not the whole list", async () => {
  const clock = new FakeClock();
  const turns = new ListTurns(10, clock, 1);
  // Another tenant's call ended a moment ago: its next one may be on its way in.
  turns.call()();
  await clock.advance(50);
  const page = turns.page(() => Promise.resolve("p"));
  assert.equal(await settled(page), false, "the page is followed by a pause");
  await clock.advance(1);
  assert.equal(await page, "p");
  // Nobody called for a while: the list reads at full speed.
  await clock.advance(100);
  assert.equal(await settled(turns.page(() => Promise.resolve("q"))), true);
});
