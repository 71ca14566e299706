import assert from "node:assert/strict";
import { Slots } from "./slots.ts";

Deno.test("slots: never more than their size at once, every section runs, in the order asked", async () => {
  const slots = new Slots(3);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const gates = Array.from({ length: 10 }, () => Promise.withResolvers<void>());
  const runs = gates.map((gate, i) =>
    slots.run(async () => {
      order.push(i);
      most = Math.max(most, ++running);
      await gate.promise;
      running--;
      return i;
    })
  );
  await Promise.resolve();
  assert.equal(slots.waiting, 7);
  for (const gate of gates) {
    gate.resolve();
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.deepEqual(await Promise.all(runs), [...Array(10).keys()]);
  assert.equal(most, 3);
  assert.deepEqual(order, [...Array(10).keys()]);
  assert.equal(slots.waiting, 0);
  assert.equal(slots.busy, false);
});

Deno.test("slots: a section that throws gives its slot back", async () => {
  const slots = new Slots(1);
  await assert.rejects(slots.run(() => Promise.reject(new Error("boom"))), /boom/);
  assert.equal(await slots.run(() => Promise.resolve("after")), "after");
});

Deno.test("slots: a size that is no count is refused", () => {
  assert.throws(() => new Slots(0), /0 is not a count/);
});
