/**
 * A network's usage and the pool gauges read a count of its quarantine, not its records (issue 33,
 * what the first pass left): each read once listed every quarantine record of the network. The
 * counts stay right through releases, the end of quarantines, fixed-address claims and the
 * network's delete, on a Deno KV file and on a real etcd; `check` verifies the count and `check
 * --repair` counts a network that has none (an older manager's).
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { openKvStore, type Store } from "./mod.ts";
import { keys } from "./model.ts";
import { repairStore } from "./repair.ts";
import { startEtcd } from "./store/etcd_test_support.ts";
import { openEtcdStore } from "./store/etcd_store.ts";
import { must, mustFail, net, type TestApp, testApp, TOKEN, watchedStore } from "./test_support.ts";

const NET = "tenants/acme/networks/blue";
const Q_MS = 60_000;
const T0 = Date.parse("2026-11-01T00:00:00Z");

/** PUTs or DELETEs ports `p${from}..p${to - 1}` at once. */
async function each(t: TestApp, method: "PUT" | "DELETE", from: number, to: number) {
  const replies = await Promise.all(
    Array.from(
      { length: to - from },
      (_, i) => t.call(method, `${NET}/ports/p${from + i}`, method === "PUT" ? {} : undefined),
    ),
  );
  return replies.map((r) => must(r, method === "PUT" ? 201 : 204));
}

async function countsStayRight(raw: Store): Promise<void> {
  const listed: string[] = [];
  const store = watchedStore(raw, {
    list: (prefix) => {
      if (String(prefix[0]).startsWith("quarantine")) listed.push(prefix.join("/"));
    },
  });
  let now = T0;
  using t = await testApp({
    store,
    tenants: ["acme"],
    quarantineSeconds: Q_MS / 1000,
    clock: () => now,
  });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const total = must(await t.call("GET", NET), 200).usage.total;
  const usage = async () => {
    listed.length = 0;
    const u = must(await t.call("GET", NET), 200).usage;
    const metrics = must(await t.call("GET", "/metrics", undefined, TOKEN.metrics), 200);
    const gauge = (name: string) =>
      Number(
        metrics.match(
          new RegExp(`knitter_manager_pool_${name}_addresses\\{[^}]*"blue"[^}]*\\} (\\d+)`),
        )?.[1],
      );
    assert.deepEqual(listed, [], "the usage read quarantine records");
    assert.equal(gauge("used"), u.used);
    assert.equal(gauge("quarantined"), total - u.used - u.free);
    assert.deepEqual((await checkStore(t.store)).problems, []);
    return { used: u.used, quarantined: total - u.used - u.free };
  };

  const ips = (await each(t, "PUT", 0, 100)).map((p) => p.ip);
  await each(t, "DELETE", 0, 60);
  assert.deepEqual(await usage(), { used: 40, quarantined: 60 });
  now += Q_MS / 2;
  await each(t, "DELETE", 60, 80);
  assert.deepEqual(await usage(), { used: 20, quarantined: 80 });
  // The first 60 have ended, their records are still there: they count as free.
  now += Q_MS / 2 + 1000;
  assert.deepEqual(await usage(), { used: 20, quarantined: 20 });
  // A fixed address whose quarantine ended, then one whose quarantine holds.
  must(await t.call("PUT", `${NET}/ports/fixed`, { ip: ips[0] }), 201);
  assert.deepEqual(await usage(), { used: 21, quarantined: 20 });
  mustFail(await t.call("PUT", `${NET}/ports/early`, { ip: ips[70] }), 409, "address_taken");
  // Allocations end the ended ones, a bounded number each.
  for (let i = 0; i < 3; i++) must(await t.call("PUT", `${NET}/ports/auto${i}`, {}), 201);
  assert.deepEqual(await usage(), { used: 24, quarantined: 20 });
  now += Q_MS;
  assert.deepEqual(await usage(), { used: 24, quarantined: 0 });
  await each(t, "DELETE", 80, 100);
  for (const id of ["fixed", "auto0", "auto1", "auto2"]) {
    must(await t.call("DELETE", `${NET}/ports/${id}`), 204);
  }
  assert.deepEqual(await usage(), { used: 0, quarantined: 24 });
  const id = must(await t.call("GET", NET), 200).id;
  must(await t.call("DELETE", NET), 204);
  assert.equal((await t.store.get(keys.quarantineCount(id))).value, null);
  assert.deepEqual((await checkStore(t.store)).problems, []);
}

Deno.test("quarantine count: a network's usage and gauges stay right without reading its records (Deno KV file)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-qcount-" });
  try {
    await countsStayRight(await openKvStore(`${dir}/manager.kv`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("quarantine count: a network's usage and gauges stay right without reading its records (etcd)", async () => {
  await using etcd = await startEtcd();
  await countsStayRight(await openEtcdStore({ endpoints: etcd.endpoints, prefix: "qcount/" }));
});

Deno.test("quarantine count: check reports a wrong or missing count, check --repair counts the records again", async () => {
  // Near the real time: check and its repair tell held from ended by it.
  let now = Date.now();
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: Q_MS / 1000, clock: () => now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  await each(t, "PUT", 0, 30);
  await each(t, "DELETE", 0, 30);
  const id = must(await t.call("GET", NET), 200).id;
  const key = keys.quarantineCount(id);
  const right = (await t.store.get(key)).value;
  // Wrong: the check names the network and both figures.
  await t.store.commit([], [{ type: "set", key, value: { ...right!, records: 7 } as unknown }]);
  assert.match(
    (await checkStore(t.store)).problems.join("\n"),
    /network "acme\/blue": its quarantine count says 7 record\(s\), it has 30/,
  );
  assert.match((await repairStore(t.store)).join("\n"), /counted 30 quarantine record\(s\)/);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  assert.deepEqual((await t.store.get(key)).value, right);
  // Missing (a network of an older manager): read from the records, counted by the repair.
  await t.store.commit([], [{ type: "delete", key }]);
  const { total } = must(await t.call("GET", NET), 200).usage;
  assert.equal(must(await t.call("GET", NET), 200).usage.free, total - 30);
  assert.match((await checkStore(t.store)).problems.join("\n"), /has no quarantine count/);
  await repairStore(t.store);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  // Ended, and their bucket (a second) over: all free.
  now += Q_MS + 1000;
  assert.equal(must(await t.call("GET", NET), 200).usage.free, total);
});

Deno.test("quarantine count: two replicas on one etcd releasing and allocating at once keep it exact", async () => {
  await using etcd = await startEtcd();
  const open = () => openEtcdStore({ endpoints: etcd.endpoints, prefix: "qcount-replicas/" });
  let now = T0;
  const clock = () => now;
  using a = await testApp({ store: await open(), tenants: ["acme"], quarantineSeconds: 60, clock });
  using b = await testApp({ store: await open(), quarantineSeconds: 60, clock });
  must(await a.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  await each(a, "PUT", 0, 160);
  // Each replica releases half, at once; then, the quarantine over, both allocate.
  await Promise.all([each(a, "DELETE", 0, 80), each(b, "DELETE", 80, 160)]);
  assert.deepEqual((await checkStore(a.store)).problems, []);
  const u = must(await b.call("GET", NET), 200).usage;
  assert.deepEqual([u.used, u.total - u.used - u.free], [0, 160]);
  now += 61_000;
  await Promise.all([each(a, "PUT", 200, 260), each(b, "PUT", 300, 360)]);
  assert.deepEqual((await checkStore(a.store)).problems, []);
  const after = must(await a.call("GET", NET), 200).usage;
  assert.deepEqual([after.used, after.total - after.used - after.free], [120, 0]);
});

Deno.test("quarantine count: a pool exhausted by quarantines says how many and until when without reading them all", async () => {
  const listed: string[] = [];
  const store = watchedStore(await openKvStore(":memory:"), {
    list: (prefix, options) => {
      // An allocation's sweep reads a bounded number (service/quarantine.ts); a listing without
      // a limit reads them all.
      const all = options?.limit === undefined;
      if (String(prefix[0]).startsWith("quarantine") && all) listed.push(prefix.join("/"));
    },
  });
  using t = await testApp({ store, tenants: ["acme"], quarantineSeconds: 60, clock: () => T0 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/27")), 201);
  const { total } = must(await t.call("GET", NET), 200).usage;
  await each(t, "PUT", 0, total);
  await each(t, "DELETE", 0, total);
  listed.length = 0;
  mustFail(await t.call("PUT", `${NET}/ports/more`, {}), 409, "pool_exhausted", {
    message: new RegExp(
      `${total} of them released and in quarantine, the first until 2026-11-01T00:01:00.000Z`,
    ),
  });
  assert.deepEqual(listed, [], "the refusal read every quarantine record");
});
