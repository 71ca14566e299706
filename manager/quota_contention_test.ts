/**
 * A tenant's quota under concurrent allocations on several of its networks (service/quotas.ts):
 * exact (the port past the limit is refused, however they race), and without contention (ports of
 * different networks do not serialise on one quota record: none of their commits fails on another's).
 */
import assert from "node:assert/strict";
import { ApiError } from "./errors.ts";
import { checkStore } from "./check.ts";
import { testApp } from "./test_support.ts";
import { createContext } from "./server.ts";
import type { Store } from "./store/store.ts";
import { createNetwork, deleteNetwork } from "./service/networks.ts";
import { deletePort, putPort } from "./service/ports/mod.ts";
import { getQuota, setQuota } from "./service/quotas.ts";
import { MAX_SOURCES, readShares } from "./service/quota_shares.ts";
import { createIpGroup } from "./service/ip_groups.ts";
import type { Ctx } from "./service/context.ts";

const ADMIN = { scope: "admin" } as const;
const NETWORKS = names(8);

function names(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `n${i}`);
}

async function tenantWithNetworks(ctx: Ctx, networks = NETWORKS): Promise<void> {
  for (const [i, name] of networks.entries()) {
    await createNetwork(ctx, {
      principal: ADMIN,
      tenant: "acme",
      body: { name, type: "vxlan", cidr: `10.${i}.0.0/24`, public: false },
    });
  }
}

function put(ctx: Ctx, network: string, id: string) {
  return putPort(ctx, { principal: ADMIN, tenant: "acme", network, id, body: { node: "n1" } });
}

/** `store`, counting the commits that fail a check. */
function countingLosses(store: Store): { store: Store; lost: () => number } {
  let lost = 0;
  return {
    store: {
      ...store,
      get: (k) => store.get(k),
      getMany: (k) => store.getMany(k),
      list: (p, o) => store.list(p, o),
      close: () => store.close(),
      commit: async (checks, mutations) => {
        const r = await store.commit(checks, mutations);
        if (!r.ok) lost++;
        return r;
      },
    },
    lost: () => lost,
  };
}

Deno.test("quota: 96 ports racing on 8 networks of a tenant, 20 left: exactly 20 go in, the others 403, the count exact", async () => {
  using t = await testApp({ tenants: ["acme"] });
  await tenantWithNetworks(t.ctx);
  for (const n of NETWORKS) await put(t.ctx, n, "first");
  await setQuota(t.ctx, "acme", { ports: 28 });
  const tries = await Promise.allSettled(
    Array.from({ length: 96 }, (_, i) => put(t.ctx, NETWORKS[i % 8], `p${i}`)),
  );
  const made = tries.filter((r) => r.status === "fulfilled").length;
  assert.equal(made, 20);
  for (const r of tries) {
    if (r.status === "fulfilled") continue;
    assert.ok(r.reason instanceof ApiError, String(r.reason));
    assert.equal(r.reason.code, "quota_exceeded", r.reason.message);
    assert.match(r.reason.message, /may hold 28 ports, holds 2[0-8][ ,]/);
  }
  assert.equal((await getQuota(t.ctx, "acme")).used.ports, 28);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  // Released, the room is there again, on any network.
  await deletePort(t.ctx, { principal: ADMIN, tenant: "acme", network: "n3", id: "first" });
  await put(t.ctx, "n5", "again");
  await assert.rejects(put(t.ctx, "n6", "over"), /Quota "ports"/);
  assert.equal((await getQuota(t.ctx, "acme")).used.ports, 28);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("quota: ports racing on 8 networks of a tenant with room do not serialise on its quota: no commit fails", async () => {
  using t = await testApp({ tenants: ["acme"] });
  await tenantWithNetworks(t.ctx);
  await setQuota(t.ctx, "acme", { ports: 1000, addresses: 1000 });
  for (const n of NETWORKS) await put(t.ctx, n, "first");
  const watched = countingLosses(t.ctx.store);
  t.ctx.store = watched.store;
  await Promise.all(Array.from({ length: 64 }, (_, i) => put(t.ctx, NETWORKS[i % 8], `p${i}`)));
  assert.equal(watched.lost(), 0, "commits that lost a race");
  assert.equal((await getQuota(t.ctx, "acme")).used.ports, 72);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("quota: room spread thinly over many networks' shares is gathered for a request that needs more than a few of them hold", async () => {
  using t = await testApp({ tenants: ["acme"] });
  // More networks than a rebalance takes room from (MAX_SOURCES).
  const networks = names(MAX_SOURCES + 4);
  await tenantWithNetworks(t.ctx, networks);
  await setQuota(t.ctx, "acme", { addresses: 1000 });
  for (const n of networks) await put(t.ctx, n, "first");
  // As rebalances and releases may leave it: each network's share 1 address to spare, no other.
  const shares = await readShares(t.store, "acme");
  const spreadOut = shares.map((s) => {
    const used = s.value!.used.addresses;
    return { ...s.value!, allowance: { addresses: used + (s.key.at(-1) === "" ? 0 : 1) } };
  });
  await t.store.commit(
    shares.map((s) => ({ key: s.key, version: s.version })),
    shares.map((s, i) => ({ type: "set" as const, key: s.key, value: spreadOut[i] })),
  );
  const limit = 2 * networks.length;
  await setLimitKeepingShares(t.store, { addresses: limit });
  t.ctx.cache.quotas.clear();
  const group = { principal: ADMIN, tenant: "acme" };
  await createIpGroup(t.ctx, {
    ...group,
    body: { name: "g", network: "n0", size: networks.length },
  });
  await assert.rejects(
    createIpGroup(t.ctx, { ...group, body: { name: "h", network: "n1", size: 1 } }),
    new RegExp(
      `Quota "addresses" of tenant "acme" exceeded: it may hold ${limit} .*, holds ${limit},`,
    ),
  );
  assert.equal((await getQuota(t.ctx, "acme")).used.addresses, limit);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

/** The quota record's limits changed in place, as if set when the shares were as they are. */
async function setLimitKeepingShares(store: Store, limits: Record<string, number>): Promise<void> {
  const e = await store.get<Record<string, unknown>>(["quota", "acme"]);
  await store.commit([{ key: e.key, version: e.version }], [
    { type: "set", key: e.key, value: { ...e.value, limits } },
  ]);
}

Deno.test("quota: two managers on one store racing on a tenant's networks hand out exactly the room left", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const other = createContext(t.ctx.store, { vniRanges: ["5000-5999"], underlayMtu: 1500 });
  await tenantWithNetworks(t.ctx);
  for (const n of NETWORKS) await put(t.ctx, n, "first");
  await setQuota(t.ctx, "acme", { ports: 20 });
  // Both learn the quota and take room for their lanes before the race.
  await put(other, "n0", "warm-a");
  await put(t.ctx, "n1", "warm-b");
  const tries = await Promise.allSettled(
    Array.from({ length: 64 }, (_, i) => put(i % 2 ? other : t.ctx, NETWORKS[i % 8], `p${i}`)),
  );
  assert.equal(tries.filter((r) => r.status === "fulfilled").length, 10);
  assert.equal((await getQuota(t.ctx, "acme")).used.ports, 20);
  assert.deepEqual((await checkStore(t.store)).problems, []);
  other.feed.close();
});

Deno.test("quota: the share of a network deleted goes when room is taken from it", async () => {
  using t = await testApp({ tenants: ["acme"] });
  await tenantWithNetworks(t.ctx, names(3));
  const n0 = (await t.store.get<{ id: string }>(["network", "acme", "n0"])).value!.id;
  await setQuota(t.ctx, "acme", { ports: 100 });
  await put(t.ctx, "n0", "a");
  await put(t.ctx, "n1", "b");
  await deletePort(t.ctx, { principal: ADMIN, tenant: "acme", network: "n0", id: "a" });
  await deleteNetwork(t.ctx, { principal: ADMIN, tenant: "acme", network: "n0" });
  const lanes = async () => (await readShares(t.store, "acme")).map((s) => s.key.at(-1));
  assert.ok((await lanes()).includes(n0), "its share, with room, outlives the network");
  // n2's first port takes room from the richest share: the deleted network's, all of it.
  await put(t.ctx, "n2", "c");
  assert.ok(!(await lanes()).includes(n0), "its share went");
  assert.equal((await getQuota(t.ctx, "acme")).used.ports, 2);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
