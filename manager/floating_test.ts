/**
 * Floating addresses (service/floating_ips.ts): taken from a pool, bound to a port by its ID and
 * carried by every port of that ID (so it follows a pod made again elsewhere), one per port,
 * unbound and kept, released through quarantine.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN, watchedStore } from "./test_support.ts";
import { createContext } from "./server.ts";
import { bindFloatingIp } from "./service/floating_ips.ts";

const ACME = "tenants/acme/floating-ips";
const P1 = "tenants/acme/networks/blue/ports/p1";
const on = (node: string) => ({ pod: { namespace: "acme", name: "web" }, node });

Deno.test("a floating address bound to a port ID is carried by the port, again when it is made anew on another node", async () => {
  let clock = Date.parse("2026-11-28T00:00:00Z");
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: 60, clock: () => clock });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/30"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const { cursor } = must(await t.call("GET", "feed"), 200);
  must(await t.call("PUT", P1, on("worker1")), 201);
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p2", on("worker1")), 201);
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  assert.equal(f.address, "203.0.113.1");
  const bound = must(
    await t.call("POST", `${ACME}/${f.address}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    200,
  );
  assert.deepEqual(bound.port, { network: "blue", id: "p1" });
  assert.equal(must(await t.call("GET", P1, undefined, TOKEN.acme), 200).floating, f.address);

  // One per port: a second address for p1 is refused; the same bind again is no change.
  const g = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  mustFail(
    await t.call("POST", `${ACME}/${g.address}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    409,
    "in_use",
    { field: "port" },
  );
  mustFail(
    await t.call("POST", `${ACME}/${f.address}/bind`, { network: "blue", port: "p2" }, TOKEN.acme),
    409,
    "in_use",
  );
  must(
    await t.call("POST", `${ACME}/${f.address}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    200,
  );

  // The pod goes, and comes back on worker2 with the same port ID: the address follows.
  must(await t.call("DELETE", P1), 204);
  const again = must(await t.call("PUT", P1, on("worker2")), 201);
  assert.equal(again.floating, f.address);
  assert.equal(again.node, "worker2");
  const feed = must(await t.call("GET", `feed?after=${cursor}&timeout=0`), 200);
  const last = feed.events.filter((e: { port?: { id: string } }) => e.port?.id === "p1").at(-1);
  assert.equal(last.port.floating, f.address, "the feed tells worker2");

  // Unbound: the port loses it, the tenant keeps it.
  const un = must(await t.call("POST", `${ACME}/${f.address}/unbind`, undefined, TOKEN.acme), 200);
  assert.equal(un.port, undefined);
  assert.equal(must(await t.call("GET", P1), 200).floating, undefined);
  const mine = must(await t.call("GET", ACME, undefined, TOKEN.acme), 200);
  assert.deepEqual(mine.items.map((x: { address: string }) => x.address).sort(), [
    "203.0.113.1",
    "203.0.113.2",
  ]);

  // Released while bound: the port loses it, and the address waits out its quarantine.
  must(
    await t.call("POST", `${ACME}/${g.address}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    200,
  );
  must(await t.call("DELETE", `${ACME}/${g.address}`, undefined, TOKEN.acme), 204);
  assert.equal(must(await t.call("GET", P1), 200).floating, undefined);
  must(await t.call("DELETE", `${ACME}/${f.address}`, undefined, TOKEN.acme), 204);
  mustFail(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 409, "pool_exhausted");
  mustFail(
    await t.call("POST", ACME, { pool: "ext", address: f.address }, TOKEN.acme),
    409,
    "address_taken",
    { message: /quarantine until/ },
  );
  clock += 61_000;
  must(await t.call("POST", ACME, { pool: "ext", address: f.address }, TOKEN.acme), 201);
  mustFail(await t.call("DELETE", "floating-pools/ext"), 409, "in_use");
});

Deno.test("a tenant that holds floating addresses is not deleted (409 naming them); released, it is", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/30"] }), 201);
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  mustFail(await t.call("DELETE", "tenants/acme"), 409, "in_use", {
    message: /floating addresses 203\.0\.113\.1/,
  });
  must(await t.call("DELETE", `${ACME}/${f.address}`, undefined, TOKEN.acme), 204);
  must(await t.call("DELETE", "tenants/acme"), 204);
});

Deno.test("a floating address bound to a claim is carried by each of its ports (the active one has its traffic) and by a migration's new port; unbound, by none", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/30"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/acme/networks/blue/claims", { name: "vm1" }, TOKEN.acme), 201);
  const ports = "tenants/acme/networks/blue/ports";
  must(await t.call("PUT", `${ports}/a`, { claim: "vm1", node: "worker1" }), 201);
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  const bound = must(
    await t.call(
      "POST",
      `${ACME}/${f.address}/bind`,
      { network: "blue", claim: "vm1" },
      TOKEN.acme,
    ),
    200,
  );
  assert.deepEqual(bound.claim, { network: "blue", name: "vm1" });
  assert.equal(must(await t.call("GET", `${ports}/a`), 200).floating, f.address);
  // The migration's target, made after the bind: it carries it too (inactive until activated).
  const b = must(await t.call("PUT", `${ports}/b`, { claim: "vm1", node: "worker2" }), 201);
  assert.equal(b.floating, f.address);
  assert.equal(b.active, false);
  must(await t.call("POST", `${ports}/b/activate`), 200);
  // A port of the claim bound by its ID as well would have two: refused.
  const g = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  mustFail(
    await t.call("POST", `${ACME}/${g.address}/bind`, { network: "blue", port: "b" }, TOKEN.acme),
    409,
    "in_use",
  );
  // Neither both nor none named.
  mustFail(
    await t.call(
      "POST",
      `${ACME}/${g.address}/bind`,
      { network: "blue", port: "b", claim: "vm1" },
      TOKEN.acme,
    ),
    400,
    "invalid_request",
  );
  // Another tenant's claim is not found.
  must(await t.call("POST", "tenants/globex/networks", net("red", "10.2.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks/red/claims", { name: "vm1" }), 201);
  mustFail(
    await t.call("POST", `${ACME}/${g.address}/bind`, { network: "red", claim: "vm1" }, TOKEN.acme),
    404,
    "not_found",
  );
  must(await t.call("POST", `${ACME}/${f.address}/unbind`, undefined, TOKEN.acme), 200);
  for (const id of ["a", "b"]) {
    assert.equal(must(await t.call("GET", `${ports}/${id}`), 200).floating, undefined, id);
  }
});

Deno.test("floating history: each tenant's stints of an address, with what it was bound to and what ended them; never another tenant's", async () => {
  let clock = Date.parse("2026-11-28T10:00:00Z");
  using t = await testApp({
    tenants: ["acme", "globex"],
    historyRetentionDays: 30,
    clock: () => clock,
  });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.1/32"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", P1, on("worker1")), 201);
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  clock += 1000;
  must(
    await t.call("POST", `${ACME}/${f.address}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    200,
  );
  clock += 1000;
  must(await t.call("POST", `${ACME}/${f.address}/unbind`, undefined, TOKEN.acme), 200);
  clock += 1000;
  must(await t.call("DELETE", `${ACME}/${f.address}`, undefined, TOKEN.acme), 204);
  clock += 1000;
  must(await t.call("POST", "tenants/globex/floating-ips", { pool: "ext" }, TOKEN.globex), 201);
  const h = must(
    await t.call("GET", `${ACME}/${f.address}/history`, undefined, TOKEN.acme),
    200,
  ).items;
  assert.deepEqual(
    h.map((s: Record<string, unknown>) => [s.from, s.to, s.ended, s.port]),
    [
      ["2026-11-28T10:00:00.000Z", "2026-11-28T10:00:01.000Z", "bound", undefined],
      ["2026-11-28T10:00:01.000Z", "2026-11-28T10:00:02.000Z", "unbound", {
        network: "blue",
        id: "p1",
      }],
      ["2026-11-28T10:00:02.000Z", "2026-11-28T10:00:03.000Z", "released", undefined],
    ],
  );
  const theirs = must(
    await t.call(
      "GET",
      `tenants/globex/floating-ips/${f.address}/history`,
      undefined,
      TOKEN.globex,
    ),
    200,
  ).items;
  assert.equal(theirs.length, 1);
  assert.equal(theirs[0].to, undefined, "globex holds it now");
  mustFail(
    await t.call("GET", `tenants/globex/floating-ips/${f.address}/history`, undefined, TOKEN.acme),
    403,
    "forbidden",
  );
});

Deno.test("new ports of a network where no floating address was ever bound look for no binding; once one was, each new port does", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/30"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const checked: string[] = [];
  t.ctx.store = watchedStore(t.ctx.store, {
    commit: (checks) => checked.push(...checks.map((c) => String(c.key[0]))),
  });
  const put = async (id: string) =>
    must(await t.call("PUT", `tenants/acme/networks/blue/ports/${id}`, on("worker1")), 201);
  await Promise.all(["a", "b", "c"].map(put));
  assert.equal(checked.filter((k) => k === "floating_by_port").length, 0);
  assert.ok(checked.includes("floating_marked"), "the network's marker is checked instead");
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  must(
    await t.call("POST", `${ACME}/${f.address}/bind`, { network: "blue", port: "a" }, TOKEN.acme),
    200,
  );
  checked.length = 0;
  await put("d");
  assert.equal(checked.filter((k) => k === "floating_by_port").length, 1);
});

Deno.test("floating pools: an admin's list says each pool's usage (held, in quarantine, free); a tenant's has no usage (it counts other tenants')", async () => {
  let clock = Date.parse("2026-11-28T00:00:00Z");
  using t = await testApp({
    tenants: ["acme", "globex"],
    quarantineSeconds: 60,
    clock: () => clock,
  });
  // A /29 less its two ends and a /32: 7 addresses a tenant may get.
  must(
    await t.call("POST", "floating-pools", {
      name: "ext",
      cidrs: ["203.0.113.0/29", "198.51.100.9/32"],
    }),
    201,
  );
  must(await t.call("POST", "floating-pools", { name: "lan", cidrs: ["192.0.2.200/30"] }), 201);
  for (const tenant of ["acme", "acme", "globex"] as const) {
    must(
      await t.call("POST", `tenants/${tenant}/floating-ips`, { pool: "ext" }, TOKEN[tenant]),
      201,
    );
  }
  must(await t.call("DELETE", `${ACME}/203.0.113.1`, undefined, TOKEN.acme), 204);
  const usage = async () =>
    Object.fromEntries(
      must(await t.call("GET", "floating-pools", undefined, TOKEN.admin), 200).items.map(
        (p: { name: string; usage: unknown }) => [p.name, p.usage],
      ),
    );
  assert.deepEqual(await usage(), {
    ext: { total: 7, held: 2, quarantined: 1, free: 4 },
    lan: { total: 2, held: 0, quarantined: 0, free: 2 },
  });
  clock += 61_000;
  assert.deepEqual((await usage()).ext, { total: 7, held: 2, quarantined: 0, free: 5 });
  const theirs = must(await t.call("GET", "floating-pools", undefined, TOKEN.acme), 200).items;
  assert.deepEqual(theirs.map((p: { usage?: unknown }) => p.usage), [undefined, undefined]);
});

Deno.test("a manager that remembers a network without bindings still gives a new port the address another replica bound to its ID", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const replica = createContext(t.ctx.store, { vniRanges: ["5000-5999"], underlayMtu: 1500 });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/30"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  // This manager learns that no address was ever bound on blue; the other binds one meanwhile.
  must(await t.call("PUT", P1, on("worker1")), 201);
  const f = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  await bindFloatingIp(replica, {
    principal: { scope: "admin" },
    tenant: "acme",
    address: f.address,
    body: { network: "blue", port: "p1" },
  });
  must(await t.call("DELETE", P1), 204);
  const again = must(await t.call("PUT", P1, on("worker2")), 201);
  assert.equal(again.floating, f.address);
  replica.feed.close();
});
