/** Unbinding a port: its pod and node go in one commit, its address stays, a PUT binds it again. */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const PORT = "tenants/acme/networks/blue/ports/stable:acme:db-0-eth0";

Deno.test("ports: unbind keeps the address, drops pod and node, says since when; a PUT binds it again", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const pod = { namespace: "acme", name: "db-0", uid: "u1" };
  const bound = must(await t.call("PUT", PORT, { pod, node: "n1", interface: "eth0" }), 201);

  const unbound = must(await t.call("POST", `${PORT}/unbind`), 200);
  assert.equal(unbound.ip, bound.ip);
  assert.equal(unbound.mac, bound.mac);
  assert.equal(unbound.interface, "eth0");
  assert.equal(unbound.pod, undefined);
  assert.equal(unbound.node, undefined);
  assert.ok(Date.parse(unbound.unboundAt) >= Date.parse(bound.createdAt));
  assert.equal(must(await t.call("GET", "ports?pod=acme/db-0"), 200).items.length, 0);
  assert.equal(must(await t.call("GET", "ports?node=n1"), 200).items.length, 0);
  // Again: nothing changes, the time stays.
  assert.equal(must(await t.call("POST", `${PORT}/unbind`), 200).unboundAt, unbound.unboundAt);

  // The pod's next incarnation, elsewhere: the same address, bound, no unboundAt.
  const next = { ...pod, uid: "u2" };
  const again = must(await t.call("PUT", PORT, { pod: next, node: "n2", interface: "eth0" }), 200);
  assert.equal(again.ip, bound.ip);
  assert.equal(again.node, "n2");
  assert.deepEqual(again.pod, next);
  assert.equal(again.unboundAt, undefined);
  assert.equal(must(await t.call("GET", "ports?pod=acme/db-0"), 200).items.length, 1);
});

Deno.test("ports: unbind of an unknown port is 404; a tenant token unbinds only its own", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  mustFail(await t.call("POST", `${PORT}/unbind`), 404, "not_found");
  must(await t.call("PUT", PORT, { pod: { namespace: "acme", name: "db-0" } }), 201);
  mustFail(await t.call("POST", `${PORT}/unbind`, undefined, TOKEN.globex), 404, "not_found");
  must(await t.call("POST", `${PORT}/unbind`, undefined, TOKEN.acme), 200);
});
