/**
 * Issue 29, floating addresses: each hole written as the hostile caller's requests, then the
 * refusal, that nothing changed, and that the victim is unharmed.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const ACME = "tenants/acme/floating-ips";
const GLOBEX = "tenants/globex/floating-ips";
const PORT = { pod: { namespace: "acme", name: "web" }, node: "worker1" };

/** A pool ext (203.0.113.0/29); acme's network blue with port p1; globex's red with port q1. */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"], quarantineSeconds: 60 });
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/29"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", net("red", "10.1.0.0/24")), 201);
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", PORT), 201);
  must(
    await t.call("PUT", "tenants/globex/networks/red/ports/q1", {
      pod: { namespace: "globex", name: "db" },
      node: "worker1",
    }),
    201,
  );
  return t;
}

Deno.test("attack: a tenant cannot make a floating pool, nor delete one", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", "floating-pools", { name: "mine", cidrs: ["198.51.100.0/24"] }, TOKEN.acme),
    403,
    "forbidden",
  );
  mustFail(await req("DELETE", "floating-pools/ext", undefined, TOKEN.acme), 403, "forbidden");
});

Deno.test("attack: a tenant cannot take an address outside the pool, nor one held", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", ACME, { pool: "ext", address: "203.0.113.9" }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "address", message: /outside floating pool "ext"/ },
  );
  mustFail(
    await req("POST", ACME, { pool: "ext", address: "10.1.0.5" }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "address" },
  );
  // The pool's network and broadcast addresses are no one's.
  mustFail(
    await req("POST", ACME, { pool: "ext", address: "203.0.113.0" }, TOKEN.acme),
    400,
    "invalid_request",
  );
  must(await t.call("POST", GLOBEX, { pool: "ext", address: "203.0.113.3" }, TOKEN.globex), 201);
  mustFail(
    await req("POST", ACME, { pool: "ext", address: "203.0.113.3" }, TOKEN.acme),
    409,
    "address_taken",
  );
});

Deno.test("attack: a tenant cannot exceed its floatingIps quota", async () => {
  using t = await world();
  must(await t.call("PUT", "tenants/acme/quota", { floatingIps: 1 }), 200);
  must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)("POST", ACME, { pool: "ext" }, TOKEN.acme),
    403,
    "quota_exceeded",
    { field: "floatingIps" },
  );
  const q = must(await t.call("GET", "tenants/acme/quota", undefined, TOKEN.acme), 200);
  assert.equal(q.used.floatingIps, 1);
});

Deno.test("attack: a tenant cannot bind, unbind, read or release another tenant's floating address", async () => {
  using t = await world();
  const req = attempt(t);
  const theirs = must(await t.call("POST", GLOBEX, { pool: "ext" }, TOKEN.globex), 201);
  const a = theirs.address;
  // Through the victim's path: the token may not act for globex.
  mustFail(
    await req("POST", `${GLOBEX}/${a}/bind`, { network: "blue", port: "p1" }, TOKEN.acme),
    403,
    "forbidden",
  );
  // Through its own path: not found (who holds it is not told).
  for (
    const [method, path, body] of [
      ["POST", `${ACME}/${a}/bind`, { network: "blue", port: "p1" }],
      ["POST", `${ACME}/${a}/unbind`, undefined],
      ["GET", `${ACME}/${a}`, undefined],
      ["DELETE", `${ACME}/${a}`, undefined],
    ] as const
  ) {
    const msg = mustFail(await req(method, path, body, TOKEN.acme), 404, "not_found");
    assert.doesNotMatch(msg, /globex/);
  }
  must(await t.call("GET", `${GLOBEX}/${a}`, undefined, TOKEN.globex), 200);
});

Deno.test("attack: a tenant cannot bind its floating address to another tenant's port", async () => {
  using t = await world();
  const req = attempt(t);
  const mine = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  // globex's network by name is not acme's: not found, whatever its ports.
  const msg = mustFail(
    await req("POST", `${ACME}/${mine.address}/bind`, { network: "red", port: "q1" }, TOKEN.acme),
    404,
    "not_found",
  );
  assert.doesNotMatch(msg, /q1.*globex|globex.*q1/);
  // A port ID acme does not have on its own network.
  mustFail(
    await req("POST", `${ACME}/${mine.address}/bind`, { network: "blue", port: "q1" }, TOKEN.acme),
    404,
    "not_found",
  );
  const q1 = must(
    await t.call("GET", "tenants/globex/networks/red/ports/q1", undefined, TOKEN.globex),
    200,
  );
  assert.equal(q1.floating, undefined);
});

Deno.test("attack: on a public network a tenant cannot bind to another tenant's port of the same ID", async () => {
  using t = await world();
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  must(
    await t.call("PUT", "tenants/globex/networks/shared/ports/s1", {
      pod: { namespace: "globex", name: "s" },
      node: "worker1",
    }),
    201,
  );
  const mine = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)(
      "POST",
      `${ACME}/${mine.address}/bind`,
      { network: "shared", port: "s1" },
      TOKEN.acme,
    ),
    404,
    "not_found",
  );
});
