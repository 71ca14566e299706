/**
 * A manager on a three-member etcd cluster: with one member killed during allocation it goes on
 * (nothing lost, no duplicates); with the quorum lost it answers 503 with a clear message, /readyz
 * says why, and nothing is half-written; when the members return, so does service.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { api, type Replica, startEtcd, startReplica } from "./support/etcd.ts";

const ROOT = new URL("../", import.meta.url).pathname;

Deno.test("etcd cluster: a member dies, then the quorum; service returns with it", async () => {
  await using etcd = await startEtcd({ members: 3 });
  const dir = await Deno.makeTempDir({ prefix: "knitter-cluster-" });
  let manager: Replica | undefined;
  try {
    manager = await startReplica({ endpoints: etcd.endpoints, prefix: "c/", dir, timeoutMs: 4000 });
    const url = manager.url;
    assert.equal((await api(url, "POST", "tenants", { name: "acme" })).status, 201);
    assert.equal(
      (await api(url, "POST", "tenants/acme/networks", { name: "blue", cidr: "10.7.0.0/20" }))
        .status,
      201,
    );
    const ok = new Map<string, string>();
    const unavailable: string[] = [];
    let n = 0;
    const put = async () => {
      const id = `p${n++}`;
      const r = await api(url, "PUT", `tenants/acme/networks/blue/ports/${id}`, {});
      // 200: a commit that went in as its member died, retried elsewhere, finds the port made.
      if (r.status === 201 || r.status === 200) ok.set(id, r.body.ip);
      else {
        assert.equal(r.status, 503, JSON.stringify(r.body));
        assert.equal(r.body.error.code, "store_unavailable");
        unavailable.push(r.body.error.message);
      }
    };
    const burst = (count: number) =>
      Promise.all(Array.from({ length: 4 }, async () => {
        for (let i = 0; i < count; i++) await put();
      }));

    // One member killed while four clients allocate: the other two carry on.
    const during = burst(150);
    while (ok.size < 100) await put();
    await etcd.kill(0);
    await during;
    const beforeQuorumLoss = ok.size;
    await burst(50);
    assert.ok(ok.size >= beforeQuorumLoss + 200, "allocation goes on with two of three members");
    assert.deepEqual(unavailable, [], "one member down costs nothing");

    // A second member killed: no quorum. Clear 503s, and readiness says so.
    await etcd.kill(1);
    const lost = await api(url, "PUT", "tenants/acme/networks/blue/ports/during-outage", {});
    assert.equal(lost.status, 503);
    assert.equal(lost.body.error.code, "store_unavailable");
    assert.match(lost.body.error.message, /etcd/);
    const ready = await fetch(`${url}/readyz`);
    assert.equal(ready.status, 503);
    assert.match((await ready.json()).reason, /etcd/);

    // The members return: service resumes, the outage's request was all or nothing.
    await etcd.restart(0);
    await etcd.restart(1);
    const deadline = Date.now() + 30_000;
    while ((await fetch(`${url}/readyz`)).status !== 200) {
      assert.ok(Date.now() < deadline, "ready again once etcd has its quorum back");
      await new Promise((r) => setTimeout(r, 100));
    }
    await burst(25);
    const ports = (await api(url, "GET", "tenants/acme/networks/blue/ports")).body.items as {
      id: string;
      ip: string;
    }[];
    const stored = new Map(ports.map((p) => [p.id, p.ip]));
    for (const [id, ip] of ok) assert.equal(stored.get(id), ip, `port ${id} kept`);
    assert.equal(new Set(ports.map((p) => p.ip)).size, ports.length, "no address twice");
    const r = await run([Deno.execPath(), "run", "-A", `${ROOT}manager/main.ts`, "check"], {
      env: {
        KNITTER_MANAGER_ETCD_ENDPOINTS: etcd.endpoints.join(","),
        KNITTER_MANAGER_ETCD_PREFIX: "c/",
      },
      check: false,
    });
    assert.equal(r.code, 0, `nothing half-written:\n${r.stderr}`);
  } finally {
    await manager?.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
