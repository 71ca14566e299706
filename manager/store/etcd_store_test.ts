/** The etcd store on a real etcd: key order as Deno KV's, exact compare-and-swap, paging, limits. */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { openEtcdStore } from "./etcd_store.ts";
import { deadEndpoint, startEtcd } from "./etcd_test_support.ts";
import { openKvStore } from "./kv_store.ts";
import { type Key, type Store, StoreLimitError, StoreUnavailableError } from "./store.ts";

async function keysOf(store: Store, prefix: Key, options = {}): Promise<Key[]> {
  const out = [];
  for await (const e of store.list(prefix, options)) out.push(e.key);
  return out;
}

Deno.test("etcd store on a real etcd", async (t) => {
  await using etcd = await startEtcd();
  let n = 0;
  const open = () => openEtcdStore({ endpoints: etcd.endpoints, prefix: `t${n++}/` });

  await t.step("lists in Deno KV's key order", async () => {
    const keys: Key[] = [
      ["a", 1],
      ["a", "x"],
      ["a", -2.5],
      ["a", ""],
      ["a", 1.5],
      ["a", "\u0000"],
      ["a", "é"],
      ["a", "b", 1],
      ["a", "b", "c"],
      ["a", 0],
      ["a", -0.1],
      ["a", 4096],
      ["a", 70000],
      ["ab"],
      ["a"],
      ["b", "a"],
    ];
    const kv = await openKvStore(":memory:");
    const etcdStore = await open();
    try {
      for (const store of [kv, etcdStore]) {
        for (const k of keys) {
          assert.ok((await store.commit([], [{ type: "set", key: k, value: 1 }])).ok);
        }
      }
      for (const prefix of [[], ["a"], ["a", "b"]] as Key[]) {
        assert.deepEqual(
          await keysOf(etcdStore, prefix),
          await keysOf(kv, prefix),
          `prefix ${prefix}`,
        );
        assert.deepEqual(
          await keysOf(etcdStore, prefix, { reverse: true, limit: 5 }),
          await keysOf(kv, prefix, { reverse: true, limit: 5 }),
        );
      }
    } finally {
      kv.close();
      etcdStore.close();
    }
  });

  await t.step("compare-and-swap: a stale version or a present key loses", async () => {
    const store = await open();
    try {
      const set = (value: unknown) => ({ type: "set" as const, key: ["k"], value });
      const created = await store.commit([{ key: ["k"], version: null }], [set(1)]);
      assert.ok(created.ok);
      assert.deepEqual(await store.commit([{ key: ["k"], version: null }], [set(2)]), {
        ok: false,
      });
      const e = await store.get<number>(["k"]);
      assert.equal(e.value, 1);
      assert.equal(e.version, created.version);
      assert.ok((await store.commit([{ key: ["k"], version: e.version }], [set(3)])).ok);
      assert.deepEqual(await store.commit([{ key: ["k"], version: e.version }], [set(4)]), {
        ok: false,
      });
      assert.equal((await store.get(["k"])).value, 3);
      // Of many writers racing on one version, exactly one wins.
      const now = await store.get<number>(["k"]);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.commit([now], [set(100 + i)])),
      );
      assert.equal(results.filter((r) => r.ok).length, 1);
    } finally {
      store.close();
    }
  });

  await t.step(
    "values keep their shape; a key written twice in one commit keeps the last",
    async () => {
      const store = await open();
      try {
        const bytes = Uint8Array.from([0, 1, 2, 255]);
        const record = {
          name: "x",
          labels: { "$bytes": "AA==" },
          list: [1, "two"],
          nested: { a: null },
        };
        assert.ok(
          (await store.commit([], [
            { type: "set", key: ["bytes"], value: bytes },
            { type: "set", key: ["rec"], value: record },
            { type: "set", key: ["twice"], value: 1 },
            { type: "set", key: ["twice"], value: 2 },
            { type: "set", key: ["gone"], value: 1 },
            { type: "delete", key: ["gone"] },
          ])).ok,
        );
        const [b, r, twice, gone, absent] = await store.getMany([
          ["bytes"],
          ["rec"],
          ["twice"],
          ["gone"],
          ["absent"],
        ]);
        assert.deepEqual(b.value, bytes);
        assert.deepEqual(r.value, record);
        assert.equal(twice.value, 2);
        assert.equal(gone.value, null);
        assert.deepEqual(absent, { key: ["absent"], value: null, version: null });
      } finally {
        store.close();
      }
    },
  );

  await t.step("lists page through more keys than one answer holds", async () => {
    const store = await open();
    try {
      const mutations = Array.from({ length: 1000 }, (_, i) => ({
        type: "set" as const,
        key: ["many", i],
        value: i,
      }));
      assert.ok((await store.commit([], mutations)).ok);
      const all = await keysOf(store, ["many"]);
      assert.deepEqual(all, mutations.map((m) => m.key));
      const tail = await keysOf(store, ["many"], { reverse: true, limit: 700 });
      assert.deepEqual(tail, mutations.slice(300).reverse().map((m) => m.key));
      // Smaller pages (a list that gives way between them) read the same keys in the same order.
      assert.deepEqual(await keysOf(store, ["many"], { page: 100 }), all);
      assert.deepEqual(
        await keysOf(store, ["many"], { reverse: true, limit: 700, page: 64 }),
        tail,
      );
    } finally {
      store.close();
    }
  });

  await t.step("a commit over the limits is refused whole, with the reason", async () => {
    const store = await open();
    try {
      const mutations = Array.from({ length: 1001 }, (_, i) => ({
        type: "set" as const,
        key: ["big", i],
        value: i,
      }));
      await assert.rejects(store.commit([], mutations), StoreLimitError);
      const checks = Array.from({ length: 101 }, (_, i) => ({ key: ["c", i], version: null }));
      await assert.rejects(store.commit(checks, []), StoreLimitError);
      await assert.rejects(
        store.commit([], [{ type: "set", key: ["huge"], value: "x".repeat(70000) }]),
        /a value of 70002 bytes/,
      );
      assert.deepEqual(await keysOf(store, []), []);
    } finally {
      store.close();
    }
  });

  await t.step("a dead endpoint is skipped; none alive is a clear error", async () => {
    const dead = await deadEndpoint();
    const store = await openEtcdStore({ endpoints: [dead, ...etcd.endpoints], prefix: "fo/" });
    try {
      assert.ok((await store.commit([], [{ type: "set", key: ["x"], value: 1 }])).ok);
      assert.equal((await store.get(["x"])).value, 1);
    } finally {
      store.close();
    }
    await assert.rejects(
      openEtcdStore({ endpoints: [dead], timeoutMs: 2000 }),
      (err: Error) =>
        err instanceof StoreUnavailableError &&
        err.message.includes(`${dead}: connection refused`) &&
        /check that etcd runs/.test(err.message),
    );
  });
});

Deno.test("etcd store with auth: a user signs in; a wrong password is a clear error", async () => {
  await using etcd = await startEtcd();
  const ctl = (...args: string[]) =>
    run(["etcdctl", `--endpoints=${etcd.endpoints[0]}`, ...args], {
      env: { ETCDCTL_API: "3" },
    });
  await ctl("user", "add", "root", "--new-user-password=root-pw-0123");
  await ctl("auth", "enable");
  const store = await openEtcdStore({
    endpoints: etcd.endpoints,
    username: "root",
    password: "root-pw-0123",
  });
  try {
    assert.ok((await store.commit([], [{ type: "set", key: ["x"], value: 1 }])).ok);
    assert.equal((await store.get(["x"])).value, 1);
  } finally {
    store.close();
  }
  await assert.rejects(
    openEtcdStore({ endpoints: etcd.endpoints, username: "root", password: "wrong" }),
    /etcd refused user "root": .*authentication failed.*check store.etcd.username and password/,
  );
});
