/**
 * Manager replicas on one etcd: three processes serve the same API at once and allocation stays
 * exact (20,000 addresses from 16 clients, no address twice, every success recorded, every failure
 * an API error). The longest file of the suite: see etcd_replica_kill_test.ts for a replica
 * killed.
 */
import assert from "node:assert/strict";
import { api, type Replica, startEtcd, startReplica } from "./support/etcd.ts";
import { allocate, assertExact, check, setup } from "./support/replica_allocation.ts";

Deno.test("three replicas, 16 clients, 20,000 addresses: exact", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-replicas-" });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      replicas.push(await startReplica({ endpoints: etcd.endpoints, prefix: "r3/", dir }));
    }
    const urls = replicas.map((r) => r.url);
    await setup(urls[0], "10.8.0.0/16");
    const tally = await allocate(() => urls, "blue", 20_000, 16);
    assert.deepEqual(tally.failures, [], "a /16 holds 20,000 ports: nothing fails");
    assert.equal(tally.ok.size, 20_000);
    const listed = await api(urls[2], "GET", "tenants/acme/networks/blue/ports");
    assertExact(tally, listed.body.items);
    const net = await api(urls[1], "GET", "tenants/acme/networks/blue");
    assert.equal(net.body.usage?.used ?? net.body.used, 20_000);
    assert.match(await check(etcd.endpoints, "r3/"), /consistent \(1 networks, 20000 ports\)/);
  } finally {
    for (const r of replicas) await r.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
