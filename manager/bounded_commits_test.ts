/**
 * Commits that do not grow with the data (issue 33): each request below once put one check or
 * write per item into a single commit, and failed with "more than one store commit can hold" once
 * there were about 100 (checks) or 1,000 (writes) of them. Now they take bounded commits. (The
 * quarantine's end and a network delete with many quarantined addresses: quarantine_expiry_test.ts.)
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { must, mustFail, net, testApp } from "./test_support.ts";
import { type IpGroupRecord, keys } from "./model.ts";
import type { Key } from "./store/store.ts";
import { Tx } from "./store/tx.ts";

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
  must(
    await t.call("POST", "tenants/admin/networks", net("shared", "10.8.0.0/22", { public: true })),
    201,
  );
  // Another tenant's public network is a cluster's by name only.
  for (const name of clusters) {
    must(await t.call("POST", "clusters", { name, tenants, networks: ["admin/shared"] }), 201);
  }
  // Each port of another tenant (a quota record each to check) and of one of six clusters (a
  // cluster record each): two rounds, so that a batch is full.
  const puts = [...tenants, ...tenants].map((tenant, i) =>
    t.call("PUT", `tenants/${tenant}/networks/shared/ports/p${i}@${clusters[i % 6]}`, {})
  );
  for (const r of await Promise.all(puts)) must(r, 201);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("bounded commits: an IP group of 512 takes a port on each address, whatever long IDs its ports have", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/22")), 201);
  must(
    await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 512 }),
    201,
  );
  // Port IDs of 200 characters (the most a port ID may have): a group record naming them all
  // would be over the 64 KiB a stored value may hold.
  const ids = Array.from({ length: 512 }, (_, i) => `p${i}-`.padEnd(199, "x") + "y");
  for (let i = 0; i < ids.length; i += 64) {
    const part = ids.slice(i, i + 64);
    const replies = await Promise.all(
      part.map((id) => t.call("PUT", `tenants/acme/networks/blue/ports/${id}`, { ipGroup: "g" })),
    );
    for (const r of replies) must(r, 201);
  }
  const g = must(await t.call("GET", "tenants/acme/ipgroups/g"), 200);
  assert.equal(g.used, 512);
  assert.deepEqual(new Set(g.addresses.map((a: { port: string }) => a.port)), new Set(ids));
  assert.deepEqual((await checkStore(t.store)).problems, []);
  // Released, an address goes back to the group, and the group can go once all are back.
  for (let i = 0; i < ids.length; i += 64) {
    const part = ids.slice(i, i + 64);
    const replies = await Promise.all(
      part.map((id) => t.call("DELETE", `tenants/acme/networks/blue/ports/${id}`)),
    );
    for (const r of replies) must(r, 204);
  }
  assert.equal(must(await t.call("GET", "tenants/acme/ipgroups/g"), 200).used, 0);
  must(await t.call("DELETE", "tenants/acme/ipgroups/g"), 204);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("bounded commits: an IP group stored by an older manager (ports named in its record) keeps working, and moves its members to keys", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 4 }), 201);
  const port = (id: string) => `tenants/acme/networks/blue/ports/${id}`;
  for (const id of ["a", "b", "c"]) must(await t.call("PUT", port(id), { ipGroup: "g" }), 201);
  // The record as older managers wrote it: each port named inline, no member keys.
  const e = await t.store.get<IpGroupRecord>(keys.ipGroup("acme", "g"));
  const members: { key: Key; value: string }[] = [];
  for await (const m of t.store.list<string>(keys.ipGroupMembers("acme", "g"))) {
    members.push({ key: m.key, value: m.value! });
  }
  const portOf = new Map(members.map((m) => [m.key.at(-1), m.value]));
  const addresses = e.value!.addresses.map(({ held: _, ...a }) =>
    portOf.has(a.index) ? { ...a, port: portOf.get(a.index) } : a
  );
  const tx = new Tx().set(e.key, { ...e.value!, addresses });
  for (const m of members) tx.delete(m.key);
  assert.ok(await tx.commit(t.store));
  assert.deepEqual((await checkStore(t.store)).problems, []);

  const shown = must(await t.call("GET", "tenants/acme/ipgroups/g"), 200);
  assert.deepEqual(shown.addresses.map((a: { port?: string }) => a.port).sort(), [
    "a",
    "b",
    "c",
    undefined,
  ]);
  must(await t.call("DELETE", port("b")), 204);
  must(await t.call("PUT", port("d"), { ipGroup: "g" }), 201);
  const after = must(await t.call("GET", "tenants/acme/ipgroups/g"), 200);
  assert.equal(after.used, 3);
  let keyed = 0;
  for await (const _ of t.store.list(keys.ipGroupMembers("acme", "g"))) keyed++;
  assert.equal(keyed, 3, "the members moved to their keys");
  const stored = (await t.store.get<IpGroupRecord>(keys.ipGroup("acme", "g"))).value!;
  assert.ok(stored.addresses.every((a) => a.port === undefined), "no port named inline");
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("bounded values: a cluster naming more than one record holds is a clear 400, and one that fits is kept", async () => {
  using t = await testApp();
  // The schema's most: 1,000 tenants and 1,000 networks of the longest names.
  const tenants = Array.from({ length: 1000 }, (_, i) => `t${i}-`.padEnd(63, "x"));
  const networks = tenants.map((n) => `${n}/${"n".repeat(63)}`);
  const physnets = Array.from({ length: 256 }, (_, i) => `p${i}-`.padEnd(63, "x"));
  mustFail(
    await t.call("POST", "clusters", { name: "big", tenants, networks, physnets }),
    400,
    "invalid_request",
    { field: "tenants", message: /tenants, networks and physnets .* at most/ },
  );
  mustFail(await t.call("GET", "clusters/big"), 404, "not_found");
  must(await t.call("POST", "clusters", { name: "big", tenants: tenants.slice(0, 100) }), 201);
  mustFail(
    await t.call("PATCH", "clusters/big", { networks }),
    400,
    "invalid_request",
    { field: "tenants" },
  );
  assert.equal(must(await t.call("GET", "clusters/big"), 200).tenants.length, 100);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
