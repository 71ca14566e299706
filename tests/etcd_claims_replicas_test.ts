/**
 * Claims through two manager replicas on one etcd (issue 26): claims and plain ports made at once
 * through both never share an address, and the pool ends with clean refusals; three ports racing
 * for one claim through both replicas get two (one active); activations racing through both
 * leave exactly one port active; `check` finds the store consistent.
 */
import assert from "node:assert/strict";
import { api, type Replica, startEtcd, startReplica } from "./support/etcd.ts";
import { check, setup } from "./support/replica_allocation.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("two replicas: concurrent claims and ports never share an address; a claim's ports and activations race to one outcome", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-claims-" });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      replicas.push(await startReplica({ endpoints: etcd.endpoints, prefix: "c2/", dir }));
    }
    const url = (i: number) => replicas[i % 2].url;
    await setup(url(0), "10.8.0.0/26");

    // 40 claims and 40 ports through both replicas at once, on 62 addresses.
    const replies = await Promise.all(
      Array.from(
        { length: 80 },
        (_, i) =>
          i % 2
            ? api(url(i >> 1), "POST", `${BLUE}/claims`, { name: `c${i}` })
            : api(url(i >> 1), "PUT", `${BLUE}/ports/p${i}`, {}),
      ),
    );
    const ok = replies.filter((r) => r.status === 201);
    const refused = replies.filter((r) => r.status !== 201);
    assert.equal(ok.length, 62, "a /26 hands out 62");
    for (const r of refused) {
      assert.equal(r.body.error.code, "pool_exhausted", JSON.stringify(r.body));
    }
    assert.equal(new Set(ok.map((r) => r.body.ip)).size, 62, "no address twice");
    assert.equal(new Set(ok.map((r) => r.body.mac)).size, 62, "no MAC twice");

    // Three ports race for one claim through both replicas: two get it, one of them active.
    const claim = ok.find((r) => r.body.ports !== undefined)!.body;
    const path = `${BLUE}/claims/${claim.name}`;
    const bound = await Promise.all(
      ["a", "b", "c"].map((id, i) =>
        api(url(i), "PUT", `${BLUE}/ports/${id}`, { claim: claim.name, node: `n${i}` })
      ),
    );
    const made = bound.filter((r) => r.status === 201).map((r) => r.body);
    assert.equal(made.length, 2, JSON.stringify(bound.map((r) => r.body)));
    for (const r of bound.filter((r) => r.status !== 201)) {
      assert.equal(r.status, 409, JSON.stringify(r.body));
      assert.equal(r.body.error.field, "claim");
    }
    for (const p of made) assert.deepEqual([p.ip, p.mac], [claim.ip, claim.mac]);
    assert.deepEqual(made.map((p) => p.active ?? true).sort(), [false, true]);

    // Both ports activated at once, each through another replica, again and again: one is active.
    for (let round = 0; round < 5; round++) {
      await Promise.all(
        made.map((p, i) => api(url(i + round), "POST", `${BLUE}/ports/${p.id}/activate`)),
      );
      const ports = (await api(url(round), "GET", path)).body.ports;
      assert.equal(
        ports.filter((p: { active: boolean }) => p.active).length,
        1,
        JSON.stringify(ports),
      );
    }
    assert.match(await check(etcd.endpoints, "c2/"), /consistent/);
  } finally {
    for (const r of replicas) await r.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
