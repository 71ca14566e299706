/**
 * A node's conflict report at the schema's limit (issue 33, what the first pass left): the most
 * entries a report may hold, each as long as the schema lets it be, are kept and read back whole,
 * on a Deno KV file and on a real etcd. Once all of a node's entries were one stored value: 200
 * entries with long IDs were refused with "Value too large", and 1,000 would not fit one commit.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { openKvStore, type Store } from "./mod.ts";
import { MAX_CONFLICTS } from "./schemas.ts";
import { startEtcd } from "./store/etcd_test_support.ts";
import { openEtcdStore } from "./store/etcd_store.ts";
import { keys } from "./model.ts";
import { repairStore } from "./repair.ts";
import { nodeConflicts, reportConflicts } from "./service/conflicts.ts";
import type { Key, ListOptions } from "./store/store.ts";
import { failCommitsFrom, must, mustFail, type TestApp, testApp, TOKEN } from "./test_support.ts";

/** The longest names the schemas take: a tenant (DNS label), a port ID, a cluster suffix. */
const TENANT = "t".repeat(62) + "1";
const LONG_ID = (i: number) => `p${i}-`.padEnd(199, "x") + "y";
const PEER = { tenant: "w".repeat(63), id: "q".repeat(200) + "@" + "c".repeat(63) };
const NET = `tenants/${TENANT}/networks/blue`;
/** Addresses with no zero group: the longest IPv6 text a port holds. */
const CIDR = "fd12:3456:789a:bcde:f012:3456:789a:0/112";

interface Held {
  networkId: string;
  id: string;
  ip: string;
  mac: string;
}

/** `n` ports with the longest IDs on worker2, which worker1 sees as remote. */
async function remotePorts(t: TestApp, n: number): Promise<Held[]> {
  must(await t.call("POST", "tenants", { name: TENANT }), 201);
  must(await t.call("POST", `tenants/${TENANT}/networks`, { name: "blue", cidr: CIDR }), 201);
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.168.1.1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.168.1.2" }, TOKEN.worker2), 201);
  const out: Held[] = [];
  for (let i = 0; i < n; i += 100) {
    const ids = Array.from({ length: Math.min(100, n - i) }, (_, j) => LONG_ID(i + j));
    const replies = await Promise.all(
      ids.map((id) => t.call("PUT", `${NET}/ports/${id}`, { node: "worker2" })),
    );
    for (const r of replies) out.push(must(r, 201));
  }
  return out;
}

/** Two entries per port (its address and its MAC), each naming the longest other claimant. */
function entries(ports: Held[], reason: "local" | "remote") {
  return ports.flatMap((p) =>
    (["ip", "mac"] as const).map((field) => ({
      networkId: p.networkId,
      tenant: TENANT,
      id: p.id,
      field,
      value: field === "ip" ? p.ip : p.mac,
      reason,
      with: PEER,
    }))
  );
}

function withoutSince(items: { since: string }[]) {
  return items.map(({ since: _, ...rest }) => rest);
}

async function fullReport(store: Store): Promise<void> {
  using t = await testApp({ store });
  const ports = await remotePorts(t, MAX_CONFLICTS / 2);
  const report = entries(ports, "local");
  assert.equal(report.length, MAX_CONFLICTS);
  const put = must(
    await t.call("PUT", "nodes/worker1/conflicts", { items: report }, TOKEN.worker1),
    200,
  );
  assert.equal(put.ignored, 0);
  const got = must(await t.call("GET", "nodes/worker1/conflicts", undefined, TOKEN.worker1), 200);
  assert.deepEqual(withoutSince(got.items), report);
  // Every port shows both of its entries.
  const listed = must(await t.call("GET", `${NET}/ports`), 200).items;
  assert.equal(listed.length, ports.length);
  for (const p of listed) {
    assert.deepEqual(p.conflicts.map((c: { field: string }) => c.field).sort(), ["ip", "mac"]);
  }
  assert.deepEqual((await checkStore(t.store)).problems, []);

  // The next full report replaces it whole: the entries that stay keep their `since`.
  const since = new Map(got.items.map((i: { id: string; field: string; since: string }) => [
    `${i.id} ${i.field}`,
    i.since,
  ]));
  const next = [...entries(ports.slice(1), "local"), ...entries(ports.slice(0, 1), "remote")];
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: next }, TOKEN.worker1), 200);
  const again = must(await t.call("GET", "nodes/worker1/conflicts", undefined, TOKEN.admin), 200);
  assert.deepEqual(withoutSince(again.items), next);
  for (const i of again.items.filter((i: { reason: string }) => i.reason === "local")) {
    assert.equal(i.since, since.get(`${i.id} ${i.field}`));
  }
  assert.deepEqual((await checkStore(t.store)).problems, []);

  // Cleared, or forgotten with the node: nothing of the report stays in the store.
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: [] }, TOKEN.worker1), 200);
  assert.deepEqual(must(await t.call("GET", "nodes/worker1/conflicts"), 200).items, []);
  assert.deepEqual(await reportKeys(t.store), []);
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: report }, TOKEN.worker1), 200);
  must(await t.call("DELETE", "nodes/worker1"), 204);
  assert.deepEqual(await reportKeys(t.store), []);
  assert.equal(must(await t.call("GET", `${NET}/ports`), 200).items[0].conflicts, undefined);
  assert.deepEqual((await checkStore(t.store)).problems, []);
}

/** The keys of every node's conflict report. */
async function reportKeys(store: Store): Promise<Key[]> {
  const found: Key[] = [];
  for (const prefix of [keys.allConflicts(), keys.conflictEntries(), keys.conflictDrafts()]) {
    for await (const e of store.list(prefix)) found.push(e.key);
  }
  return found;
}

Deno.test("conflicts at scale: a report of the schema's most entries, each as long as allowed, is kept and read back whole (Deno KV file)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-conflicts-" });
  try {
    await fullReport(await openKvStore(`${dir}/manager.kv`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("conflicts at scale: a report of the schema's most entries, each as long as allowed, is kept and read back whole (etcd)", async () => {
  await using etcd = await startEtcd();
  await fullReport(await openEtcdStore({ endpoints: etcd.endpoints, prefix: "conflicts/" }));
});

/** worker1 reports `items` while the store fails from the `n`-th commit on: a 503. */
async function reportFailing(t: TestApp, items: unknown[], n: number): Promise<void> {
  const restore = failCommitsFrom(t, n);
  try {
    mustFail(
      await t.call("PUT", "nodes/worker1/conflicts", { items }, TOKEN.worker1),
      503,
      "store_unavailable",
    );
  } finally {
    restore();
  }
}

Deno.test("conflicts at scale: an interrupted report leaves the last one whole; check reports what it left, check --repair deletes it", async () => {
  using t = await testApp();
  const ports = await remotePorts(t, MAX_CONFLICTS / 2);
  const first = entries(ports, "local");
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: first }, TOKEN.worker1), 200);
  const read = async () =>
    withoutSince(must(await t.call("GET", "nodes/worker1/conflicts"), 200).items);

  // Its entries written (four commits), the one that would name them fails.
  const second = entries(ports, "remote");
  await reportFailing(t, second, 5);
  assert.deepEqual(await read(), first);
  const stray = (await checkStore(t.store)).problems;
  assert.equal(stray.length, 1);
  assert.match(
    stray[0],
    /1000 entry\(ies\) of generation .*\(being written, or its write was interrupted\)/,
  );
  assert.equal((await repairStore(t.store)).length, 1);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  assert.deepEqual(await read(), first);

  // Named, and the first report's entries not yet deleted: the new one is read, whole.
  await reportFailing(t, second, 6);
  assert.deepEqual(await read(), second);
  assert.match((await checkStore(t.store)).problems.join("\n"), /its drop was interrupted/);
  await repairStore(t.store);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  assert.deepEqual(await read(), second);
  // The agent sends its report again: the same report, whole.
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: second }, TOKEN.worker1), 200);
  assert.deepEqual(await read(), second);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("conflicts at scale: reports racing on two replicas, read meanwhile: whole reports read, one whole report kept, nothing left over", async () => {
  using t = await testApp();
  const ports = await remotePorts(t, 200);
  // Three reports of 400 entries each (two commits of entries), told apart by their reason/port.
  const reports = [
    entries(ports, "local"),
    entries(ports, "remote"),
    [...entries(ports.slice(100), "local"), ...entries(ports.slice(0, 100), "remote")],
  ];
  const replica = { ...t.ctx };
  await reportConflicts(t.ctx, { node: "worker1", report: { items: reports[0] } as never });
  const writes = reports.flatMap((items, i) => [
    reportConflicts(i % 2 ? replica : t.ctx, { node: "worker1", report: { items } as never }),
    reportConflicts(i % 2 ? t.ctx : replica, { node: "worker1", report: { items } as never }),
  ]);
  const known = new Set(reports.map((r) => JSON.stringify(r)));
  let reads = 0;
  let writing = true;
  const reading = (async () => {
    while (writing) {
      const got = withoutSince((await nodeConflicts(t.ctx, "worker1")).items);
      assert.ok(known.has(JSON.stringify(got)), `a read saw ${got.length} entries: half a report`);
      reads++;
    }
  })();
  await Promise.all(writes);
  writing = false;
  await reading;
  assert.ok(reads > 0);
  const last = withoutSince((await nodeConflicts(t.ctx, "worker1")).items);
  assert.ok(known.has(JSON.stringify(last)));
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("conflicts at scale: a read that a new report overtakes between the record and its entries reads again, and gets the new one whole", async () => {
  using t = await testApp();
  const ports = await remotePorts(t, 300);
  const [first, second] = [entries(ports, "local"), entries(ports, "remote")];
  await reportConflicts(t.ctx, { node: "worker1", report: { items: first } as never });
  // The reader's first listing of entries waits until the second report is in (and the first
  // report's entries are gone).
  let overtake: (() => Promise<unknown>) | null = () =>
    reportConflicts(t.ctx, { node: "worker1", report: { items: second } as never });
  const store = t.ctx.store;
  const reader = {
    ...t.ctx,
    store: {
      ...store,
      get: store.get.bind(store),
      getMany: store.getMany.bind(store),
      commit: store.commit.bind(store),
      close: store.close.bind(store),
      list: <T>(prefix: Key, options?: ListOptions) =>
        (async function* () {
          const before = prefix[0] === "conflict_entry" ? overtake : null;
          overtake = null;
          if (before) await before();
          yield* store.list<T>(prefix, options);
        })(),
    },
  };
  assert.deepEqual(withoutSince((await nodeConflicts(reader, "worker1")).items), second);
  assert.equal(overtake, null, "the read was overtaken");
});
