/**
 * Routers (issue 16): the tenant attacks first (reaching another tenant's networks through a router,
 * overlapping CIDRs, public networks, a network claimed by two routers), each refused with nothing
 * changed; then what a tenant relies on: the record, its update, the feed event, the agents' list.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { keys, type NetworkRecord } from "./model.ts";
import { must, mustFail, net, type TestApp, testApp, TOKEN, unchanged } from "./test_support.ts";

const ACME = "tenants/acme";
const GLOBEX = "tenants/globex";

/**
 * acme: red 10.1.0.0/24 and blue 10.2.0.0/24 (gateways .1), nogw 10.9.0.0/24, and wide
 * 10.1.0.0/16, which overlaps red: a record as a manager from before the rule that a tenant's
 * networks are disjoint left it (the API refuses to make it now), written to the store directly;
 * globex: red 10.1.0.0/24 (the same CIDR as acme's), green 10.3.0.0/24; admin: public shared.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  const nets: [string, ReturnType<typeof net>][] = [
    [ACME, net("red", "10.1.0.0/24", { gateway: "10.1.0.1" })],
    [ACME, net("blue", "10.2.0.0/24", { gateway: "10.2.0.1" })],
    [ACME, net("nogw", "10.9.0.0/24")],
    [GLOBEX, net("red", "10.1.0.0/24", { gateway: "10.1.0.1" })],
    [GLOBEX, net("green", "10.3.0.0/24", { gateway: "10.3.0.1" })],
    ["tenants/admin", net("shared", "10.200.0.0/24", { gateway: "10.200.0.1", public: true })],
  ];
  for (const [tenant, body] of nets) must(await t.call("POST", `${tenant}/networks`, body), 201);
  const red = (await t.store.get<NetworkRecord>(keys.network("acme", "red"))).value!;
  const wide = { ...red, id: crypto.randomUUID(), name: "wide", cidr: "10.1.0.0/16" };
  await t.store.commit([], [{ type: "set", key: keys.network("acme", "wide"), value: wide }]);
  return t;
}

function attempt(t: TestApp) {
  return (method: string, path: string, body?: unknown, token?: string) =>
    unchanged(t, () => t.call(method, path, body, token));
}

Deno.test("attack: a router naming another tenant's network finds none (404), whoever asks", async () => {
  using t = await world();
  const req = attempt(t);
  // globex's green does not exist in acme: a router connects only the path tenant's networks.
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "r", networks: ["red", "green"] }, TOKEN.acme),
    404,
    "not_found",
    { field: "networks[1]", message: /"green" does not exist in tenant "acme"/ },
  );
  // Not even an admin can join two tenants' networks: there is no syntax for another's network.
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "r", networks: ["red", "green"] }, TOKEN.admin),
    404,
    "not_found",
  );
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "r", networks: ["red", "globex/green"] }),
    400,
    "invalid_request",
  );
  // A tenant cannot make or read routers in another tenant's path.
  mustFail(
    await req("POST", `${GLOBEX}/routers`, { name: "r", networks: ["red", "green"] }, TOKEN.acme),
    403,
    "forbidden",
  );
  must(await t.call("POST", `${GLOBEX}/routers`, { name: "g", networks: ["red", "green"] }), 201);
  mustFail(await req("GET", `${GLOBEX}/routers/g`, undefined, TOKEN.acme), 403, "forbidden");
  mustFail(await req("GET", "routers", undefined, TOKEN.acme), 403, "forbidden");
  mustFail(
    await req("PUT", `${GLOBEX}/routers/g`, { networks: ["red"] }, TOKEN.acme),
    403,
    "forbidden",
  );
  mustFail(await req("DELETE", `${GLOBEX}/routers/g`, undefined, TOKEN.acme), 403, "forbidden");
});

Deno.test("attack: networks whose CIDRs overlap are refused (409), the first pair named", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req(
      "POST",
      `${ACME}/routers`,
      { name: "r", networks: ["red", "blue", "wide"] },
      TOKEN.acme,
    ),
    409,
    "conflict",
    {
      field: "networks[2]",
      message: /"red" \(10\.1\.0\.0\/24\) and "wide" \(10\.1\.0\.0\/16\) overlap/,
    },
  );
  must(
    await t.call("POST", `${ACME}/routers`, { name: "r", networks: ["red", "blue"] }, TOKEN.acme),
    201,
  );
  // Nor can an update bring one in.
  mustFail(
    await req("PUT", `${ACME}/routers/r`, { networks: ["red", "blue", "wide"] }, TOKEN.acme),
    409,
    "conflict",
  );
});

Deno.test("attack: a public network (other tenants' ports on it) is refused on a router", async () => {
  using t = await world();
  const req = attempt(t);
  // acme cannot name it (it is not acme's); its owner may not route it either.
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "r", networks: ["red", "shared"] }, TOKEN.acme),
    404,
    "not_found",
  );
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("own", "10.5.0.0/24", { gateway: "10.5.0.1" }),
    ),
    201,
  );
  mustFail(
    await req("POST", "tenants/admin/routers", { name: "r", networks: ["own", "shared"] }),
    400,
    "invalid_request",
    { field: "networks[1]", message: /public/ },
  );
});

Deno.test("attack: a network already on one router cannot be taken by another (409)", async () => {
  using t = await world();
  must(
    await t.call("POST", `${ACME}/routers`, { name: "a", networks: ["red", "blue"] }, TOKEN.acme),
    201,
  );
  must(
    await t.call("POST", `${ACME}/networks`, net("third", "10.4.0.0/24", { gateway: "10.4.0.1" })),
    201,
  );
  const req = attempt(t);
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "b", networks: ["third", "blue"] }, TOKEN.acme),
    409,
    "in_use",
    { field: "networks[1]", message: /already connected by router "a"/ },
  );
  // Deleting a connected network is refused until the router lets it go.
  mustFail(await req("DELETE", `${ACME}/networks/blue`, undefined, TOKEN.acme), 409, "in_use", {
    message: /router "a" connects it/,
  });
  must(await t.call("PUT", `${ACME}/routers/a`, { networks: ["red"] }, TOKEN.acme), 200);
  must(await t.call("DELETE", `${ACME}/networks/blue`, undefined, TOKEN.acme), 204);
  // red is still a's; third may join b on its own.
  must(
    await t.call("POST", `${ACME}/routers`, { name: "b", networks: ["third"] }, TOKEN.acme),
    201,
  );
});

Deno.test("a network without a gateway and malformed static routes are refused with the field", async () => {
  using t = await world();
  const req = attempt(t);
  const post = (body: unknown) => req("POST", `${ACME}/routers`, body, TOKEN.acme);
  mustFail(await post({ name: "r", networks: ["red", "nogw"] }), 400, "invalid_request", {
    field: "networks[1]",
    message: /no gateway/,
  });
  mustFail(await post({ name: "r", networks: ["red", "red"] }), 400, "invalid_request", {
    field: "networks[1]",
    message: /listed twice/,
  });
  const withRoute = (dst: string, via: string) => ({
    name: "r",
    networks: ["red", "blue"],
    routes: [{ dst, via }],
  });
  const cases: [string, string, string, RegExp][] = [
    ["10.7.0.0/33", "10.1.0.5", "routes[0].dst", /./],
    ["10.7.0.1/24", "10.1.0.5", "routes[0].dst", /host bits/],
    ["fd00::/64", "10.1.0.5", "routes[0].via", /10.1.0.5 is IPv4 but dst fd00::\/64 is IPv6/],
    ["10.7.0.0/24", "fd00::5", "routes[0].via", /fd00::5 is IPv6 but dst 10.7.0.0\/24 is IPv4/],
    ["10.7.0.0/24", "10.8.0.5", "routes[0].via", /not an address in a connected network/],
    ["10.7.0.0/24", "10.1.0.1", "routes[0].via", /gateway of network "red"/],
    ["10.1.0.0/16", "10.1.0.5", "routes[0].via", /lead to itself/],
  ];
  for (const [dst, via, field, message] of cases) {
    mustFail(await post(withRoute(dst, via)), 400, "invalid_request", { field, message });
  }
});

Deno.test("a router: created, listed, replaced and deleted; each change on the feed for the agents", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor as string;
  const created = must(
    await t.call("POST", `${ACME}/routers`, {
      name: "planes",
      networks: ["red", "blue"],
      routes: [{ dst: "10.7.0.0/24", via: "10.2.0.9" }],
    }, TOKEN.acme),
    201,
  );
  assert.deepEqual(
    created.networks.map((
      n: { name: string; cidr: string; gateway: string },
    ) => [n.name, n.cidr, n.gateway]),
    [
      ["red", "10.1.0.0/24", "10.1.0.1"],
      ["blue", "10.2.0.0/24", "10.2.0.1"],
    ],
  );
  assert.deepEqual(created.routes, [{ dst: "10.7.0.0/24", via: "10.2.0.9" }]);
  const listed = must(await t.call("GET", `${ACME}/routers`, undefined, TOKEN.acme), 200).items;
  assert.deepEqual(listed, [created]);
  // The agents read every tenant's routers.
  assert.deepEqual(must(await t.call("GET", "routers", undefined, TOKEN.worker1), 200).items, [
    created,
  ]);
  const replaced = must(
    await t.call("PUT", `${ACME}/routers/planes`, { networks: ["blue"] }, TOKEN.acme),
    200,
  );
  assert.deepEqual(replaced.routes, []);
  assert.equal(replaced.createdAt, created.createdAt);
  must(await t.call("DELETE", `${ACME}/routers/planes`, undefined, TOKEN.acme), 204);
  mustFail(await t.call("GET", `${ACME}/routers/planes`, undefined, TOKEN.acme), 404, "not_found");
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const events = page.events.filter((e: { type: string }) => e.type === "router");
  assert.deepEqual(
    events.map((
      e: { op: string; router: { networks: unknown[] } },
    ) => [e.op, e.router.networks.length]),
    [
      ["put", 2],
      ["put", 1],
      ["delete", 1],
    ],
  );
  // A network that left every router can be routed by another one again.
  must(
    await t.call(
      "POST",
      `${ACME}/routers`,
      { name: "again", networks: ["red", "blue"] },
      TOKEN.acme,
    ),
    201,
  );
  // The store check finds routers and their index consistent, and finds an index gone astray
  // (world's hand-made network "wide" has problems of its own, not about routers).
  const routerProblems = async () =>
    (await checkStore(t.store)).problems.filter((p) => p.includes("router"));
  assert.deepEqual(await routerProblems(), []);
  const red = created.networks[0].id as string;
  await t.store.commit([], [{ type: "delete", key: keys.routerOfNetwork(red) }]);
  assert.deepEqual(await routerProblems(), [
    `router "acme/again" connects network ${red}, which is not indexed as its`,
  ]);
});

/**
 * IPv6: acme's red6 (dual stack: 10.4.0.0/24 and fd00:4::/64) and blue6 (IPv6 only, fd00:5::/64);
 * globex's v6 has the same IPv6 CIDR as blue6.
 */
async function world6(): Promise<TestApp> {
  const t = await world();
  const nets: [string, ReturnType<typeof net>][] = [
    [
      ACME,
      net("red6", "10.4.0.0/24", {
        gateway: "10.4.0.1",
        cidr6: "fd00:4::/64",
        gateway6: "fd00:4::1",
      }),
    ],
    [ACME, net("blue6", "fd00:5::/64", { gateway: "fd00:5::1" })],
    [GLOBEX, net("v6", "fd00:5::/64", { gateway: "fd00:5::1" })],
  ];
  for (const [tenant, body] of nets) must(await t.call("POST", `${tenant}/networks`, body), 201);
  return t;
}

Deno.test("attack: an IPv6 static route cannot lead into another tenant's network (400), nor can its network be named", async () => {
  using t = await world6();
  const req = attempt(t);
  const post = (body: unknown) => req("POST", `${ACME}/routers`, body, TOKEN.acme);
  // fd00:6::9 is in no network of acme's router (globex could own it): refused, nothing changed.
  mustFail(
    await post({
      name: "r",
      networks: ["red6", "blue6"],
      routes: [{ dst: "fd00:9::/48", via: "fd00:6::9" }],
    }),
    400,
    "invalid_request",
    { field: "routes[0].via", message: /not an address in a connected network/ },
  );
  // globex's v6 has blue6's very CIDR: only acme's blue6 is ever the one a route names.
  mustFail(await post({ name: "r", networks: ["red6", "v6"] }), 404, "not_found", {
    field: "networks[1]",
  });
  const made = must(
    await t.call("POST", `${ACME}/routers`, {
      name: "r",
      networks: ["red6", "blue6"],
      routes: [{ dst: "fd00:9::/48", via: "fd00:5::9" }],
    }, TOKEN.acme),
    201,
  );
  assert.deepEqual(made.routes, [{ dst: "fd00:9::/48", via: "fd00:5::9" }]);
});

Deno.test("attack: IPv6 subnets that overlap are refused (409), per family", async () => {
  using t = await world6();
  // A record with an IPv6 CIDR around blue6's, as an older manager could have left it.
  const blue6 = (await t.store.get<NetworkRecord>(keys.network("acme", "blue6"))).value!;
  const wide6 = { ...blue6, id: crypto.randomUUID(), name: "wide6", cidr: "fd00::/16" };
  await t.store.commit([], [{ type: "set", key: keys.network("acme", "wide6"), value: wide6 }]);
  const req = attempt(t);
  mustFail(
    await req("POST", `${ACME}/routers`, { name: "r", networks: ["red6", "wide6"] }, TOKEN.acme),
    409,
    "conflict",
    { field: "networks[1]", message: /"red6" \(fd00:4::\/64\) and "wide6" \(fd00::\/16\) overlap/ },
  );
  // IPv4 and IPv6 subnets never overlap: red (10.1.0.0/24) and blue6 (fd00:5::/64) join.
  must(
    await t.call("POST", `${ACME}/routers`, { name: "r", networks: ["red", "blue6"] }, TOKEN.acme),
    201,
  );
});

Deno.test("an IPv6 router: a dual-stack network's IPv6 side and an IPv6-only network, its record and static routes", async () => {
  using t = await world6();
  const router = must(
    await t.call("POST", `${ACME}/routers`, {
      name: "r",
      networks: ["red6", "blue6", "blue"],
      routes: [{ dst: "FD00:9::/48", via: "fd00:5::9" }, { dst: "10.9.0.0/16", via: "10.2.0.9" }],
    }, TOKEN.acme),
    201,
  );
  assert.deepEqual(
    (router.networks as Record<string, string>[]).map((n) => [n.name, n.cidr, n.cidr6]),
    [["red6", "10.4.0.0/24", "fd00:4::/64"], ["blue6", "fd00:5::/64", undefined], [
      "blue",
      "10.2.0.0/24",
      undefined,
    ]],
  );
  assert.equal((router.networks as Record<string, string>[])[0].gateway6, "fd00:4::1");
  // Canonical, as the agents' flows compare them.
  assert.deepEqual(router.routes, [
    { dst: "fd00:9::/48", via: "fd00:5::9" },
    { dst: "10.9.0.0/16", via: "10.2.0.9" },
  ]);
  const req = attempt(t);
  const put = (routes: unknown) =>
    req("PUT", `${ACME}/routers/r`, { networks: ["red6", "blue6"], routes }, TOKEN.acme);
  const cases: [unknown, RegExp][] = [
    [[{ dst: "fd00:9::/48", via: "fd00:5::1" }], /gateway of network "blue6", the router itself/],
    [[{ dst: "fd00:9::/48", via: "fd00:4::1" }], /gateway of network "red6", the router itself/],
    [[{ dst: "fd00:5::/56", via: "fd00:5::9" }], /lies inside fd00:5::\/56/],
    [[{ dst: "fd00:9::/48", via: "10.4.0.9" }], /is IPv4 but dst fd00:9::\/48 is IPv6/],
  ];
  for (const [routes, message] of cases) {
    mustFail(await put(routes), 400, "invalid_request", { field: "routes[0].via", message });
  }
  await checkStore(t.store);
});
