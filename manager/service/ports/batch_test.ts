/**
 * New ports PUT together on one network share commits (one fsync for many), within a commit's
 * limits: at most MAX_BATCH ports, never more checks than the store takes; each port still gets
 * its own address and its own answer.
 */
import assert from "node:assert/strict";
import { COMMIT_LIMITS, type Store } from "../../store/store.ts";
import { keys } from "../../model.ts";
import { putPort } from "./mod.ts";
import { MAX_BATCH } from "./batch.ts";
import { portsTest } from "./test_support.ts";

const PORTS = 120;

interface SeenCommit {
  checks: number;
  ports: number;
}

/**
 * `store`, holding back the first commit of a port until `n` PUTs have read their cluster
 * (checkPlacement, the last read before a PUT joins its network's batch) and a task has passed:
 * then all `n` wait in the batch queue together.
 */
function gatedStore(store: Store, n: number, seen: SeenCommit[]): Store {
  let reads = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let first = true;
  return {
    get: async (key) => {
      const e = await store.get(key);
      if (key[0] === "cluster" && ++reads === n) setTimeout(release, 0);
      return e as never;
    },
    getMany: (k) => store.getMany(k),
    list: (prefix, options) => store.list(prefix, options),
    commit: async (checks, mutations) => {
      const ports = mutations.filter((m) => m.type === "set" && m.key[0] === "port").length;
      if (ports > 0) {
        seen.push({ checks: checks.length, ports });
        if (first) {
          first = false;
          await gate;
        }
      }
      return await store.commit(checks, mutations);
    },
    close: () => store.close(),
  };
}

Deno.test("batch: ports PUT together share commits of at most MAX_BATCH ports and the store's checks; each gets its own address", async () => {
  await using p = await portsTest("10.1.0.0/16");
  const seen: SeenCommit[] = [];
  p.ctx.store = gatedStore(p.ctx.store, PORTS, seen);
  const results = await Promise.all(
    Array.from({ length: PORTS }, (_, i) => putPort(p.ctx, p.put(`p${i}`, { node: "n1" }))),
  );
  assert.ok(results.every((r) => r.created), "every port answered as made");
  assert.equal(new Set(results.map((r) => r.port.ip)).size, PORTS, "no address twice");
  assert.equal(new Set(results.map((r) => r.port.mac)).size, PORTS, "no MAC twice");
  assert.equal(seen.reduce((n, c) => n + c.ports, 0), PORTS, "each port in one commit");
  // The first commits alone; the others, queued behind it, go in full batches.
  const rest = PORTS - 1;
  const full = Math.floor(rest / MAX_BATCH);
  const expected = [
    1,
    ...Array(full).fill(MAX_BATCH),
    ...(rest % MAX_BATCH ? [rest % MAX_BATCH] : []),
  ];
  assert.deepEqual(seen.map((c) => c.ports), expected);
  for (const c of seen) assert.ok(c.checks <= COMMIT_LIMITS.checks, JSON.stringify(c));
  // Stored as answered.
  const stored = await p.ctx.store.getMany(
    results.map((r) => keys.port(r.port.networkId, r.port.id)),
  );
  assert.ok(stored.every((e) => e.value !== null));
});

Deno.test("batch: a repeated PUT among new ones is answered as it is, and the new ones still go in", async () => {
  await using p = await portsTest();
  const first = await putPort(p.ctx, p.put("p0", { node: "n1" }));
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, i) => putPort(p.ctx, p.put(`p${i}`, { node: "n1" }))),
  );
  assert.equal(results[0].created, false);
  assert.equal(results[0].port.ip, first.port.ip);
  assert.ok(results.slice(1).every((r) => r.created));
  assert.equal(new Set(results.map((r) => r.port.ip)).size, 10);
});
