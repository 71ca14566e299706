/**
 * Issue 26, IPAM claims: each hole written as the hostile caller's requests, then the refusal, that
 * nothing changed, and that the victim is unharmed. These run on Deno KV here and on a real etcd in
 * tests/etcd_api_N_test.ts.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";
const RED = "tenants/acme/networks/red";
const SHARED = "tenants/admin/networks/shared";

/** acme with networks blue and red; globex; a public network shared; acme's claim vm1 on blue. */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201);
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  must(await t.call("POST", `${BLUE}/claims`, { name: "vm1" }, TOKEN.acme), 201);
  return t;
}

const pod = (name: string) => ({ namespace: "acme", name });

Deno.test("attack: another tenant naming a claim gets 404 and takes nothing", async () => {
  using t = await world();
  const req = attempt(t);
  const victim = must(await t.call("GET", `${BLUE}/claims/vm1`, undefined, TOKEN.acme), 200);
  // Through the victim's path: the tenant token may not act for acme.
  mustFail(await req("GET", `${BLUE}/claims/vm1`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(await req("DELETE", `${BLUE}/claims/vm1`, undefined, TOKEN.globex), 403, "forbidden");
  // On the public network both may use, a port of globex naming acme's claim: not found there.
  must(
    await t.call("POST", "tenants/acme/networks/shared/claims", { name: "vm2" }, TOKEN.acme),
    201,
  );
  mustFail(
    await req("PUT", `${SHARED}/ports/p1`, { claim: "vm2" }, TOKEN.globex),
    404,
    "not_found",
    { field: "claim", message: /claim "vm2" does not exist/i },
  );
  // Nor by the admin's path for globex's port, nor by a node for a pod of globex.
  mustFail(
    await req("PUT", `tenants/globex/networks/shared/ports/p1`, { claim: "vm2" }),
    404,
    "not_found",
    { field: "claim" },
  );
  mustFail(
    await req(
      "PUT",
      `tenants/globex/networks/shared/ports/p1`,
      { claim: "vm2", pod: { namespace: "globex", name: "x" } },
      TOKEN.worker1,
    ),
    404,
    "not_found",
    { field: "claim" },
  );
  assert.deepEqual(
    must(await t.call("GET", `${BLUE}/claims/vm1`, undefined, TOKEN.acme), 200),
    victim,
  );
});

Deno.test("attack: a port naming a claim on another network is refused, nothing written", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("PUT", `${RED}/ports/p1`, { claim: "vm1" }, TOKEN.acme),
    400,
    "invalid_request",
    {
      field: "claim",
      message: /network "blue", not "red"/,
    },
  );
});

Deno.test("attack: a claimed port takes no address, MAC or IP group of its own beside the claim's", async () => {
  using t = await world();
  const req = attempt(t);
  for (const extra of [{ ip: "10.1.0.9" }, { mac: "02:aa:00:00:00:01" }, { ipGroup: "g" }]) {
    mustFail(
      await req("PUT", `${BLUE}/ports/p1`, { claim: "vm1", ...extra }, TOKEN.acme),
      400,
      "invalid_request",
      { field: Object.keys(extra)[0], message: /the claim gives/ },
    );
  }
});

Deno.test("attack: a third port of a claim is refused; the second is inactive and takes no traffic", async () => {
  using t = await world();
  const src = must(
    await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1", pod: pod("a") }, TOKEN.worker1),
    201,
  );
  assert.equal(src.active, undefined, "the first port is active (absent: true)");
  const dst = must(
    await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1", pod: pod("b") }, TOKEN.worker2),
    201,
  );
  assert.equal(dst.active, false);
  assert.equal(dst.ip, src.ip);
  assert.equal(dst.mac, src.mac);
  const req = attempt(t);
  mustFail(
    await req("PUT", `${BLUE}/ports/third`, { claim: "vm1", pod: pod("c") }, TOKEN.acme),
    409,
    "conflict",
    {
      field: "claim",
      message: /"src" \(active, node "worker1"\), "dst" \(inactive, node "worker2"\)/,
    },
  );
  // The source still has the claim's traffic.
  assert.equal(must(await t.call("GET", `${BLUE}/ports/src`), 200).active, undefined);
});

Deno.test("attack: a second port of a claim on the node of the first is refused", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  mustFail(
    await attempt(t)("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker1),
    409,
    "conflict",
    { field: "claim", message: /node "worker1"/ },
  );
});

Deno.test("attack: a node cannot activate a port bound to another node; nor another tenant", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker2), 201);
  const req = attempt(t);
  // worker1 hosts the source: it may not make worker2's target active (nor take it over).
  mustFail(
    await req("POST", `${BLUE}/ports/dst/activate`, undefined, TOKEN.worker1),
    403,
    "forbidden",
    { message: /node "worker1" may not activate a port of node "worker2"/ },
  );
  mustFail(
    await req("POST", `${BLUE}/ports/dst/activate`, undefined, TOKEN.globex),
    404,
    "not_found",
  );
  mustFail(
    await req("POST", "tenants/globex/networks/blue/ports/dst/activate", undefined, TOKEN.globex),
    404,
    "not_found",
  );
  // A port of no claim has nothing to take over.
  must(await t.call("PUT", `${BLUE}/ports/plain`, {}, TOKEN.acme), 201);
  mustFail(
    await req("POST", `${BLUE}/ports/plain/activate`, undefined, TOKEN.acme),
    409,
    "conflict",
    {
      message: /bound to no claim/,
    },
  );
});

Deno.test("attack: a hostile target stays inactive, and no other node binds it, until an authorised caller activates it", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  // A target made with no node: inactive; another node's agent may not take it for its own.
  const hostile = must(
    await t.call("PUT", `${BLUE}/ports/hostile`, { claim: "vm1" }, TOKEN.acme),
    201,
  );
  assert.equal(hostile.active, false);
  const req = attempt(t);
  mustFail(
    await req("PUT", `${BLUE}/ports/hostile`, { claim: "vm1" }, TOKEN.worker2),
    403,
    "forbidden",
  );
  mustFail(
    await req("POST", `${BLUE}/ports/hostile/activate`, undefined, TOKEN.worker2),
    403,
    "forbidden",
  );
  mustFail(
    await req("POST", `${BLUE}/ports/hostile/activate`, undefined, TOKEN.worker1),
    403,
    "forbidden",
  );
  // The source keeps the claim's traffic; the feed shows the target inactive.
  assert.equal(must(await t.call("GET", `${BLUE}/ports/src`), 200).active, undefined);
  const listed = must(await t.call("GET", `${BLUE}/ports`), 200).items;
  assert.deepEqual(
    listed.map((p: { id: string; active?: boolean }) => [p.id, p.active ?? true]).sort(),
    [["hostile", false], ["src", true]],
  );
});
