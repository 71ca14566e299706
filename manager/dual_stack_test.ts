/**
 * Dual stack (issue 16): a network with an IPv4 and an IPv6 subnet hands each port one address of
 * each, paired by host part; an IPv6-only /64 without pools allocates from a bounded window. The
 * attacks come first: a tenant trying to reach another's addresses or to exhaust the store.
 */
import assert from "node:assert/strict";
import { MALFORMED_CIDRS, MALFORMED_IPS } from "../common/address_cases.ts";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";
import { DEFAULT_IPV6_POOL } from "./service/dual_stack.ts";
import { keys } from "./model.ts";

const DUAL = "tenants/acme/networks/dual";

/** acme with a dual-stack network; a public IPv6-only network of admin. */
async function world(): Promise<TestApp> {
  const t = await testApp({
    tenants: ["acme", "globex"],
    historyRetentionDays: 30,
    quarantineSeconds: 600,
  });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("dual", "10.5.0.0/24", {
        gateway: "10.5.0.1",
        cidr6: "fd00:5::/64",
        gateway6: "fd00:5::1",
        routes: [{ dst: "0.0.0.0/0", via: "10.5.0.1" }, { dst: "::/0", via: "fd00:5::1" }],
      }),
    ),
    201,
  );
  must(
    await t.call("POST", "tenants/admin/networks", net("pub6", "fd00:99::/64", { public: true })),
    201,
  );
  return t;
}

// ---- attacks

Deno.test("dual-stack attack: an IPv6 subnet overlapping another tenant's public network, or the tenant's own, is refused", async () => {
  using t = await world();
  const req = attempt(t);
  for (const cidr6 of ["fd00:99::/64", "fd00:99::/48", "fd00:99:0:0:1::/80"]) {
    mustFail(
      await req(
        "POST",
        "tenants/globex/networks",
        net("grab", "10.9.0.0/24", { cidr6 }),
        TOKEN.globex,
      ),
      400,
      "invalid_request",
      { field: "cidr6", message: /overlaps network "pub6" .*public network/ },
    );
  }
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("twin", "10.6.0.0/24", { cidr6: "fd00:5::/56" }),
    ),
    400,
    "invalid_request",
    { field: "cidr6", message: /overlaps network "dual"/ },
  );
  // An IPv6-only network over another network's IPv6 subnet is the same overlap.
  mustFail(
    await req("POST", "tenants/acme/networks", net("v6", "fd00:5::/64")),
    400,
    "invalid_request",
    { field: "cidr", message: /overlaps network "dual" \(.*fd00:5::\/64/ },
  );
  // Another tenant may use the same private subnet: tenants are isolated.
  must(
    await t.call(
      "POST",
      "tenants/globex/networks",
      net("mine", "10.5.0.0/24", { cidr6: "fd00:5::/64" }),
      TOKEN.globex,
    ),
    201,
  );
});

Deno.test("dual-stack attack: huge IPv6 pools cannot exhaust the store; a /64 alone takes a bounded window", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("huge", "fd00:7::/64", {
        allocationPools: [{ start: "fd00:7::1", end: "fd00:7::ffff:ffff:ffff" }],
      }),
    ),
    400,
    "invalid_request",
    { field: "allocationPools", message: /more than the 16777216/ },
  );
  // The IPv6 subnet of a dual-stack network must hold the IPv4 one's host part: a port's two
  // addresses are paired.
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("small6", "10.0.0.0/8", { cidr6: "fd00:8::/112" }),
    ),
    400,
    "invalid_request",
    {
      field: "cidr6",
      message: /fd00:8::\/112 holds 65536 addresses, fewer than the 16777216 of 10\.0\.0\.0\/8/,
    },
  );
  const v6 = must(await t.call("POST", "tenants/acme/networks", net("v6", "fd00:7::/64")), 201);
  assert.deepEqual(v6.allocationPools, [{ start: "fd00:7::1", end: "fd00:7::1:0" }]);
  assert.equal(v6.usage.total, DEFAULT_IPV6_POOL);
});

Deno.test("dual-stack attack: malformed or misplaced IPv6 subnets and gateways are refused, naming the field", async () => {
  using t = await world();
  const req = attempt(t);
  const post = (more: Record<string, unknown>) =>
    req("POST", "tenants/acme/networks", net("bad", "10.7.0.0/24", more));
  for (const cidr6 of MALFORMED_CIDRS) {
    mustFail(await post({ cidr6 }), 400, "invalid_request", { field: "cidr6" });
  }
  for (const gateway6 of MALFORMED_IPS) {
    mustFail(await post({ cidr6: "fd00:7::/64", gateway6 }), 400, "invalid_request", {
      field: "gateway6",
    });
  }
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ cidr6: "10.8.0.0/24" }, "cidr6", /is IPv4: cidr6 takes the IPv6 subnet/],
    [{ gateway6: "fd00:7::1" }, "gateway6", /needs cidr6/],
    [{ cidr6: "fd00:7::/64", gateway6: "fd00:8::1" }, "gateway6", /outside fd00:7::\/64/],
    [{ cidr6: "fd00:7::/64", gateway6: "fd00:7::" }, "gateway6", /network address/],
    [
      { cidr6: "fd00:7::/64", gateway6: "fd00:7::9" },
      "gateway6",
      /the IPv6 address of 10\.7\.0\.9, which the pools hand out/,
    ],
    [{ cidr6: "fd00:7::/127" }, "cidr6", /too small/],
    [
      { routes: [{ dst: "::/0", via: "fd00:7::1" }] },
      "routes[0].dst",
      /IPv6 but the network is IPv4 \(it has no cidr6\)/,
    ],
    [
      { cidr6: "fd00:7::/64", routes: [{ dst: "::/0", via: "fd00:8::1" }] },
      "routes[0].via",
      /outside fd00:7::\/64/,
    ],
  ];
  for (const [more, field, message] of cases) {
    mustFail(await post(more), 400, "invalid_request", { field, message });
  }
  // An IPv6 network has no second subnet.
  mustFail(
    await req("POST", "tenants/acme/networks", net("bad", "fd00:7::/64", { cidr6: "fd00:8::/64" })),
    400,
    "invalid_request",
    { field: "cidr6", message: /already IPv6/ },
  );
  mustFail(
    await req("PATCH", DUAL, { cidr6: "fd00:6::/64" }),
    400,
    "invalid_request",
    { field: "cidr6", message: /keeps the cidr6/ },
  );
});

Deno.test("dual-stack attack: quotas count a dual-stack port's addresses, and release gives them back", async () => {
  using t = await world();
  must(await t.call("PUT", "tenants/acme/quota", { ports: 10, addresses: 2 }), 200);
  must(await t.call("PUT", `${DUAL}/ports/a`, {}, TOKEN.acme), 201);
  must(await t.call("PUT", `${DUAL}/ports/b`, {}, TOKEN.acme), 201);
  const req = attempt(t);
  mustFail(await req("PUT", `${DUAL}/ports/c`, {}, TOKEN.acme), 403, "quota_exceeded", {
    message: /addresses/,
  });
  must(await t.call("DELETE", `${DUAL}/ports/a`, undefined, TOKEN.acme), 204);
  must(await t.call("PUT", `${DUAL}/ports/c`, {}, TOKEN.acme), 201);
});

// ---- what users rely on

Deno.test("dual stack: a port gets one address of each family, paired by host part, with both gateways", async () => {
  using t = await world();
  const dual = must(await t.call("GET", DUAL), 200);
  assert.equal(dual.cidr6, "fd00:5::/64");
  assert.equal(dual.gateway6, "fd00:5::1");
  const a = must(await t.call("PUT", `${DUAL}/ports/a`, {}, TOKEN.acme), 201);
  assert.equal(a.ip, "10.5.0.2");
  assert.equal(a.address, "10.5.0.2/24");
  assert.equal(a.gateway, "10.5.0.1");
  assert.equal(a.ip6, "fd00:5::2");
  assert.equal(a.address6, "fd00:5::2/64");
  assert.equal(a.gateway6, "fd00:5::1");
  assert.deepEqual(a.routes, [{ dst: "0.0.0.0/0", via: "10.5.0.1" }, {
    dst: "::/0",
    via: "fd00:5::1",
  }]);
  const fixed = must(await t.call("PUT", `${DUAL}/ports/b`, { ip: "10.5.0.200" }, TOKEN.acme), 201);
  assert.equal(fixed.ip6, "fd00:5::c8");
  // A fixed IPv6 address asks for its pair.
  const by6 = must(await t.call("PUT", `${DUAL}/ports/c`, { ip: "fd00:5::64" }, TOKEN.acme), 201);
  assert.equal(by6.ip, "10.5.0.100");
  assert.equal(by6.ip6, "fd00:5::64");
  mustFail(
    await t.call("PUT", `${DUAL}/ports/d`, { ip: "fd00:5::c8" }, TOKEN.acme),
    409,
    "address_taken",
    { message: /"b"/ },
  );
  mustFail(
    await t.call("PUT", `${DUAL}/ports/d`, { ip: "fd00:5::1:0" }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "ip", message: /pairs with no IPv4 address of 10\.5\.0\.0\/24/ },
  );
  // An IP group may list an address by its IPv6 pair; its port gets both.
  const g = must(
    await t.call("POST", "tenants/acme/ipgroups", {
      name: "g",
      network: "dual",
      addresses: ["fd00:5::30"],
    }, TOKEN.acme),
    201,
  );
  assert.deepEqual(g.addresses, [{ ip: "10.5.0.48" }]);
  const fromGroup = must(
    await t.call("PUT", `${DUAL}/ports/g1`, { ipGroup: "g" }, TOKEN.acme),
    201,
  );
  assert.deepEqual([fromGroup.ip, fromGroup.ip6], ["10.5.0.48", "fd00:5::30"]);
  // Released, the pair goes into quarantine together.
  must(await t.call("DELETE", `${DUAL}/ports/b`, undefined, TOKEN.acme), 204);
  mustFail(
    await t.call("PUT", `${DUAL}/ports/e`, { ip: "fd00:5::c8" }, TOKEN.acme),
    409,
    "address_taken",
    { message: /quarantine/ },
  );
  // The history knows who held the IPv6 address.
  const history = must(await t.call("GET", "tenants/acme/history?ip=fd00:5::c8"), 200);
  assert.equal(history.items.length, 1);
  assert.equal(history.items[0].port, "b");
});

Deno.test("dual stack: single-stack networks and their ports answer exactly as before", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("v4", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  const n = must(await t.call("GET", "tenants/acme/networks/v4"), 200);
  assert.ok(!("cidr6" in n) && !("gateway6" in n));
  const p = must(await t.call("PUT", "tenants/acme/networks/v4/ports/p", {}), 201);
  assert.ok(!("ip6" in p) && !("address6" in p) && !("gateway6" in p));
  // The monitor PATCHes a whole spec: the absent IPv6 fields are no change.
  must(await t.call("PATCH", "tenants/acme/networks/v4", { cidr: "10.1.0.0/24", mtu: 1400 }), 200);
  // Stored as before: the records of a single-stack network and its port hold exactly the fields
  // they held before dual stack, so records written by an older manager read the same.
  const stored = (await t.store.get<Record<string, unknown>>(keys.network("acme", "v4"))).value!;
  assert.deepEqual(
    fieldsOf(stored),
    [
      "allocationPools",
      "createdAt",
      "dns",
      "excludes",
      "family",
      "gateway",
      "id",
      "mtu",
      "name",
      "poolSize",
      "public",
      "reserved",
      "reservedRanges",
      "routes",
      "segmentId",
      "tenant",
      "type",
      "cidr",
    ].sort(),
  );
  const port = (await t.store.get<Record<string, unknown>>(keys.port(n.id, "p"))).value!;
  assert.deepEqual(fieldsOf(port), [
    "createdAt",
    "id",
    "index",
    "ip",
    "mac",
    "network",
    "networkId",
    "networkTenant",
    "tenant",
  ]);
});

Deno.test("IPv6 only: a /64 without pools allocates from its first 65,536 addresses, at realistic size", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("v6", "fd00:1::/64", { gateway: "fd00:1::1" }),
    ),
    201,
  );
  const ips = new Set<string>();
  const ports = await Promise.all(
    Array.from(
      { length: 300 },
      (_, i) => t.call("PUT", `tenants/acme/networks/v6/ports/p${i}`, {}),
    ),
  );
  for (const r of ports) ips.add(must(r, 201).ip);
  assert.equal(ips.size, 300);
  assert.ok(!ips.has("fd00:1::1"), "the gateway is never handed out");
  const last = must(
    await t.call("PUT", "tenants/acme/networks/v6/ports/last", { ip: "fd00:1::1:0" }),
    201,
  );
  assert.equal(last.address, "fd00:1::1:0/64");
  mustFail(
    await t.call("PUT", "tenants/acme/networks/v6/ports/out", { ip: "fd00:1::1:1" }),
    400,
    "invalid_request",
    { field: "ip", message: /outside the allocation pools/ },
  );
  const n = must(await t.call("GET", "tenants/acme/networks/v6"), 200);
  assert.deepEqual(n.usage, { total: 65535, used: 301, free: 65234 });
});

Deno.test("dual stack attack: a node's conflict report names a port's IPv6 address only if the port holds it", async () => {
  using t = await world();
  for (const node of ["worker1", "worker2"]) {
    const token = TOKEN[node as "worker1" | "worker2"];
    must(await t.call("PUT", `nodes/${node}`, { underlayIp: "192.168.1.9" }, token), 201);
  }
  const p = must(await t.call("PUT", `${DUAL}/ports/r1`, { node: "worker2" }), 201);
  const item = (value: string) => ({
    networkId: p.networkId,
    tenant: "acme",
    id: "r1",
    field: "ip",
    value,
    reason: "local",
  });
  const r = must(
    await t.call("PUT", "nodes/worker1/conflicts", {
      items: [item(p.ip6), item("fd00:5::77")],
    }, TOKEN.worker1),
    200,
  );
  assert.deepEqual(r.items.map((i: { value: string }) => i.value), [p.ip6]);
  assert.equal(r.ignored, 1, "an IPv6 address the port does not hold is no claim");
});

/** The fields a stored record holds a value for (JSON stores, like etcd's, drop the undefined). */
function fieldsOf(record: Record<string, unknown>): string[] {
  return Object.keys(record).filter((k) => record[k] !== undefined).sort();
}

Deno.test("dual stack: an MTU below IPv6's minimum of 1280 is refused on a network with IPv6, naming mtu", async () => {
  using t = await world();
  const req = attempt(t);
  for (
    const [name, cidr, extra] of [
      ["small6", "fd00:7::/64", {}],
      ["smalldual", "10.7.0.0/24", { cidr6: "fd00:8::/64" }],
    ] as const
  ) {
    mustFail(
      await req("POST", "tenants/acme/networks", net(name, cidr, { ...extra, mtu: 1200 })),
      400,
      "invalid_request",
      { field: "mtu", message: /1200 .*below 1280.*IPv6/ },
    );
  }
  // The network as it would become is checked on a change too, and the record stays as it was.
  mustFail(
    await req("PATCH", DUAL, { mtu: 1279 }),
    400,
    "invalid_request",
    { field: "mtu", message: /1279 .*below 1280/ },
  );
  assert.equal(must(await t.call("GET", DUAL), 200).mtu, 1450);
  // IPv4 alone has no such floor.
  must(await t.call("POST", "tenants/acme/networks", net("v4", "10.8.0.0/24", { mtu: 1200 })), 201);
});

Deno.test("dual stack: a VXLAN network with IPv6 on a 1280-byte underlay is refused with the MTU it would get and what to do", async () => {
  using t = await testApp({ tenants: ["acme"], underlayMtu: 1280 });
  mustFail(
    await attempt(t)("POST", "tenants/acme/networks", net("v6", "fd00:9::/64")),
    400,
    "invalid_request",
    { field: "mtu", message: /1230 .*below 1280.*underlay/ },
  );
});
