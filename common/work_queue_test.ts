import assert from "node:assert/strict";
import { createLogger } from "./log.ts";
import { WorkQueue } from "./work_queue.ts";

Deno.test("work queue: a key queued while waiting runs once, while running runs again after", async () => {
  const runs: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const q = new WorkQueue(
    "t",
    async (key) => {
      runs.push(key);
      if (runs.length === 1) await gate;
    },
    1,
    createLogger("test", "error"),
  );
  q.add("a");
  q.add("b");
  q.add("b");
  q.add("a"); // "a" is running: once more after
  release();
  await q.idle();
  assert.deepEqual(runs, ["a", "b", "a"]);
});

Deno.test("work queue: a failed key comes back until it succeeds", async () => {
  let attempts = 0;
  let done!: () => void;
  const succeeded = new Promise<void>((r) => (done = r));
  const q = new WorkQueue(
    "t",
    () => {
      if (++attempts < 3) return Promise.reject(new Error("not yet"));
      done();
      return Promise.resolve();
    },
    2,
    createLogger("test", "error"),
  );
  q.add("k");
  await succeeded;
  assert.equal(attempts, 3);
  q.stop();
});
