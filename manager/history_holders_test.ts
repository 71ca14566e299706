/**
 * Who holds an address now (service/history_holders.ts: an index in memory, caught up from the
 * change feed before each query): right just after every change, made again when the feed cannot
 * serve its cursor, and bounded (an index unused for a while goes, and the least recently used
 * beyond the bound of addresses). On a Deno KV file; the same on etcd, across replicas:
 * tests/etcd_history_holders_test.ts.
 */
import assert from "node:assert/strict";
import { ChangeFeed } from "./feed.ts";
import { heldRightAfterChanges, holdings } from "./history_holders_scenario.ts";
import { HOLDER_LIMITS, indexedSize } from "./service/history_holders.ts";
import { must, net, testApp } from "./test_support.ts";

async function kvApp(options: { clock?: () => number } = {}) {
  const dir = await Deno.makeTempDir({ prefix: "knitter-holders-test-" });
  const t = await testApp({
    path: `${dir}/manager.kv`,
    tenants: ["acme"],
    historyRetentionDays: 30,
    ...options,
  });
  return {
    t,
    [Symbol.dispose]() {
      t.close();
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

Deno.test("holders: a port allocated, released or bound again just before a query is answered right (Deno KV)", async () => {
  using app = await kvApp();
  await heldRightAfterChanges(app.t, app.t);
});

Deno.test("holders: when the feed no longer has the index's cursor, the index is made again from the ports", async () => {
  using app = await kvApp();
  const { t } = app;
  // A feed of two events: three allocations between two queries pass its window.
  t.ctx.feed = new ChangeFeed(2);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const a = must(await t.call("PUT", "tenants/acme/networks/blue/ports/a", {}), 201);
  assert.deepEqual(await holdings(t, { ip: a.ip }), [["a", "live"]]);
  const more = [];
  for (const id of ["b", "c", "d"]) {
    more.push(must(await t.call("PUT", `tenants/acme/networks/blue/ports/${id}`, {}), 201));
  }
  assert.equal(await t.ctx.feed.since(`${t.ctx.feed.epoch}:1`, 0), "expired");
  for (const p of more) assert.deepEqual(await holdings(t, { ip: p.ip }), [[p.id, "live"]]);
});

Deno.test("holders: the indexes' memory is bounded: unused ones go, and the least recently used beyond the bound", async () => {
  let now = Date.parse("2026-11-29T00:00:00Z");
  using app = await kvApp({ clock: () => now });
  const { t } = app;
  const saved = { ...HOLDER_LIMITS };
  try {
    const ips: Record<string, string> = {};
    for (const [i, name] of ["blue", "green", "red"].entries()) {
      must(await t.call("POST", "tenants/acme/networks", net(name, `10.${i + 1}.0.0/24`)), 201);
      for (const id of ["p1", "p2"]) {
        const p = must(await t.call("PUT", `tenants/acme/networks/${name}/ports/${id}`, {}), 201);
        ips[`${name}/${id}`] = p.ip;
      }
    }
    const ask = async (name: string) =>
      assert.deepEqual(await holdings(t, { ip: ips[`${name}/p1`] }), [["p1", "live"]]);
    await ask("blue");
    await ask("green");
    assert.deepEqual(indexedSize(t.ctx), { networks: 2, addresses: 4 });
    // Unused for longer than the idle time: blue and green go when red is asked.
    now += HOLDER_LIMITS.idleMs + 1;
    await ask("red");
    assert.deepEqual(indexedSize(t.ctx), { networks: 1, addresses: 2 });
    // A bound of 4 addresses: asking blue and green after red drops red, the least recently used.
    HOLDER_LIMITS.maxAddresses = 4;
    await ask("blue");
    await ask("green");
    assert.deepEqual(indexedSize(t.ctx), { networks: 2, addresses: 4 });
    await ask("red");
    assert.deepEqual(indexedSize(t.ctx), { networks: 2, addresses: 4 });
    // Dropped indexes are made again when asked, and answer right.
    await ask("blue");
    await ask("red");
  } finally {
    Object.assign(HOLDER_LIMITS, saved);
  }
});
