/** Tokens and scopes: who may reach what, and what a tenant may learn about others. */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

/** acme and globex with a private network each, and a public network "shared" of the admin. */
async function world() {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", net("green", "10.2.0.0/24")), 201);
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  return t;
}

Deno.test("auth: 401 without a token, with an unknown token, with a malformed header", async () => {
  using t = await world();
  for (
    const [method, path] of [["GET", "tenants"], ["PUT", "tenants/acme/networks/blue/ports/p1"], [
      "GET",
      "nodes",
    ]]
  ) {
    mustFail(
      await t.call(method, path, method === "PUT" ? {} : undefined, null),
      401,
      "unauthorized",
      {
        message: /Bearer/,
      },
    );
    mustFail(
      await t.call(method, path, method === "PUT" ? {} : undefined, "no-such-token-0000000"),
      401,
      "unauthorized",
    );
  }
  const res = await t.app.request("/api/v1/tenants", {
    headers: { authorization: `Basic ${TOKEN.admin}` },
  });
  assert.equal(res.status, 401);
  const ok = await t.app.request("/api/v1/tenants", {
    headers: { authorization: `bearer ${TOKEN.admin}` },
  });
  assert.equal(ok.status, 200, "the scheme is case-insensitive");
  assert.equal(must(await t.call("GET", "tenants/acme/networks/blue/ports"), 200).items.length, 0);
});

Deno.test("auth: a tenant token may not reach another tenant's path or admin-only routes", async () => {
  using t = await world();
  const acme = TOKEN.acme;
  mustFail(await t.call("GET", "tenants/globex", undefined, acme), 403, "forbidden", {
    message: /tenant "acme"/,
  });
  mustFail(await t.call("GET", "tenants/globex/networks", undefined, acme), 403, "forbidden");
  mustFail(
    await t.call("POST", "tenants/globex/networks", net("x", "10.9.0.0/24"), acme),
    403,
    "forbidden",
  );
  mustFail(
    await t.call("DELETE", "tenants/globex/networks/green", undefined, acme),
    403,
    "forbidden",
  );
  mustFail(await t.call("GET", "tenants/globex/ipgroups", undefined, acme), 403, "forbidden");
  for (const token of [acme, TOKEN.worker1]) {
    mustFail(await t.call("POST", "tenants", { name: "evil" }, token), 403, "forbidden", {
      message: /admin-only/,
    });
    mustFail(await t.call("DELETE", "tenants/acme", undefined, token), 403, "forbidden");
    mustFail(await t.call("POST", "physnets", { name: "p" }, token), 403, "forbidden");
    mustFail(await t.call("DELETE", "nodes/worker1", undefined, token), 403, "forbidden");
  }
  // What a tenant may do on its own path.
  must(await t.call("GET", "tenants/acme", undefined, acme), 200);
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.3.0.0/24"), acme), 201);
  must(await t.call("DELETE", "tenants/acme/networks/red", undefined, acme), 204);
  // A tenant lists only itself; a node token lists no tenant.
  assert.deepEqual(
    must(await t.call("GET", "tenants", undefined, acme), 200).items.map((x: { name: string }) =>
      x.name
    ),
    [
      "acme",
    ],
  );
  assert.deepEqual(must(await t.call("GET", "tenants", undefined, TOKEN.worker1), 200).items, []);
  assert.equal(
    must(await t.call("GET", "tenants/globex"), 200).networks,
    1,
    "nothing changed in globex",
  );
});

Deno.test("auth: a node token registers only its own node", async () => {
  using t = await world();
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.168.1.11" }, TOKEN.worker1), 201);
  mustFail(
    await t.call("PUT", "nodes/worker2", { underlayIp: "192.168.1.12" }, TOKEN.worker1),
    403,
    "forbidden",
    {
      message: /node "worker1"/,
    },
  );
  mustFail(
    await t.call("PUT", "nodes/worker1", { underlayIp: "192.168.1.12" }, TOKEN.acme),
    403,
    "forbidden",
  );
  assert.deepEqual(
    must(await t.call("GET", "nodes", undefined, TOKEN.worker1), 200).items.map((
      n: { name: string },
    ) => n.name),
    [
      "worker1",
    ],
  );
  assert.equal(
    must(await t.call("GET", "nodes/worker1", undefined, TOKEN.worker2), 200).underlayIp,
    "192.168.1.11",
  );
});

Deno.test("auth: a node token puts and deletes ports bound to itself only", async () => {
  using t = await world();
  const path = "tenants/acme/networks/blue/ports";
  const p = must(
    await t.call("PUT", `${path}/p1`, { pod: { namespace: "acme", name: "a" } }, TOKEN.worker1),
    201,
  );
  assert.equal(p.node, "worker1", "the port is bound to the calling node");
  assert.equal(p.tenant, "acme");
  mustFail(
    await t.call("PUT", `${path}/p2`, { node: "worker2" }, TOKEN.worker1),
    403,
    "forbidden",
    { field: "node" },
  );
  mustFail(await t.call("GET", `${path}/p2`), 404, "not_found");
  // Another node may not take over or release the port.
  mustFail(await t.call("PUT", `${path}/p1`, {}, TOKEN.worker2), 409, "conflict", {
    field: "node",
  });
  mustFail(await t.call("DELETE", `${path}/p1`, undefined, TOKEN.worker2), 403, "forbidden");
  must(await t.call("GET", `${path}/p1`), 200);
  must(await t.call("DELETE", `${path}/p1`, undefined, TOKEN.worker1), 204);
  assert.equal(must(await t.call("GET", "tenants/acme/networks/blue"), 200).usage.used, 0);
});

Deno.test("auth: another tenant's private network is 404, a public one is readable", async () => {
  using t = await world();
  const acme = TOKEN.acme;
  const hidden = mustFail(
    await t.call("GET", "tenants/globex/networks/green", undefined, acme),
    404,
    "not_found",
  );
  const absent = mustFail(
    await t.call("GET", "tenants/globex/networks/nope", undefined, acme),
    404,
    "not_found",
  );
  assert.equal(
    hidden.replace("green", "X"),
    absent.replace("nope", "X"),
    "a private network looks absent",
  );
  mustFail(
    await t.call("PUT", "tenants/globex/networks/green/ports/p1", {}, acme),
    404,
    "not_found",
  );
  mustFail(
    await t.call("GET", "tenants/globex/networks/green/ports", undefined, acme),
    404,
    "not_found",
  );
  mustFail(
    await t.call("DELETE", "tenants/globex/networks/green/ports/p1", undefined, acme),
    404,
    "not_found",
  );
  assert.equal(must(await t.call("GET", "tenants/globex/networks/green"), 200).usage.used, 0);

  const pub = must(await t.call("GET", "tenants/admin/networks/shared", undefined, acme), 200);
  assert.equal(pub.public, true);
  assert.deepEqual(
    must(await t.call("GET", "tenants/acme/networks/shared", undefined, acme), 200),
    pub,
  );
});

Deno.test("auth: a tenant attaches to a public network through its own path; it sees its own ports only", async () => {
  using t = await world();
  // Bound to worker1 by worker1's agent: a tenant token binds no port to a node.
  const a = must(
    await t.call("PUT", "tenants/acme/networks/shared/ports/a1", {}, TOKEN.worker1),
    201,
  );
  assert.deepEqual([a.tenant, a.networkTenant, a.network], ["acme", "admin", "shared"]);
  const g = must(
    await t.call(
      "PUT",
      "tenants/globex/networks/shared/ports/g1",
      {},
      TOKEN.worker1,
    ),
    201,
  );
  assert.notEqual(g.ip, a.ip);
  // Also through the public network's own path.
  must(await t.call("PUT", "tenants/admin/networks/shared/ports/a2", {}, TOKEN.acme), 201);

  const ids = (r: { items: { id: string }[] }) => r.items.map((p) => p.id).sort();
  assert.deepEqual(ids(must(await t.call("GET", "ports", undefined, TOKEN.acme), 200)), [
    "a1",
    "a2",
  ]);
  assert.deepEqual(
    ids(must(await t.call("GET", "ports?node=worker1", undefined, TOKEN.acme), 200)),
    ["a1"],
  );
  assert.deepEqual(
    ids(must(await t.call("GET", "ports?tenant=globex", undefined, TOKEN.acme), 200)),
    [],
  );
  assert.deepEqual(
    ids(
      must(await t.call("GET", "tenants/acme/networks/shared/ports", undefined, TOKEN.acme), 200),
    ),
    [
      "a1",
      "a2",
    ],
  );
  assert.deepEqual(ids(must(await t.call("GET", "ports?node=worker1"), 200)), ["a1", "g1"]);
  assert.deepEqual(
    ids(must(await t.call("GET", "ports?node=worker1", undefined, TOKEN.worker2), 200)),
    ["a1", "g1"],
  );

  // Another tenant's port on the shared network is invisible and untouchable.
  mustFail(
    await t.call("GET", "tenants/acme/networks/shared/ports/g1", undefined, TOKEN.acme),
    404,
    "not_found",
  );
  mustFail(
    await t.call("DELETE", "tenants/acme/networks/shared/ports/g1", undefined, TOKEN.acme),
    404,
    "not_found",
  );
  mustFail(
    await t.call("PUT", "tenants/acme/networks/shared/ports/g1", { ip: g.ip }, TOKEN.acme),
    409,
    "address_taken",
    { message: /another tenant/ },
  );
  // Port IDs on a public network are the tenant's own: acme's g1 is not globex's g1.
  const mine = must(
    await t.call("PUT", "tenants/acme/networks/shared/ports/g1", {}, TOKEN.acme),
    201,
  );
  assert.equal(mine.tenant, "acme");
  assert.notEqual(mine.ip, g.ip);
  assert.equal(
    must(
      await t.call("GET", "tenants/globex/networks/shared/ports/g1", undefined, TOKEN.globex),
      200,
    )
      .ip,
    g.ip,
  );
  assert.equal(must(await t.call("GET", "tenants/admin/networks/shared"), 200).usage.used, 4);
});

Deno.test("auth: only an admin creates public networks or groups on them", async () => {
  using t = await world();
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("pub", "10.9.0.0/24", { public: true }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "public" },
  );
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/ipgroups",
      { name: "g", network: "shared", size: 1 },
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "network" },
  );
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).networks, 1);
  assert.equal(must(await t.call("GET", "tenants/admin/networks/shared"), 200).usage.used, 0);
  // A tenant may not delete a public network either, even through its own path.
  mustFail(
    await t.call("DELETE", "tenants/acme/networks/shared", undefined, TOKEN.acme),
    404,
    "not_found",
  );
  must(await t.call("GET", "tenants/admin/networks/shared"), 200);
});
