/**
 * The end of many quarantines at once (issue 33, finding 1): however many released addresses come
 * out of quarantine together, the next allocations on their network succeed, each in a commit of a
 * bounded size, and none hands out an address whose quarantine still holds. On a real Deno KV file
 * and on a real etcd, with the manager's clock moved by the test.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { repairStore } from "./repair.ts";
import { openKvStore, type Store } from "./mod.ts";
import { startEtcd } from "./store/etcd_test_support.ts";
import { openEtcdStore } from "./store/etcd_store.ts";
import { must, mustFail, net, type TestApp, testApp, watchedStore } from "./test_support.ts";
import { formatIp } from "@knitter/common/address";
import { keys, type NetworkRecord, type PortRecord } from "./model.ts";
import { quarantine, type QuarantineRecord, SWEEP_PER_COMMIT } from "./service/quarantine.ts";
import { macFor } from "./ipam/derived_mac.ts";
import { Tx } from "./store/tx.ts";
import { CHUNK_BITS } from "./ipam/bitmap_pool.ts";

const NET = "tenants/acme/networks/blue";
const QUARANTINE_S = 60;

const T0 = Date.parse("2026-11-01T00:00:00Z");

/**
 * A test app on `store` whose clock moves only when the test says; `reopen` starts it at `at` on
 * a store that has the tenant already.
 */
async function appOn(store: Store, reopen?: { at: number }) {
  let now = reopen?.at ?? T0;
  const t = await testApp({
    store,
    tenants: reopen ? [] : ["acme"],
    quarantineSeconds: QUARANTINE_S,
    clock: () => now,
  });
  return { t, advance: (ms: number) => now += ms };
}

/** PUTs ports `${prefix}0..n-1` at once (they share commits, as a scale-up's would). */
async function allocate(t: TestApp, prefix: string, n: number): Promise<string[]> {
  const ips: string[] = [];
  for (let i = 0; i < n; i += 200) {
    const part = Array.from({ length: Math.min(200, n - i) }, (_, j) => `${prefix}${i + j}`);
    const replies = await Promise.all(part.map((id) => t.call("PUT", `${NET}/ports/${id}`, {})));
    for (const r of replies) ips.push(must(r, 201).ip);
  }
  return ips;
}

/** DELETEs ports `${prefix}from..n-1` through the API, as a scale-down would. */
async function release(t: TestApp, prefix: string, n: number, from = 0): Promise<void> {
  for (let i = from; i < n; i += 200) {
    const part = Array.from({ length: Math.min(200, n - i) }, (_, j) => `${prefix}${i + j}`);
    const replies = await Promise.all(part.map((id) => t.call("DELETE", `${NET}/ports/${id}`)));
    for (const r of replies) must(r, 204);
  }
}

/**
 * Releases `n` addresses, lets their quarantine pass, then allocates: automatically, one at a
 * time and in a batch, and a fixed address among the released ones. During the quarantine, none of
 * them comes back; after it, no commit ends more than SWEEP_PER_COMMIT of them.
 */
async function massRelease(
  store: Store,
  n: number,
  opts: { cidr: string; direct?: boolean },
): Promise<void> {
  const recorder = recording(store);
  const { t, advance } = await appOn(recorder);
  try {
    must(await t.call("POST", "tenants/acme/networks", net("blue", opts.cidr)), 201);
    let released: Set<string>;
    if (opts.direct) {
      released = await releaseDirectly(t, n);
    } else {
      released = new Set(await allocate(t, "p", n));
      await release(t, "p", n);
    }
    // Still in quarantine: the next address is a fresh one.
    const early = must(await t.call("PUT", `${NET}/ports/early`, {}), 201);
    assert.ok(!released.has(early.ip), `${early.ip} came back during its quarantine`);

    const total = must(await t.call("GET", NET), 200).usage.total;
    assert.deepEqual(must(await t.call("GET", NET), 200).usage, {
      total,
      used: 1,
      free: total - 1 - n,
    });
    advance(QUARANTINE_S * 1000 + 1);
    // Ended, they count as free before an allocation has ended their records.
    assert.deepEqual(must(await t.call("GET", NET), 200).usage, {
      total,
      used: 1,
      free: total - 1,
    });
    recorder.ended.length = 0;
    must(await t.call("PUT", `${NET}/ports/one`, {}), 201);
    await allocate(t, "after", 60);
    const fixed = [...released].at(-1)!;
    assert.equal(must(await t.call("PUT", `${NET}/ports/fixed`, { ip: fixed }), 201).ip, fixed);
    assert.ok(Math.max(...recorder.ended) <= SWEEP_PER_COMMIT, `ended ${recorder.ended}`);
    assert.ok(recorder.ended.some((k) => k > 0), "the quarantines ended");
    assert.deepEqual((await checkStore(t.store)).problems, []);
  } finally {
    t.close();
  }
}

/**
 * The state `n` releases leave, written in commits of 400 with the release's own quarantine
 * writer. Through the API, one commit per DELETE, the scenario with 1,000 took 0.9 s on a Deno KV
 * file and 2.6 s on etcd on the 2-core test machine; 10,000 would not keep this test within a few
 * seconds per store.
 */
async function releaseDirectly(t: TestApp, n: number): Promise<Set<string>> {
  const net = (await t.store.get<NetworkRecord>(keys.network("acme", "blue"))).value!;
  const pool = t.ctx.pools.addresses(net);
  const ips = new Set<string>();
  for (let i = 0; i < n; i += 400) {
    await pool.exclusive(async () => {
      const tx = new Tx();
      const edit = await pool.edit(tx);
      for (let j = i; j < Math.min(n, i + 400); j++) {
        const index = (await edit.allocate(t.ctx.pools.allowed(net)))!;
        const ip = formatIp({ family: net.family, value: t.ctx.pools.space(net).valueAt(index) });
        const port = { id: `p${j}`, ip, mac: macFor(net.id, index), index } as PortRecord;
        await quarantine(t.ctx, tx, { net, port, fixedMac: false });
        ips.add(ip);
      }
      edit.flush();
      assert.ok(await tx.commit(t.store));
    });
  }
  return ips;
}

/** A store that records how many quarantine records each commit deletes (in `ended`). */
function recording(store: Store): Store & { ended: number[] } {
  const ended: number[] = [];
  const watched = watchedStore(store, {
    commit: (_, mutations) => {
      ended.push(
        mutations.filter((m) => m.type === "delete" && String(m.key[0]).startsWith("quarantine"))
          .length,
      );
    },
  });
  return Object.assign(watched, { ended });
}

async function onKvFile<T>(fn: (store: Store) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-quarantine-" });
  try {
    return await fn(await openKvStore(`${dir}/manager.kv`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A test app on a Deno KV file of its own (through `wrap`, if given), closed after `fn`. */
async function onKvApp(
  fn: (app: Awaited<ReturnType<typeof appOn>>) => Promise<void>,
  wrap: (store: Store) => Store = (store) => store,
): Promise<void> {
  await onKvFile(async (store) => {
    const app = await appOn(wrap(store));
    try {
      await fn(app);
    } finally {
      app.t.close();
    }
  });
}

Deno.test("quarantine expiry: 110 ports released at once, then the network still allocates (Deno KV file)", async () => {
  await onKvFile((store) => massRelease(store, 110, { cidr: "10.1.0.0/24" }));
});

Deno.test("quarantine expiry: 110 ports released at once, then the network still allocates (etcd)", async () => {
  await using etcd = await startEtcd();
  const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: "q110/" });
  await massRelease(store, 110, { cidr: "10.1.0.0/24" });
});

/**
 * N released at once, for N around one commit's 100 checks and far beyond: a few seconds per
 * store; N = 10,000 is written directly (see releaseDirectly).
 */
const SIZES: { n: number; cidr: string; direct?: boolean }[] = [
  ...[1, 97, 98, 99, 100, 101].map((n) => ({ n, cidr: "10.1.0.0/24" })),
  { n: 1000, cidr: "10.1.0.0/22" },
  { n: 10000, cidr: "10.1.0.0/18", direct: true },
];

Deno.test("quarantine expiry: N released at once, N in {1, 97..101, 1000, 10000}, then allocations succeed (Deno KV file)", async () => {
  for (const { n, cidr, direct } of SIZES) {
    await onKvFile((store) => massRelease(store, n, { cidr, direct }));
  }
});

Deno.test("quarantine expiry: N released at once, N in {1, 97..101, 1000, 10000}, then allocations succeed (etcd)", async () => {
  await using etcd = await startEtcd();
  for (const { n, cidr, direct } of SIZES) {
    const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `n${n}/` });
    await massRelease(store, n, { cidr, direct });
  }
});

/** Rewrites every quarantine record of the network in the shape older managers wrote. */
async function toOldShape(t: TestApp): Promise<number> {
  const net = (await t.store.get<NetworkRecord>(keys.network("acme", "blue"))).value!;
  const records = [];
  for await (const e of t.store.list<QuarantineRecord>(keys.quarantines(net.id))) records.push(e);
  for (let i = 0; i < records.length; i += 200) {
    const tx = new Tx();
    for (const e of records.slice(i, i + 200)) {
      tx.delete(e.key).set(keys.legacyQuarantine(net.id, e.key.at(-1) as number), e.value);
    }
    assert.ok(await tx.commit(t.store));
  }
  return records.length;
}

async function cli(...args: string[]): Promise<{ code: number; out: string }> {
  const main = new URL("./main.ts", import.meta.url).pathname;
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", main, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code: r.code, out: text.decode(r.stdout) + text.decode(r.stderr) };
}

Deno.test("quarantine expiry: check reports old-shape quarantine records and keys of a deleted network; check --repair mends both", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-quarantine-" });
  const path = `${dir}/manager.kv`;
  try {
    {
      const { t, advance } = await appOn(await openKvStore(path));
      must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
      await allocate(t, "p", 150);
      await release(t, "p", 140);
      advance(QUARANTINE_S * 1000 + 1);
      await release(t, "p", 150, 140); // still held after the repair
      assert.equal(await toOldShape(t), 150);
      // A network gone before its delete's follow-up commits ran.
      const tx = new Tx().set(keys.quarantine("gone-network", 1, 7), { ip: "10.9.0.7" })
        .set([...keys.ipam("gone-network"), "chunk", 600], new Uint8Array(512));
      assert.ok(await tx.commit(t.store));
      t.close();
    }
    const checked = await cli("check", "--store", path);
    assert.equal(checked.code, 1, checked.out);
    assert.match(checked.out, /network "acme\/blue": 150 quarantine record\(s\) of the old shape/);
    assert.match(
      checked.out,
      /quarantine records or pool chunks of network gone-network, which does not exist/,
    );

    const misplaced = await cli("export", "--repair", "--out", `${dir}/x.jsonl`, "--store", path);
    assert.equal(misplaced.code, 2, misplaced.out);
    assert.match(misplaced.out, /--repair goes with "check" only/);
    const repaired = await cli("check", "--repair", "--store", path);
    assert.equal(repaired.code, 0, repaired.out);
    assert.match(repaired.out, /moved 150 quarantine record\(s\) of the old shape/);
    assert.match(repaired.out, /deleted the leftovers of network gone-network/);
    assert.match(repaired.out, /consistent/);

    // The moved records still hold what they held: 140 have ended, 10 have not.
    const { t } = await appOn(await openKvStore(path), { at: T0 + QUARANTINE_S * 1000 + 2 });
    try {
      const held = must(await t.call("GET", NET), 200).usage;
      assert.equal(held.used, 0);
      const ips = await allocate(t, "q", 244);
      assert.equal(new Set(ips).size, 244);
      const r = await t.call("PUT", `${NET}/ports/more`, {});
      assert.match(r.body.error.message, /10 of them released and in quarantine/);
    } finally {
      t.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("quarantine expiry: old-shape records left by an older manager end a bounded number per commit too", async () => {
  let recorder!: ReturnType<typeof recording>;
  const record = (store: Store) => recorder = recording(store);
  await onKvApp(async ({ t, advance }) => {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
    await allocate(t, "p", 150);
    await release(t, "p", 150);
    await toOldShape(t);
    advance(QUARANTINE_S * 1000 + 1);
    recorder.ended.length = 0;
    await allocate(t, "q", 200);
    assert.ok(Math.max(...recorder.ended) <= SWEEP_PER_COMMIT, `ended ${recorder.ended}`);
  }, record);
});

Deno.test("quarantine expiry: a network with more quarantined addresses than one commit holds can be deleted, and leaves none", async () => {
  await onKvApp(async ({ t }) => {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/21")), 201);
    await allocate(t, "p", 1100);
    await release(t, "p", 1100);
    must(await t.call("DELETE", NET), 204);
    for (const prefix of [["quarantine"], ["quarantine_until"], ["quarantine_mac"]]) {
      for await (const e of t.store.list(prefix)) assert.fail(`left behind: ${e.key.join("/")}`);
    }
    assert.deepEqual((await checkStore(t.store)).problems, []);
  });
});

Deno.test("quarantine expiry: two replicas on one etcd allocating at once after a mass expiry never hand out one address twice", async () => {
  await using etcd = await startEtcd();
  const open = () => openEtcdStore({ endpoints: etcd.endpoints, prefix: "replicas/" });
  const a = await appOn(await open());
  const b = await appOn(await open(), { at: T0 });
  try {
    must(await a.t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
    await allocate(a.t, "p", 200);
    await release(a.t, "p", 200);
    a.advance(QUARANTINE_S * 1000 + 1);
    b.advance(QUARANTINE_S * 1000 + 1);
    // Each replica ends quarantines in its own commits, from its own cache of the pool.
    const [x, y] = await Promise.all([allocate(a.t, "a", 120), allocate(b.t, "b", 120)]);
    const all = [...x, ...y];
    assert.equal(new Set(all).size, all.length, "an address was handed out twice");
    assert.deepEqual((await checkStore(a.t.store)).problems, []);
  } finally {
    a.t.close();
    b.t.close();
  }
});

Deno.test("quarantine expiry: an IP group takes addresses whose quarantine has ended, by size or by address", async () => {
  await onKvApp(async ({ t, advance }) => {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
    const ips = await allocate(t, "p", 254);
    await release(t, "p", 254);
    const group = { network: "blue" };
    mustFail(
      await t.call("POST", "tenants/acme/ipgroups", {
        ...group,
        name: "g0",
        addresses: [ips[0]],
      }),
      409,
      "address_taken",
      { message: /is in quarantine until .* \(released at / },
    );
    advance(QUARANTINE_S * 1000 + 1);
    const bySize = must(
      await t.call("POST", "tenants/acme/ipgroups", { ...group, name: "g1", size: 200 }),
      201,
    );
    assert.equal(bySize.addresses.length, 200);
    const listed = ips.slice(-3);
    const byAddress = must(
      await t.call("POST", "tenants/acme/ipgroups", { ...group, name: "g2", addresses: listed }),
      201,
    );
    assert.deepEqual(byAddress.addresses.map((a: { ip: string }) => a.ip), listed);
    assert.deepEqual((await checkStore(t.store)).problems, []);
  });
});

Deno.test("quarantine expiry: a network whose pool has more chunks than one commit deletes goes whole, with its quarantine", async () => {
  await onKvApp(async ({ t }) => {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.0.0.0/8")), 201);
    const netRec = (await t.store.get<NetworkRecord>(keys.network("acme", "blue"))).value!;
    await quarantineAcrossChunks(t, netRec, 620);
    must(await t.call("DELETE", NET), 204);
    for (const prefix of [["ipam", netRec.id], ["quarantine_until", netRec.id]]) {
      for await (const e of t.store.list(prefix)) assert.fail(`left behind: ${e.key.join("/")}`);
    }
    assert.deepEqual((await checkStore(t.store)).problems, []);
  });
});

/** One quarantined address in each of `chunks` pool chunks, as releases would leave them. */
async function quarantineAcrossChunks(t: TestApp, net: NetworkRecord, chunks: number) {
  const pool = t.ctx.pools.addresses(net);
  for (let c = 0; c < chunks; c += 300) {
    await pool.exclusive(async () => {
      const tx = new Tx();
      const edit = await pool.edit(tx);
      for (let k = c; k < Math.min(chunks, c + 300); k++) {
        const index = k * CHUNK_BITS + 7;
        assert.ok(await edit.take(index));
        const ip = formatIp({ family: net.family, value: t.ctx.pools.space(net).valueAt(index) });
        await quarantine(t.ctx, tx, {
          net,
          port: { id: `p${k}`, ip, mac: macFor(net.id, index), index } as PortRecord,
          fixedMac: false,
        });
      }
      edit.flush();
      assert.ok(await tx.commit(t.store));
    });
  }
}

/**
 * `n` ports with fixed MACs released at once: during their quarantine the MACs are refused, after
 * it allocations end their MAC records with their addresses' records, a bounded number per commit,
 * until none is left, and a released MAC can be claimed again.
 */
async function fixedMacRelease(store: Store, n: number): Promise<void> {
  const recorder = recording(store);
  const { t, advance } = await appOn(recorder);
  try {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/22")), 201);
    const hex = (b: number) => b.toString(16).padStart(2, "0");
    const mac = (i: number) => `06:00:00:00:${hex(i >> 8)}:${hex(i & 255)}`;
    for (let i = 0; i < n; i += 100) {
      const part = Array.from({ length: Math.min(100, n - i) }, (_, j) => i + j);
      const replies = await Promise.all(
        part.map((k) => t.call("PUT", `${NET}/ports/m${k}`, { mac: mac(k) })),
      );
      for (const r of replies) must(r, 201);
    }
    await release(t, "m", n);
    mustFail(await t.call("PUT", `${NET}/ports/early`, { mac: mac(0) }), 409, "mac_taken");
    advance(QUARANTINE_S * 1000 + 1);
    recorder.ended.length = 0;
    for (let i = 0; i <= Math.ceil(n / SWEEP_PER_COMMIT); i++) {
      must(await t.call("PUT", `${NET}/ports/after${i}`, {}), 201);
    }
    const netId = must(await t.call("GET", NET), 200).id;
    for await (const e of t.store.list(["quarantine_mac", netId])) {
      assert.fail(`a MAC quarantine that has ended is still kept: ${e.key.join("/")}`);
    }
    assert.ok(Math.max(...recorder.ended) <= 2 * SWEEP_PER_COMMIT, `ended ${recorder.ended}`);
    assert.equal(must(await t.call("PUT", `${NET}/ports/again`, { mac: mac(1) }), 201).mac, mac(1));
    assert.deepEqual((await checkStore(t.store)).problems, []);
  } finally {
    t.close();
  }
}

Deno.test("quarantine expiry: 300 released fixed MACs end with their addresses, in bounded commits (Deno KV file)", async () => {
  await onKvFile((store) => fixedMacRelease(store, 300));
});

Deno.test("quarantine expiry: 300 released fixed MACs end with their addresses, in bounded commits (etcd)", async () => {
  await using etcd = await startEtcd();
  await fixedMacRelease(await openEtcdStore({ endpoints: etcd.endpoints, prefix: "macs/" }), 300);
});

Deno.test("quarantine expiry: fixed MAC records of the old shape are honoured, reported by check, moved by check --repair, and then end", async () => {
  await onKvFile(async (store) => {
    // Near the real time: the repair tells ended records by it.
    const { t, advance } = await appOn(store, { at: Date.now() });
    try {
      must(await t.call("POST", "tenants", { name: "acme" }), 201);
      must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
      const macs = ["06:00:00:00:00:01", "06:00:00:00:00:02", "06:00:00:00:00:03"];
      for (const [i, mac] of macs.entries()) {
        must(await t.call("PUT", `${NET}/ports/m${i}`, { mac }), 201);
        must(await t.call("DELETE", `${NET}/ports/m${i}`), 204);
      }
      const netId = must(await t.call("GET", NET), 200).id;
      const tx = new Tx();
      for await (const e of t.store.list(keys.macQuarantines(netId))) {
        tx.delete(e.key).set(keys.macQuarantinesOf(netId, e.key[2] as string), e.value);
      }
      assert.ok(await tx.commit(t.store));
      mustFail(await t.call("PUT", `${NET}/ports/again`, { mac: macs[0] }), 409, "mac_taken");
      assert.match(
        (await checkStore(t.store)).problems.join("\n"),
        /3 fixed MAC quarantine record\(s\) of the old shape/,
      );
      assert.match((await repairStore(t.store)).join("\n"), /moved or ended 3 fixed MAC/);
      assert.deepEqual((await checkStore(t.store)).problems, []);
      mustFail(await t.call("PUT", `${NET}/ports/again`, { mac: macs[0] }), 409, "mac_taken");
      advance(QUARANTINE_S * 1000 + 1);
      must(await t.call("PUT", `${NET}/ports/after`, {}), 201);
      for await (const e of t.store.list(keys.macQuarantines(netId))) {
        assert.fail(`left behind: ${e.key.join("/")}`);
      }
      assert.equal(
        must(await t.call("PUT", `${NET}/ports/m9`, { mac: macs[2] }), 201).mac,
        macs[2],
      );
      assert.deepEqual((await checkStore(t.store)).problems, []);
    } finally {
      t.close();
    }
  });
});

Deno.test("check reads quarantine ends by the manager's clock: a manager ahead of the machine's clock is consistent", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-qclock-" });
  // The manager's clock runs ahead of the machine's, as the fuzz test's clock does once moved.
  let now = Date.now();
  const clock = () => now;
  const t = await testApp({
    store: await openKvStore(`${dir}/kv`),
    tenants: ["acme"],
    quarantineSeconds: QUARANTINE_S,
    clock,
  });
  try {
    must(await t.call("POST", "tenants/acme/networks", net("blue", "10.77.0.0/22")), 201);
    const n = SWEEP_PER_COMMIT * 3;
    await allocate(t, "p", n);
    await release(t, "p", n);
    now += QUARANTINE_S * 1000 + 2000; // past the end of the records' one-second bucket
    // A release rewrites the count, which drops the ended buckets; their records stay until
    // allocations end them.
    must(await t.call("PUT", `${NET}/ports/one`, {}), 201);
    must(await t.call("DELETE", `${NET}/ports/one`), 204);
    assert.deepEqual((await checkStore(t.store, { clock })).problems, []);
  } finally {
    t.close();
    await Deno.remove(dir, { recursive: true });
  }
});
