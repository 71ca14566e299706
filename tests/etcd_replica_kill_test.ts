/**
 * A manager replica SIGKILLed mid-allocation on one etcd leaves no orphaned bit, and a feed
 * follower carries on from its cursor on another replica. (Apart from etcd_replicas_test.ts, the
 * longest file, so that the two run at once.)
 */
import assert from "node:assert/strict";
import { ADMIN_TOKEN, api, type Replica, startEtcd, startReplica } from "./support/etcd.ts";
import { allocate, assertExact, check, setup } from "./support/replica_allocation.ts";

Deno.test("a replica SIGKILLed mid-allocation: no orphaned bit; the feed goes on elsewhere", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-replicas-" });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      replicas.push(await startReplica({ endpoints: etcd.endpoints, prefix: "kill/", dir }));
    }
    await setup(replicas[0].url, "10.9.0.0/20");
    // A follower takes its cursor from the replica that will die.
    const start = await fetch(`${replicas[0].url}/api/v1/feed`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    }).then((r) => r.json());
    let alive = replicas.map((r) => r.url);
    let killed: Promise<void> | undefined;
    const tally = await allocate(() => alive, "blue", 3000, 8, (done) => {
      if (done >= 1000 && !killed) {
        alive = [replicas[1].url];
        killed = replicas[0].kill("SIGKILL");
      }
    });
    await killed;
    assert.deepEqual(tally.failures, []);
    assert.equal(tally.ok.size, 3000);
    const listed = await api(replicas[1].url, "GET", "tenants/acme/networks/blue/ports");
    assertExact(tally, listed.body.items);
    assert.equal(listed.body.items.length, 3000, "no port beyond those answered");
    assert.match(await check(etcd.endpoints, "kill/"), /consistent/);

    // The follower continues on the surviving replica from its old cursor: every port arrives.
    const seen = new Set<string>();
    let cursor = start.cursor;
    while (seen.size < 3000) {
      const page = await fetch(`${replicas[1].url}/api/v1/feed?after=${cursor}&timeout=0`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      }).then((r) => r.json());
      assert.ok(page.events, JSON.stringify(page));
      if (page.events.length === 0) break;
      for (const e of page.events) if (e.type === "port" && e.op === "put") seen.add(e.port.id);
      cursor = page.cursor;
    }
    assert.equal(seen.size, 3000);
  } finally {
    for (const r of replicas) await r.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
