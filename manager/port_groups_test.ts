/**
 * PATCH of a port's security groups (service/port_groups.ts): it changes an existing port only,
 * never makes one, refuses a path that resolves to another network than the one named, checks
 * the groups as a PUT does, and lets a tenant change only its own ports and a monitor only its
 * cluster's. Attacks first, then what passes.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";
const EAST_MON = "east-monitor-token-for-tests";
const WEST_MON = "west-monitor-token-for-tests";
const WEST_N1 = "west-n1-token-for-tests-001";

/** acme: network blue, group web, port p1 on it; globex: port g1 on the public network pub. */
async function world() {
  const t = await testApp({
    tenants: ["acme", "globex"],
    tokens: [
      { token: EAST_MON, scope: "monitor", cluster: "east" },
      { token: WEST_MON, scope: "monitor", cluster: "west" },
      { token: WEST_N1, scope: "node", node: "n1", cluster: "west" },
    ],
  });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme", "globex"] }), 201);
  must(await t.call("POST", "clusters", { name: "west", tenants: ["acme", "globex"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(
    await t.call("POST", "tenants/admin/networks", net("pub", "10.9.0.0/24", { public: true })),
    201,
  );
  must(await t.call("POST", "tenants/acme/security-groups", { name: "web", rules: [] }), 201);
  must(await t.call("POST", "tenants/globex/security-groups", { name: "db", rules: [] }), 201);
  const p1 = must(await t.call("PUT", `${BLUE}/ports/p1`, {}, TOKEN.acme), 201);
  const g1 = must(
    await t.call("PUT", "tenants/globex/networks/pub/ports/g1", {}, TOKEN.globex),
    201,
  );
  return { t, p1, g1 };
}

Deno.test("attack: PATCH of a port's groups never makes a port, and reaches no other tenant's or cluster's", async () => {
  const { t, p1, g1 } = await world();
  using _ = t;
  const req = attempt(t);
  const groups = (id: string) => ({ networkId: id, securityGroups: ["web"] });
  // A released (or never made) port stays absent: 404, nothing allocated.
  mustFail(
    await req("PATCH", `${BLUE}/ports/gone`, groups(p1.networkId), TOKEN.acme),
    404,
    "not_found",
  );
  // acme's token on globex's port (by globex's path, and by its own on the public network).
  mustFail(
    await req("PATCH", "tenants/globex/networks/pub/ports/g1", groups(g1.networkId), TOKEN.acme),
    404,
    "not_found",
  );
  mustFail(
    await req("PATCH", "tenants/acme/networks/pub/ports/g1", groups(g1.networkId), TOKEN.acme),
    404,
    "not_found",
  );
  // A monitor of another cluster: west's port is not east's to change.
  const pod = { namespace: "acme", name: "web-0" };
  const w = must(await t.call("PUT", `${BLUE}/ports/stable:acme:web-0`, { pod }, WEST_N1), 201);
  mustFail(
    await req("PATCH", `${BLUE}/ports/stable:acme:web-0`, groups(w.networkId), EAST_MON),
    404,
    "not_found",
  );
  // Another tenant's group is absent in this one: 404 naming the field.
  mustFail(
    await req(
      "PATCH",
      `${BLUE}/ports/p1`,
      { networkId: p1.networkId, securityGroups: ["db"] },
      TOKEN.acme,
    ),
    404,
    "not_found",
    { field: "securityGroups[0]" },
  );
});

Deno.test("attack: PATCH through a tenant's own network shadowing the public one of that name is 409", async () => {
  const { t, g1 } = await world();
  using _ = t;
  // globex makes its own "pub": the path tenants/globex/networks/pub now resolves to it.
  must(
    await t.call("POST", "tenants/globex/networks", net("pub", "10.3.0.0/24"), TOKEN.globex),
    201,
  );
  mustFail(
    await attempt(t)(
      "PATCH",
      "tenants/globex/networks/pub/ports/g1",
      { networkId: g1.networkId, securityGroups: ["db"] },
      TOKEN.globex,
    ),
    409,
    "conflict",
    { field: "networkId" },
  );
  const still = (await t.call("GET", "ports?tenant=globex")).body.items;
  assert.deepEqual(still.map((p: { id: string }) => p.id), ["g1"], "no port made on globex's pub");
});

Deno.test("PATCH of a port's groups: set, changed, cleared ([]: the network's), in the feed; the same again changes nothing", async () => {
  const { t, p1 } = await world();
  using _ = t;
  const path = `${BLUE}/ports/p1`;
  const set = must(
    await t.call("PATCH", path, { networkId: p1.networkId, securityGroups: ["web"] }, TOKEN.acme),
    200,
  );
  assert.deepEqual(set.securityGroups, ["web"]);
  assert.equal(set.ip, p1.ip);
  must(
    await t.call("PATCH", path, { networkId: p1.networkId, securityGroups: ["web"] }, TOKEN.acme),
    200,
  );
  const cleared = must(
    await t.call("PATCH", path, { networkId: p1.networkId, securityGroups: [] }, TOKEN.acme),
    200,
  );
  assert.equal(cleared.securityGroups, undefined);
  // The monitor of a cluster changes its cluster's ports too (the admin-made p1 has none: east).
  const w = must(
    await t.call("PATCH", path, { networkId: p1.networkId, securityGroups: ["web"] }, TOKEN.admin),
    200,
  );
  assert.deepEqual(w.securityGroups, ["web"]);
  // A group being used cannot be deleted.
  mustFail(await t.call("DELETE", "tenants/acme/security-groups/web"), 409, "in_use");
});
