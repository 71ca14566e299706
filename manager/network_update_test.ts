/** Changing a network after creation: what ports can live with changes, the rest is refused. */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN, unchanged } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("network update: description, MTU, routes and DNS change and reach new ports", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const old = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  const updated = must(
    await t.call("PATCH", BLUE, {
      description: "front end",
      mtu: 1400,
      routes: [{ dst: "10.9.0.0/16", via: "10.1.0.1" }],
      dns: { nameservers: ["10.1.0.2"], search: ["acme.svc"] },
    }, TOKEN.acme),
    200,
  );
  assert.equal(updated.description, "front end");
  assert.equal(updated.mtu, 1400);
  assert.deepEqual(updated.routes, [{ dst: "10.9.0.0/16", via: "10.1.0.1" }]);
  assert.equal(updated.usage.used, 1);
  assert.deepEqual(must(await t.call("GET", BLUE), 200).dns, {
    nameservers: ["10.1.0.2"],
    search: ["acme.svc"],
  });
  const fresh = must(await t.call("PUT", `${BLUE}/ports/p2`, {}), 201);
  assert.equal(fresh.mtu, 1400);
  assert.deepEqual(fresh.routes, updated.routes);
  assert.equal(old.mtu, 1450, "the port allocated before kept the MTU it was built with");
});

Deno.test("network update: immutable fields are accepted unchanged and refused changed", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  must(
    await t.call("PATCH", BLUE, {
      cidr: "10.1.0.0/24",
      gateway: "10.1.0.1",
      type: "vxlan",
      mtu: 1300,
    }),
    200,
  );
  await unchanged(t, async () => {
    mustFail(
      await t.call("PATCH", BLUE, { cidr: "10.2.0.0/24", mtu: 1200 }),
      400,
      "invalid_request",
      {
        field: "cidr",
        message: /keeps the cidr it was created with \("10.1.0.0\/24"\).*create a new network/,
      },
    );
    mustFail(await t.call("PATCH", BLUE, { public: true }), 400, "invalid_request", {
      field: "public",
    });
    mustFail(
      await t.call("PATCH", BLUE, { routes: [{ dst: "fd00::/64" }] }),
      400,
      "invalid_request",
      { field: "routes[0].dst", message: /IPv6 but the network is IPv4/ },
    );
  });
  assert.equal(must(await t.call("GET", BLUE), 200).mtu, 1300);
});

Deno.test("network update: another tenant cannot change it, an unknown network is 404", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  mustFail(await t.call("PATCH", BLUE, { mtu: 1300 }, TOKEN.globex), 403, "forbidden");
  mustFail(await t.call("PATCH", "tenants/acme/networks/red", { mtu: 1300 }), 404, "not_found");
});

Deno.test("tenants: PUT ensures a tenant for nodes and admins, answering 201 then 200", async () => {
  using t = await testApp();
  must(await t.call("PUT", "tenants/team-a", undefined, TOKEN.worker1), 201);
  assert.equal(
    must(await t.call("PUT", "tenants/team-a", undefined, TOKEN.worker2), 200).name,
    "team-a",
  );
  mustFail(await t.call("PUT", "tenants/team-b", undefined, TOKEN.acme), 403, "forbidden");
});
