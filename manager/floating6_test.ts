/**
 * Issue 29, IPv6 floating addresses: an admin's pool may be an IPv6 range; an address of it binds
 * to the IPv6 side of a tenant's port (`floating6`), as an IPv4 one binds to the IPv4 side. The
 * attacks first (another tenant's port, the wrong family), then what a tenant relies on.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const ACME = "tenants/acme/floating-ips";
const GLOBEX = "tenants/globex/floating-ips";
const POOL6 = "2001:db8:f::/124";

/**
 * Pools ext6 (IPv6) and ext (IPv4); acme's dual-stack network blue with port p1 and its IPv4-only
 * network plain with port v4only; globex's dual-stack red with port q1.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({
    tenants: ["acme", "globex"],
    quarantineSeconds: 60,
    historyRetentionDays: 30,
  });
  must(await t.call("POST", "floating-pools", { name: "ext6", cidrs: [POOL6] }), 201);
  must(await t.call("POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/29"] }), 201);
  const dual = (name: string) => net(name, "10.1.0.0/24", { cidr6: "fd00:1::/64" });
  must(await t.call("POST", "tenants/acme/networks", dual("blue")), 201);
  must(await t.call("POST", "tenants/acme/networks", net("plain", "10.2.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", dual("red")), 201);
  const pod = (ns: string, name: string) => ({ pod: { namespace: ns, name }, node: "worker1" });
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", pod("acme", "web")), 201);
  must(await t.call("PUT", "tenants/acme/networks/plain/ports/v4only", pod("acme", "old")), 201);
  must(await t.call("PUT", "tenants/globex/networks/red/ports/q1", pod("globex", "db")), 201);
  return t;
}

Deno.test("attack: a tenant cannot bind its IPv6 floating address to another tenant's port", async () => {
  using t = await world();
  const req = attempt(t);
  const mine = must(await t.call("POST", ACME, { pool: "ext6" }, TOKEN.acme), 201);
  const bind = `${ACME}/${mine.address}/bind`;
  const msg = mustFail(
    await req("POST", bind, { network: "red", port: "q1" }, TOKEN.acme),
    404,
    "not_found",
  );
  assert.doesNotMatch(msg, /globex/);
  mustFail(await req("POST", bind, { network: "blue", port: "q1" }, TOKEN.acme), 404, "not_found");
  const q1 = must(
    await t.call("GET", "tenants/globex/networks/red/ports/q1", undefined, TOKEN.globex),
    200,
  );
  assert.equal(q1.floating6, undefined);
  // Nor take, read or release globex's IPv6 address through its own path.
  const theirs = must(await t.call("POST", GLOBEX, { pool: "ext6" }, TOKEN.globex), 201);
  for (
    const [method, path] of [["GET", `${ACME}/${theirs.address}`], [
      "DELETE",
      `${ACME}/${theirs.address}`,
    ]] as const
  ) {
    assert.doesNotMatch(
      mustFail(await req(method, path, undefined, TOKEN.acme), 404, "not_found"),
      /globex/,
    );
  }
  mustFail(
    await req("POST", ACME, { pool: "ext6", address: theirs.address }, TOKEN.acme),
    409,
    "address_taken",
  );
});

Deno.test("attack: an IPv6 floating address does not bind to a port without an IPv6 address: 400 naming the family", async () => {
  using t = await world();
  const mine = must(await t.call("POST", ACME, { pool: "ext6" }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)(
      "POST",
      `${ACME}/${mine.address}/bind`,
      { network: "plain", port: "v4only" },
      TOKEN.acme,
    ),
    400,
    "invalid_request",
    { field: "port", message: /IPv6.*no IPv6 address/ },
  );
  const port = must(
    await t.call("GET", "tenants/acme/networks/plain/ports/v4only", undefined, TOKEN.acme),
    200,
  );
  assert.equal(port.floating6, undefined);
  assert.equal(
    must(await t.call("GET", `${ACME}/${mine.address}`, undefined, TOKEN.acme), 200).port,
    undefined,
  );
});

Deno.test("attack: a tenant cannot take an address outside the IPv6 pool, nor its subnet-router anycast address", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", ACME, { pool: "ext6", address: "2001:db8:f::100" }, TOKEN.acme),
    400,
    "invalid_request",
    {
      field: "address",
      message: /outside floating pool "ext6" \(2001:db8:f::\/124\)/,
    },
  );
  mustFail(
    await req("POST", ACME, { pool: "ext6", address: "2001:db8:f::" }, TOKEN.acme),
    400,
    "invalid_request",
  );
  // An IPv4 address of an IPv6 pool is the wrong family.
  mustFail(
    await req("POST", ACME, { pool: "ext6", address: "203.0.113.1" }, TOKEN.acme),
    400,
    "invalid_request",
    {
      field: "address",
      message: /not an IPv6 address/,
    },
  );
});

Deno.test("an admin's IPv6 pool: a /112 at the widest, never overlapping another", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", "floating-pools", { name: "wide", cidrs: ["2001:db8:1::/64"] }),
    400,
    "invalid_request",
    {
      field: "cidrs",
      message: /wider than a \/112/,
    },
  );
  mustFail(
    await req("POST", "floating-pools", { name: "again", cidrs: ["2001:db8:f::8/125"] }),
    409,
    "conflict",
  );
  const pools = must(await t.call("GET", "floating-pools"), 200);
  const ext6 = pools.items.find((p: { name: string }) => p.name === "ext6");
  assert.deepEqual(ext6.cidrs, [POOL6]);
  assert.equal(ext6.usage.total, 15);
});

Deno.test("an IPv6 floating address binds to the port's IPv6 side (floating6), beside an IPv4 one; follows the port; unbound and released as an IPv4 one", async () => {
  using t = await world();
  const six = must(await t.call("POST", ACME, { pool: "ext6" }, TOKEN.acme), 201);
  assert.equal(six.address, "2001:db8:f::1");
  const four = must(await t.call("POST", ACME, { pool: "ext" }, TOKEN.acme), 201);
  must(
    await t.call(
      "POST",
      `${ACME}/${six.address}/bind`,
      { network: "blue", port: "p1" },
      TOKEN.acme,
    ),
    200,
  );
  must(
    await t.call(
      "POST",
      `${ACME}/${four.address}/bind`,
      { network: "blue", port: "p1" },
      TOKEN.acme,
    ),
    200,
  );
  const p1 = "tenants/acme/networks/blue/ports/p1";
  let port = must(await t.call("GET", p1, undefined, TOKEN.acme), 200);
  assert.equal(port.floating6, six.address);
  assert.equal(port.floating, four.address);
  // One per family of the port: a second IPv6 one is refused.
  const other = must(await t.call("POST", ACME, { pool: "ext6" }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)(
      "POST",
      `${ACME}/${other.address}/bind`,
      { network: "blue", port: "p1" },
      TOKEN.acme,
    ),
    409,
    "in_use",
    { message: new RegExp(`floating address ${six.address} already`) },
  );
  // The port made anew on another node carries both.
  must(await t.call("DELETE", p1, undefined, TOKEN.acme), 204);
  must(await t.call("PUT", p1, { pod: { namespace: "acme", name: "web" }, node: "worker2" }), 201);
  port = must(await t.call("GET", p1, undefined, TOKEN.acme), 200);
  assert.equal(port.node, "worker2");
  assert.equal(port.floating6, six.address);
  assert.equal(port.floating, four.address);
  // Any spelling of the address names it.
  const spelled = "2001:DB8:F:0:0:0:0:1";
  assert.equal(
    must(await t.call("GET", `${ACME}/${spelled}`, undefined, TOKEN.acme), 200).address,
    six.address,
  );
  // Unbound: the IPv6 side only.
  must(await t.call("POST", `${ACME}/${six.address}/unbind`, undefined, TOKEN.acme), 200);
  port = must(await t.call("GET", p1, undefined, TOKEN.acme), 200);
  assert.equal(port.floating6, undefined);
  assert.equal(port.floating, four.address);
  // Quota and quarantine as for IPv4.
  assert.equal(
    must(await t.call("GET", "tenants/acme/quota", undefined, TOKEN.acme), 200).used.floatingIps,
    3,
  );
  must(await t.call("DELETE", `${ACME}/${six.address}`, undefined, TOKEN.acme), 204);
  assert.equal(
    must(await t.call("GET", "tenants/acme/quota", undefined, TOKEN.acme), 200).used.floatingIps,
    2,
  );
  mustFail(
    await attempt(t)("POST", GLOBEX, { pool: "ext6", address: six.address }, TOKEN.globex),
    409,
    "address_taken",
    { message: /quarantine/ },
  );
  const history = must(
    await t.call("GET", `${ACME}/${spelled}/history`, undefined, TOKEN.acme),
    200,
  );
  assert.deepEqual(history.items.map((s: { ended?: string }) => s.ended), [
    "bound",
    "unbound",
    "released",
  ]);
});

Deno.test("an IPv6 floating address bound to a dual-stack claim is carried by its ports and by a migration's new port; a claim without an IPv6 address refuses it (400)", async () => {
  using t = await world();
  must(await t.call("POST", "tenants/acme/networks/blue/claims", { name: "vm1" }, TOKEN.acme), 201);
  must(
    await t.call("POST", "tenants/acme/networks/plain/claims", { name: "old" }, TOKEN.acme),
    201,
  );
  const ports = "tenants/acme/networks/blue/ports";
  must(await t.call("PUT", `${ports}/a`, { claim: "vm1", node: "worker1" }), 201);
  const six = must(await t.call("POST", ACME, { pool: "ext6" }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)(
      "POST",
      `${ACME}/${six.address}/bind`,
      { network: "plain", claim: "old" },
      TOKEN.acme,
    ),
    400,
    "invalid_request",
    { field: "claim", message: /Claim "old" .*no IPv6 address/ },
  );
  must(
    await t.call(
      "POST",
      `${ACME}/${six.address}/bind`,
      { network: "blue", claim: "vm1" },
      TOKEN.acme,
    ),
    200,
  );
  assert.equal(must(await t.call("GET", `${ports}/a`), 200).floating6, six.address);
  const b = must(await t.call("PUT", `${ports}/b`, { claim: "vm1", node: "worker2" }), 201);
  assert.equal(b.floating6, six.address);
  assert.equal(b.floating, undefined);
  must(await t.call("POST", `${ACME}/${six.address}/unbind`, undefined, TOKEN.acme), 200);
  for (const id of ["a", "b"]) {
    assert.equal(must(await t.call("GET", `${ports}/${id}`), 200).floating6, undefined);
  }
});
