/**
 * Every bad request gets a clear 4xx in the one error shape, and writes nothing: each call below
 * runs between two dumps of the whole store (keys, values and versions) that must be equal.
 */
import assert from "node:assert/strict";
import { MALFORMED_CIDRS, MALFORMED_IPS, MALFORMED_MACS } from "../common/address_cases.ts";
import { must, mustFail, net, type TestApp, testApp, TOKEN, unchanged } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

/**
 * acme with network blue (10.1.0.0/24, gateway .1) holding port p1 (.2) and group g (.3), a full
 * network tiny, a public network shared, a physnet phys1.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201).ip, "10.1.0.2");
  must(await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 1 }), 201);
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("tiny", "10.3.0.0/30", { gateway: "10.3.0.1" }),
    ),
    201,
  );
  must(await t.call("PUT", "tenants/acme/networks/tiny/ports/t1", {}), 201);
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  must(
    await t.call("POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] }),
    201,
  );
  return t;
}

/** A request that must change nothing. */
function attempt(t: TestApp) {
  return (method: string, path: string, body?: unknown, token?: string | null) =>
    unchanged(t, () => t.call(method, path, body, token));
}

/** The counters a user would look at, all as world() left them. */
async function assertWorldIntact(t: TestApp) {
  const acme = must(await t.call("GET", "tenants/acme"), 200);
  assert.deepEqual([acme.networks, acme.ipGroups], [2, 1]);
  assert.equal(must(await t.call("GET", "tenants/globex"), 200).networks, 0);
  assert.deepEqual(must(await t.call("GET", BLUE), 200).usage, { total: 253, used: 2, free: 251 });
  assert.deepEqual(must(await t.call("GET", "tenants/acme/networks/tiny"), 200).usage, {
    total: 1,
    used: 1,
    free: 0,
  });
  const ports = must(await t.call("GET", "ports"), 200).items.map((p: { id: string }) => p.id)
    .sort();
  assert.deepEqual(ports, ["p1", "t1"]);
  assert.deepEqual(must(await t.call("GET", "tenants"), 200).items.length, 3);
  assert.deepEqual(must(await t.call("GET", "physnets/phys1"), 200).usage, {
    total: 100,
    used: 0,
    free: 100,
  });
  // The next address is the one after p1's and g's: failed attempts moved no cursor.
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/next`, {}), 201).ip, "10.1.0.4");
}

Deno.test("bad input: malformed, empty, oversized and mistyped bodies", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("POST", "tenants", "{"), 400, "invalid_json", { message: /not valid JSON/ });
  mustFail(await req("PUT", `${BLUE}/ports/p2`, "{ip: 10.1.0.9}"), 400, "invalid_json");
  mustFail(await req("POST", "tenants/acme/networks", ""), 400, "invalid_json", {
    message: /needs a JSON body/,
  });
  const big = JSON.stringify({
    name: "huge",
    cidr: "10.9.0.0/24",
    description: "x".repeat(1 << 20),
  });
  mustFail(await req("POST", "tenants/acme/networks", big), 413, "body_too_large");
  mustFail(await req("POST", "tenants", []), 400, "invalid_request");
  mustFail(await req("POST", "tenants", "null"), 400, "invalid_request");
  mustFail(await req("POST", "tenants", { name: 7 }), 400, "invalid_request", { field: "name" });
  mustFail(
    await req("POST", "tenants/acme/networks", net("x", "10.9.0.0/24", { mtu: 100 })),
    400,
    "invalid_request",
    {
      field: "mtu",
    },
  );
  await assertWorldIntact(t);
});

Deno.test("bad input: unknown fields are named", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("POST", "tenants", { name: "new", colour: "red" }), 400, "invalid_request", {
    field: "colour",
    message: /unknown field/,
  });
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("x", "10.9.0.0/24", { dns: { nameserver: ["1.1.1.1"] } }),
    ),
    400,
    "invalid_request",
    { field: "dns.nameserver" },
  );
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { address: "10.1.0.9" }), 400, "invalid_request", {
    field: "address",
  });
  mustFail(await req("GET", "ports?nod=worker1"), 400, "invalid_request", { field: "query.nod" });
  await assertWorldIntact(t);
});

Deno.test("bad input: invalid names in the path and the body", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("GET", "tenants/Acme"), 400, "invalid_request", {
    field: "tenant",
    message: /lowercase/,
  });
  mustFail(await req("PUT", "tenants/acme/networks/Blue/ports/p2", {}), 400, "invalid_request", {
    field: "network",
  });
  mustFail(await req("PUT", `${BLUE}/ports/-p2`, {}), 400, "invalid_request", { field: "port" });
  mustFail(
    await req("PUT", "nodes/Worker1", { underlayIp: "192.168.1.1" }),
    400,
    "invalid_request",
    { field: "node" },
  );
  mustFail(await req("POST", "tenants", { name: "Acme" }), 400, "invalid_request", {
    field: "name",
  });
  mustFail(await req("POST", "tenants", { name: "a_b" }), 400, "invalid_request", {
    field: "name",
  });
  mustFail(
    await req("POST", "tenants/acme/networks", net("Red", "10.9.0.0/24")),
    400,
    "invalid_request",
    {
      field: "name",
    },
  );
  mustFail(await req("POST", "physnets", { name: "PHYS" }), 400, "invalid_request", {
    field: "name",
  });
  mustFail(
    await req("PUT", `${BLUE}/ports/p2`, { mac: "02:00:00:00:00:0G" }),
    400,
    "invalid_request",
    { field: "mac" },
  );
  mustFail(await req("GET", "ports?pod=just-a-name"), 400, "invalid_request", {
    field: "query.pod",
  });
  await assertWorldIntact(t);
});

Deno.test("bad input: CIDRs, gateways, pools and excludes", async () => {
  using t = await world();
  const req = attempt(t);
  const create = (more: Record<string, unknown>, cidr = "10.9.0.0/24") =>
    req("POST", "tenants/acme/networks", net("x", cidr, more));
  for (
    const cidr of ["10.9.0.0", "10.9.0/24", "10.9.0.0/33", "banana/8", "010.9.0.0/24", "10.9.0.0/x"]
  ) {
    mustFail(await create({}, cidr), 400, "invalid_request", { field: "cidr" });
  }
  mustFail(await create({}, "10.9.0.5/24"), 400, "invalid_request", {
    field: "cidr",
    message: /host bits set; the network is 10\.9\.0\.0\/24/,
  });
  mustFail(await create({}, "10.9.0.0/31"), 400, "invalid_request", {
    field: "cidr",
    message: /too small/,
  });
  mustFail(await create({}, "10.1.0.128/25"), 400, "invalid_request", {
    field: "cidr",
    message: /"blue" \(10\.1\.0\.0\/24\)/,
  });
  mustFail(await create({}, "10.0.0.0/8"), 400, "invalid_request", {
    field: "cidr",
    message: /"blue"|"tiny"/,
  });
  mustFail(await create({}, "10.200.0.0/16"), 400, "invalid_request", {
    field: "cidr",
    message: /"shared".*public/,
  });

  mustFail(await create({ gateway: "10.8.0.1" }), 400, "invalid_request", {
    field: "gateway",
    message: /outside/,
  });
  mustFail(await create({ gateway: "10.9.0.0" }), 400, "invalid_request", {
    field: "gateway",
    message: /network address/,
  });
  mustFail(await create({ gateway: "10.9.0.255" }), 400, "invalid_request", {
    field: "gateway",
    message: /broadcast/,
  });
  mustFail(await create({ gateway: "10.9.0.1.1" }), 400, "invalid_request", { field: "gateway" });

  const pools = (...p: [string, string][]) => ({
    allocationPools: p.map(([start, end]) => ({ start, end })),
  });
  mustFail(await create(pools(["10.9.0.10", "10.9.1.10"])), 400, "invalid_request", {
    field: "allocationPools[0].end",
    message: /outside/,
  });
  mustFail(
    await create(pools(["10.9.0.10", "10.9.0.20"], ["10.9.0.20", "10.9.0.30"])),
    400,
    "invalid_request",
    {
      field: "allocationPools[1]",
      message: /overlaps allocationPools\[0\]/,
    },
  );
  mustFail(await create(pools(["10.9.0.0", "10.9.0.20"])), 400, "invalid_request", {
    field: "allocationPools[0]",
    message: /network address/,
  });
  mustFail(await create(pools(["10.9.0.200", "10.9.0.255"])), 400, "invalid_request", {
    field: "allocationPools[0]",
    message: /broadcast/,
  });
  mustFail(await create(pools(["10.9.0.20", "10.9.0.10"])), 400, "invalid_request", {
    field: "allocationPools[0]",
    message: /after/,
  });
  mustFail(await create({ excludes: ["10.9.0.5", "10.8.0.5"] }), 400, "invalid_request", {
    field: "excludes[1]",
  });
  mustFail(await create({ excludes: ["10.9.0.9-10.9.0.5"] }), 400, "invalid_request", {
    field: "excludes[0]",
  });
  mustFail(await create({ excludes: ["10.9.0.0/23"] }), 400, "invalid_request", {
    field: "excludes[0]",
  });
  mustFail(await create({ routes: [{ dst: "fd00::/8" }] }), 400, "invalid_request", {
    field: "routes[0].dst",
  });
  mustFail(
    await create({ routes: [{ dst: "0.0.0.0/0", via: "10.8.0.1" }] }),
    400,
    "invalid_request",
    {
      field: "routes[0].via",
    },
  );
  mustFail(await create({ dns: { nameservers: ["dns.example"] } }), 400, "invalid_request", {
    field: "dns.nameservers[0]",
  });
  await assertWorldIntact(t);
});

Deno.test("bad input: segments and physnets", async () => {
  using t = await world();
  const req = attempt(t);
  const create = (more: Record<string, unknown>) =>
    req("POST", "tenants/acme/networks", net("x", "10.9.0.0/24", more));
  mustFail(await create({ physnet: "phys1" }), 400, "invalid_request", { field: "physnet" });
  mustFail(await create({ type: "vlan" }), 400, "invalid_request", { field: "physnet" });
  mustFail(await create({ type: "flat", physnet: "phys1", segmentId: 5 }), 400, "invalid_request", {
    field: "segmentId",
  });
  mustFail(
    await create({ type: "vlan", physnet: "phys1", segmentId: 4095 }),
    400,
    "invalid_request",
    {
      field: "segmentId",
    },
  );
  mustFail(await create({ type: "gre" }), 400, "invalid_request", { field: "type" });
  mustFail(await create({ segmentId: 5000 }), 409, "address_taken", {
    field: "segmentId",
    message: /"blue"/,
  });
  mustFail(await create({ segmentId: 0 }), 400, "invalid_request", { field: "segmentId" });
  const physnet = (vlanRanges: unknown) => req("POST", "physnets", { name: "phys2", vlanRanges });
  mustFail(
    await physnet([{ start: 10, end: 20 }, { start: 15, end: 30 }]),
    400,
    "invalid_request",
    {
      message: /overlaps/,
    },
  );
  mustFail(await physnet([{ start: 20, end: 10 }]), 400, "invalid_request", {
    field: "vlanRanges[0]",
  });
  mustFail(await physnet([{ start: 0, end: 10 }]), 400, "invalid_request", {
    field: "vlanRanges[0].start",
  });
  mustFail(await physnet([{ start: 1, end: 4095 }]), 400, "invalid_request", {
    field: "vlanRanges[0].end",
  });
  await assertWorldIntact(t);
});

Deno.test("bad input: fixed IPs, exhausted pools and IP groups", async () => {
  using t = await world();
  const req = attempt(t);
  const g = must(await t.call("GET", "tenants/acme/ipgroups/g"), 200).addresses[0].ip;
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { ip: "10.9.0.9" }), 400, "invalid_request", {
    field: "ip",
  });
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { ip: "10.1.0.300" }), 400, "invalid_request", {
    field: "ip",
  });
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { ip: "10.1.0.2" }), 409, "address_taken", {
    message: /"p1"/,
  });
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { ip: g }), 409, "address_taken", {
    message: /IP group "g"/,
  });
  mustFail(await req("PUT", `${BLUE}/ports/p1`, { ip: "10.1.0.9" }), 409, "conflict", {
    field: "ip",
  });
  mustFail(await req("PUT", "tenants/acme/networks/tiny/ports/t2", {}), 409, "pool_exhausted", {
    message: /"tiny".*exhausted \(1 of 1 in use\)/,
  });
  mustFail(await req("PUT", `${BLUE}/ports/p2`, { ipGroup: "nope" }), 400, "invalid_request", {
    field: "ipGroup",
  });
  mustFail(
    await req("PUT", `${BLUE}/ports/p2`, { ipGroup: "g", ip: "10.1.0.77" }),
    400,
    "invalid_request",
    {
      field: "ip",
    },
  );
  mustFail(
    await req("PUT", "tenants/acme/networks/tiny/ports/t2", { ipGroup: "g" }),
    400,
    "invalid_request",
    {
      field: "ipGroup",
      message: /belongs to network "blue"/,
    },
  );

  const group = (body: Record<string, unknown>) =>
    req("POST", "tenants/acme/ipgroups", { name: "h", ...body });
  mustFail(await group({ network: "blue" }), 400, "invalid_request", {
    message: /either addresses or size/,
  });
  mustFail(
    await group({ network: "blue", size: 1, addresses: ["10.1.0.50"] }),
    400,
    "invalid_request",
  );
  mustFail(await group({ network: "blue", size: 2000 }), 400, "invalid_request", { field: "size" });
  mustFail(await group({ network: "blue", size: 252 }), 409, "pool_exhausted", {
    field: "size",
    message: /only 251 free/,
  });
  mustFail(
    await group({ network: "blue", addresses: ["10.1.0.50", "10.1.0.50"] }),
    400,
    "invalid_request",
    {
      field: "addresses[1]",
    },
  );
  mustFail(
    await group({ network: "blue", addresses: ["10.1.0.50", "10.1.0.2"] }),
    409,
    "address_taken",
    {
      field: "addresses[1]",
      message: /port "p1"/,
    },
  );
  mustFail(await group({ network: "blue", addresses: ["10.1.0.1"] }), 409, "address_taken", {
    message: /the gateway/,
  });
  mustFail(await group({ network: "blue", addresses: ["10.1.1.1"] }), 400, "invalid_request", {
    field: "addresses[0]",
  });
  mustFail(await group({ name: "g", network: "blue", size: 1 }), 409, "already_exists", {
    field: "name",
  });
  mustFail(await req("PUT", "tenants/acme/ipgroups/g", { size: 2000 }), 400, "invalid_request", {
    field: "size",
  });
  mustFail(await req("PUT", "tenants/acme/ipgroups/g", { size: 253 }), 409, "pool_exhausted");
  mustFail(
    await req("PUT", "tenants/acme/ipgroups/g", { addresses: ["10.1.0.2"] }),
    409,
    "address_taken",
  );
  await assertWorldIntact(t);
});

Deno.test("bad input: unknown tenant, network, group, port and node", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("GET", "tenants/nope"), 404, "not_found", { message: /Tenant "nope"/ });
  mustFail(await req("POST", "tenants/nope/networks", net("x", "10.9.0.0/24")), 404, "not_found", {
    message: /Tenant "nope"/,
  });
  mustFail(await req("GET", "tenants/nope/networks"), 404, "not_found");
  mustFail(await req("PUT", "tenants/nope/networks/blue/ports/p2", {}), 404, "not_found");
  mustFail(await req("PUT", "tenants/nope/networks/shared/ports/p2", {}), 404, "not_found", {
    message: /"nope"/,
  });
  mustFail(await req("GET", "tenants/acme/networks/nope"), 404, "not_found", {
    message: /Network "nope"/,
  });
  mustFail(await req("PUT", "tenants/acme/networks/nope/ports/p2", {}), 404, "not_found");
  mustFail(await req("DELETE", "tenants/acme/networks/nope"), 404, "not_found");
  mustFail(await req("DELETE", `${BLUE}/ports/nope`), 404, "not_found");
  mustFail(await req("GET", "tenants/acme/ipgroups/nope"), 404, "not_found", {
    message: /IP group "nope"/,
  });
  mustFail(await req("PUT", "tenants/acme/ipgroups/nope", { size: 2 }), 404, "not_found");
  mustFail(await req("DELETE", "tenants/acme/ipgroups/nope"), 404, "not_found");
  mustFail(
    await req("POST", "tenants/acme/ipgroups", { name: "h", network: "nope", size: 1 }),
    404,
    "not_found",
  );
  mustFail(await req("GET", "tenants/nope/ipgroups"), 404, "not_found");
  mustFail(await req("DELETE", "physnets/nope"), 404, "not_found");
  mustFail(await req("DELETE", "nodes/nope"), 404, "not_found");
  await assertWorldIntact(t);
});

Deno.test("bad input: wrong token scope, refused while in use", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", "tenants/globex/networks", net("x", "10.9.0.0/24"), TOKEN.acme),
    403,
    "forbidden",
  );
  mustFail(await req("DELETE", "tenants/acme", undefined, TOKEN.acme), 403, "forbidden");
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("x", "10.9.0.0/24", { public: true }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
  );
  mustFail(
    await req("PUT", `${BLUE}/ports/p2`, { node: "worker2" }, TOKEN.worker1),
    403,
    "forbidden",
  );
  mustFail(await req("PUT", `${BLUE}/ports/p2`, {}, null), 401, "unauthorized");
  mustFail(await req("DELETE", "tenants/acme"), 409, "in_use");
  mustFail(await req("DELETE", BLUE), 409, "in_use");
  mustFail(await req("POST", "tenants", { name: "acme" }), 409, "already_exists");
  mustFail(
    await req("POST", "tenants/acme/networks", net("blue", "10.9.0.0/24")),
    409,
    "already_exists",
  );
  await assertWorldIntact(t);
});

Deno.test("bad input: a request too big for one store commit is a clear 400", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("wide", "20.0.0.0/8")), 201);
  const req = attempt(t);
  // Excludes are kept as ranges: a /9 of a /8 is one pair in the network record, not 2,048 chunks.
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("big", "10.0.0.0/8", {
        excludes: ["10.0.0.0/9"],
      }),
    ),
    201,
  );
  mustFail(
    await req("POST", "tenants/acme/ipgroups", { name: "g", network: "wide", size: 513 }),
    400,
    "invalid_request",
    { field: "size" },
  );
  assert.deepEqual(must(await t.call("GET", "tenants/acme"), 200).networks, 2);
  assert.equal(must(await t.call("GET", "tenants/acme/networks/wide"), 200).usage.used, 0);
  // The largest group fits one commit even when every address sits in a bitmap chunk of its own.
  const scattered = Array.from({ length: 512 }, (_, i) => `20.${i >> 4}.${(i & 15) << 4}.1`);
  const g = must(
    await t.call("POST", "tenants/acme/ipgroups", {
      name: "g",
      network: "wide",
      addresses: scattered,
    }),
    201,
  );
  assert.equal(g.size, 512);
});

Deno.test("bad input: malformed addresses, CIDRs and MACs (the shared attack table, ':::' first) are refused wherever the API takes one, naming the field", async () => {
  using t = await world();
  const req = attempt(t);
  const refused = async (method: string, path: string, body: unknown, field: string) => {
    const reply = await req(method, path, body);
    const what = `${method} ${path} ${JSON.stringify(body)}`;
    assert.ok(reply.status === 400 || reply.status === 422, `${what}: ${reply.status}`);
    assert.equal(reply.body?.error?.field, field, `${what}: ${JSON.stringify(reply.body)}`);
  };
  const nets = "tenants/acme/networks";
  for (const bad of [...MALFORMED_CIDRS, ...MALFORMED_IPS]) {
    await refused("POST", nets, net("x", bad), "cidr");
    await refused(
      "POST",
      nets,
      net("x", "10.9.0.0/24", { routes: [{ dst: bad }] }),
      "routes[0].dst",
    );
  }
  for (const bad of MALFORMED_IPS) {
    const ok = "10.9.0.0/24";
    await refused("POST", nets, net("x", ok, { gateway: bad }), "gateway");
    await refused(
      "POST",
      nets,
      net("x", ok, { allocationPools: [{ start: bad, end: "10.9.0.9" }] }),
      "allocationPools[0].start",
    );
    await refused(
      "POST",
      nets,
      net("x", ok, { routes: [{ dst: "10.8.0.0/16", via: bad }] }),
      "routes[0].via",
    );
    await refused(
      "POST",
      nets,
      net("x", ok, { dns: { nameservers: [bad] } }),
      "dns.nameservers[0]",
    );
    await refused("PUT", `${BLUE}/ports/p9`, { ip: bad }, "ip");
    await refused("POST", "tenants/acme/ipgroups", {
      name: "g9",
      network: "blue",
      addresses: [bad],
    }, "addresses[0]");
    await refused("PUT", "nodes/n9", { underlayIp: bad }, "underlayIp");
  }
  for (const bad of MALFORMED_MACS) await refused("PUT", `${BLUE}/ports/p9`, { mac: bad }, "mac");
  await assertWorldIntact(t);
});
