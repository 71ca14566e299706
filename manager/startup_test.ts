/**
 * What a manager does to its store before it serves (server.ts prepareStore) reads a handful of
 * keys, none per port: a start on a million ports is as quick as on none (issue 32,
 * manager/bench/startup_bench.ts). The upgrade of ports an older manager kept under bare IDs
 * (service/upgrade.ts) scans once; ports an older manager writes after that are `check --repair`'s.
 */
import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { prepareStore } from "./server.ts";
import { repairStore } from "./repair.ts";
import { checkStore } from "./check.ts";
import { must, net, type TestApp, testApp, TOKEN } from "./test_support.ts";
import type { Key, Store } from "./store/store.ts";

const SHARED = "tenants/acme/networks/shared";
const PORTS = 30;
const log = createLogger("manager", "error");

/** acme's network, and the admin's public one that acme may use. */
const NETWORKS = [
  ["acme", net("blue", "10.1.0.0/24")],
  ["admin", net("shared", "10.200.0.0/24", { public: true })],
] as const;

/** acme's ports on its own network and on the admin's public one, each bound to worker1. */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme"] });
  for (const [tenant, body] of NETWORKS) {
    must(await t.call("POST", `tenants/${tenant}/networks`, body), 201);
  }
  for (let i = 0; i < PORTS; i++) {
    for (const network of ["tenants/acme/networks/blue", SHARED]) {
      must(await t.call("PUT", `${network}/ports/p${i}`, {}, TOKEN.worker1), 201);
    }
  }
  return t;
}

/** `store`, counting the entries its listings yield by their key's first part. */
function countingStore(store: Store, read: Map<string, number>): Store {
  return {
    get: (key) => store.get(key),
    getMany: (k) => store.getMany(k),
    async *list(prefix, options) {
      for await (const e of store.list(prefix, options)) {
        const kind = String(e.key[0]);
        read.set(kind, (read.get(kind) ?? 0) + 1);
        yield e;
      }
    },
    commit: (checks, mutations) => store.commit(checks, mutations),
    close: () => store.close(),
  } as Store;
}

/** Entries read under keys that there is one of (or more) per port. */
function perPort(read: Map<string, number>): [string, number][] {
  return [...read].filter(([kind]) => kind.startsWith("port") || kind.startsWith("history"));
}

Deno.test("a restart reads none of the ports, their indexes or history before it serves", async () => {
  using t = await world();
  await prepareStore(t.ctx, log);
  const read = new Map<string, number>();
  t.ctx.store = countingStore(t.store, read);
  await prepareStore(t.ctx, log);
  assert.deepEqual(perPort(read), []);
  // The upgrade's marker is a key `check` knows.
  assert.deepEqual((await checkStore(t.store)).problems, []);
  // And the ports are all there, found by node too.
  const mine = must(await t.call("GET", "ports?node=worker1", undefined, TOKEN.worker1), 200);
  assert.equal(mine.items.length, 2 * PORTS);
});

Deno.test("ports an older manager kept under bare IDs after the upgrade ran: check --repair moves them", async () => {
  using t = await world();
  await prepareStore(t.ctx, log);
  const p = must(await t.call("PUT", `${SHARED}/ports/old`, {}, TOKEN.worker1), 201);
  await asOlderManagerKeptIt(t.store, p.networkId, "old");
  mustMiss(await t.call("GET", `${SHARED}/ports/old`, undefined, TOKEN.acme));
  assert.deepEqual(await repairStore(t.store), [
    `moved 1 port(s) of tenants on public networks to tenant-scoped keys`,
  ]);
  assert.equal(
    must(await t.call("GET", `${SHARED}/ports/old`, undefined, TOKEN.acme), 200).ip,
    p.ip,
  );
  assert.deepEqual(await repairStore(t.store), []);
});

function mustMiss(reply: { status: number }): void {
  assert.equal(reply.status, 404);
}

/** Puts acme's port back where a manager older than tenant-scoped keys kept it: its bare ID. */
async function asOlderManagerKeptIt(store: Store, networkId: string, id: string): Promise<void> {
  const scoped: Key = ["port", networkId, `acme/${id}`];
  const rec = (await store.get(scoped)).value;
  await store.commit([], [
    { type: "delete", key: scoped },
    { type: "set", key: ["port", networkId, id], value: rec },
    { type: "delete", key: ["port_of_tenant_on_foreign_network", "acme", networkId, `acme/${id}`] },
    { type: "set", key: ["port_of_tenant_on_foreign_network", "acme", networkId, id], value: true },
    { type: "delete", key: ["port_by_node", "worker1", networkId, `acme/${id}`] },
    { type: "set", key: ["port_by_node", "worker1", networkId, id], value: true },
  ]);
}
