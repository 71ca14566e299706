/**
 * Commits that do not grow with the data (issue 33): each request below once put one check or
 * write per item into a single commit, and failed with "more than one store commit can hold" once
 * there were about 100 (checks) or 1,000 (writes) of them. Now they take bounded commits. (The
 * quarantine's end and a network delete with many quarantined addresses: quarantine_expiry_test.ts.)
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { must, net, testApp } from "./test_support.ts";

Deno.test("bounded commits: a cluster with 130 registered nodes can be deleted, and takes them all along", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "clusters", { name: "west", tenants: ["acme"] }), 201);
  const names = Array.from({ length: 130 }, (_, i) => `r${i}@west`);
  for (const [i, name] of names.entries()) {
    const ip = `192.0.${2 + (i >> 8)}.${i & 255}`;
    must(await t.call("PUT", `nodes/${name}`, { underlayIp: ip }), 201);
  }
  const { cursor } = must(await t.call("GET", "feed"), 200);
  must(await t.call("DELETE", "clusters/west"), 204);
  const left = must(await t.call("GET", "nodes"), 200).items
    .filter((n: { cluster?: string }) => n.cluster === "west");
  assert.deepEqual(left, []);
  const { events } = must(await t.call("GET", `feed?after=${cursor}&timeout=0`), 200);
  const gone = events.filter((e: { type: string; op: string }) =>
    e.type === "node" && e.op === "delete"
  );
  assert.equal(gone.length, 130, "every node's delete is on the feed");
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("bounded commits: many tenants' ports of several clusters allocated at once on a public network all go in", async () => {
  const tenants = Array.from({ length: 60 }, (_, i) => `t${i}`);
  using t = await testApp({ tenants });
  const clusters = ["c0", "c1", "c2", "c3", "c4", "c5"];
  for (const name of clusters) must(await t.call("POST", "clusters", { name, tenants }), 201);
  must(
    await t.call("POST", "tenants/admin/networks", net("shared", "10.8.0.0/22", { public: true })),
    201,
  );
  // Each port of another tenant (a quota record each to check) and of one of six clusters (a
  // cluster record each): two rounds, so that a batch is full.
  const puts = [...tenants, ...tenants].map((tenant, i) =>
    t.call("PUT", `tenants/${tenant}/networks/shared/ports/p${i}@${clusters[i % 6]}`, {})
  );
  for (const r of await Promise.all(puts)) must(r, 201);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
