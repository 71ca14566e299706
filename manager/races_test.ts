/**
 * Races between writers: two "processes" are two manager contexts on one store, each with its own
 * caches, as replicas on a shared store would be.
 */
import assert from "node:assert/strict";
import { createApp, createContext, TokenTable } from "./mod.ts";
import { metricValue } from "@knitter/common/metrics";
import { dump, must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

/** A second manager on the same store, with caches of its own. */
function secondManager(store: Parameters<typeof createContext>[0]) {
  const ctx = createContext(store, { vniRanges: ["5000-5999"], underlayMtu: 1500 });
  const app = createApp({ ctx, tokens: new TokenTable([{ token: TOKEN.admin, scope: "admin" }]) });
  return async (method: string, path: string, body?: unknown) => {
    const r = await app.request(`/api/v1/${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN.admin}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : null };
  };
}

Deno.test("race: a network deleted elsewhere is not resurrected by an allocation from a stale cache", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  // This manager caches the network and its pool.
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", {}), 201);
  const other = secondManager(t.store);
  must(await other("DELETE", "tenants/acme/networks/blue/ports/p1"), 204);
  must(await other("DELETE", "tenants/acme/networks/blue"), 204);

  mustFail(await t.call("PUT", "tenants/acme/networks/blue/ports/p2", {}), 404, "not_found");
  mustFail(
    await t.call("PUT", "tenants/acme/networks/blue/ports/p3", { ip: "10.1.0.9" }),
    404,
    "not_found",
  );
  const left = (await dump(t.store)).map((e) => (e as { key: unknown[] }).key[0]);
  for (const kind of ["port", "port_of_tenant_on_foreign_network", "ipam", "address", "network"]) {
    assert.ok(!left.includes(kind), `nothing of kind "${kind}" is left: ${JSON.stringify(left)}`);
  }
});

Deno.test("race: a network re-created elsewhere under the same name gets the new allocations", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", {}), 201);
  const other = secondManager(t.store);
  must(await other("DELETE", "tenants/acme/networks/blue/ports/p1"), 204);
  must(await other("DELETE", "tenants/acme/networks/blue"), 204);
  const fresh = must(await other("POST", "tenants/acme/networks", net("blue", "10.9.0.0/24")), 201);

  const p = must(await t.call("PUT", "tenants/acme/networks/blue/ports/p2", {}), 201);
  assert.equal(p.networkId, fresh.id);
  assert.match(p.ip, /^10\.9\.0\./);
  const usage = must(await other("GET", "tenants/acme/networks/blue"), 200).usage;
  assert.equal(usage.used, 1);
});

Deno.test("race: repeating a PUT of an existing port is not a store conflict", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const first = must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", {}), 201);
  for (let i = 0; i < 5; i++) {
    assert.deepEqual(
      must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", {}), 200),
      first,
    );
  }
  assert.equal(await metricValue(t.ctx.metrics.conflicts), 0);
});

Deno.test("race: two overlapping networks created at once: one is refused", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  const replies = await Promise.all([
    t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/16")),
    t.call("POST", "tenants/acme/networks", net("green", "10.1.2.0/24")),
  ]);
  assert.deepEqual(replies.map((r) => r.status).sort(), [201, 400]);
  const refused = replies.find((r) => r.status === 400)!;
  mustFail(refused, 400, "invalid_request", { field: "cidr", message: /overlaps network/ });
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).networks, 1);
});

Deno.test("tenant delete is refused while the tenant has ports on a public network", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  must(await t.call("PUT", "tenants/acme/networks/shared/ports/pod-a-eth0", {}, TOKEN.acme), 201);
  mustFail(await t.call("DELETE", "tenants/acme"), 409, "in_use", { message: /pod-a-eth0/ });
  must(
    await t.call("DELETE", "tenants/acme/networks/shared/ports/pod-a-eth0", undefined, TOKEN.acme),
    204,
  );
  must(await t.call("DELETE", "tenants/acme"), 204);
});
