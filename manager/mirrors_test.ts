/**
 * Port mirrors (issue 30): the hostile ones first, each as the attacker's request, then the refusal
 * (a clear 4xx in the one error shape) and that nothing changed; then bad input; then what a
 * tenant relies on: the record, the feed event the agents follow, the agents' list, the delete.
 */
import assert from "node:assert/strict";
import { seenBy } from "./console/console.ts";
import {
  attempt,
  CLUSTER_TOKEN,
  CLUSTER_TOKENS,
  must,
  mustFail,
  net,
  type TestApp,
  testApp,
  TOKEN,
} from "./test_support.ts";

const ACME = "tenants/acme";
const GLOBEX = "tenants/globex";

/**
 * acme: network blue with ports web and tap (worker1) and far (worker2); globex: network green
 * with ports db and gtap (worker1); a public network shared of admin, with acme's port pub and
 * globex's port gpub (worker1).
 */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", `${ACME}/networks`, net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", `${GLOBEX}/networks`, net("green", "10.2.0.0/24")), 201);
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  const bind = async (path: string, node: string) => must(await t.call("PUT", path, { node }), 201);
  await bind(`${ACME}/networks/blue/ports/web`, "worker1");
  await bind(`${ACME}/networks/blue/ports/tap`, "worker1");
  await bind(`${ACME}/networks/blue/ports/far`, "worker2");
  await bind(`${GLOBEX}/networks/green/ports/db`, "worker1");
  await bind(`${GLOBEX}/networks/green/ports/gtap`, "worker1");
  await bind(`${ACME}/networks/shared/ports/pub`, "worker1");
  await bind(`${GLOBEX}/networks/shared/ports/gpub`, "worker1");
  return t;
}

const mirror = (more: Record<string, unknown> = {}) => ({
  name: "m1",
  sources: [{ network: "blue", port: "web" }],
  direction: "both",
  collector: { network: "blue", port: "tap" },
  ...more,
});

// ---- attacks

Deno.test("attack: a tenant cannot mirror another tenant's port (private network or public)", async () => {
  using t = await world();
  const req = attempt(t);
  // globex's own path, naming acme's port on acme's private network: the network is not found.
  mustFail(
    await req("POST", `${GLOBEX}/mirrors`, {
      ...mirror(),
      sources: [{ network: "blue", port: "web" }],
      collector: { network: "green", port: "gtap" },
    }, TOKEN.globex),
    404,
    "not_found",
  );
  // On the public network both can name: acme's port is not globex's.
  mustFail(
    await req("POST", `${GLOBEX}/mirrors`, {
      ...mirror(),
      sources: [{ network: "shared", port: "pub" }],
      collector: { network: "green", port: "gtap" },
    }, TOKEN.globex),
    404,
    "not_found",
    { field: "sources[0]", message: /only its own tenant's ports/ },
  );
  // acme's path with globex's token: refused before anything is read.
  mustFail(await req("POST", `${ACME}/mirrors`, mirror(), TOKEN.globex), 403, "forbidden");
  // Not even an admin mirrors a port of another tenant than the mirror's.
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...mirror(),
      sources: [{ network: "shared", port: "gpub" }],
    }, TOKEN.admin),
    404,
    "not_found",
    { field: "sources[0]" },
  );
});

Deno.test("attack: a tenant cannot use another tenant's port as its collector", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...mirror(),
      collector: { network: "shared", port: "gpub" },
    }, TOKEN.acme),
    404,
    "not_found",
    { field: "collector", message: /only its own tenant's ports/ },
  );
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...mirror(),
      collector: { network: "green", port: "gtap" },
    }, TOKEN.acme),
    404,
    "not_found",
  );
});

Deno.test("attack: a tenant cannot send copies to an address; an admin can, over GRE, ERSPAN or VXLAN", async () => {
  using t = await world();
  const req = attempt(t);
  const remote = (ip: string, protocol = "gre", key: Record<string, number> = {}) =>
    mirror({ collector: { remote: { ip, protocol, ...key } } });
  for (const protocol of ["gre", "erspan", "vxlan"]) {
    refusedRemote(
      await req("POST", `${ACME}/mirrors`, remote("10.2.0.5", protocol, { vni: 5 }), TOKEN.acme),
    );
  }
  mustFail(
    await req("POST", `${ACME}/mirrors`, remote("192.0.2.250", "vxlan"), TOKEN.admin),
    400,
    "invalid_request",
    { field: "collector.remote.vni", message: /needs the VNI/ },
  );
  mustFail(
    await req("POST", `${ACME}/mirrors`, remote("192.0.2.250", "gre", { session: 3 }), TOKEN.admin),
    400,
    "invalid_request",
    { field: "collector.remote.session", message: /for protocol erspan only, not gre/ },
  );
  mustFail(
    await req("POST", `${ACME}/mirrors`, remote("192.0.2.250", "erspan", { vni: 3 }), TOKEN.admin),
    400,
    "invalid_request",
    { field: "collector.remote.vni", message: /for protocol vxlan only, not erspan/ },
  );
  for (
    const [name, protocol, key] of [["e1", "erspan", { session: 7 }], ["v1", "vxlan", {
      vni: 5001,
    }]] as const
  ) {
    const body = { ...remote("192.0.2.250", protocol, key), name };
    const made = must(await t.call("POST", `${ACME}/mirrors`, body, TOKEN.admin), 201);
    assert.deepEqual(made.collector, { remote: { ip: "192.0.2.250", protocol, ...key } });
    must(await t.call("DELETE", `${ACME}/mirrors/${name}`, undefined, TOKEN.admin), 204);
  }
  mustFail(
    await req("POST", `${ACME}/mirrors`, remote("fd00::1"), TOKEN.admin),
    400,
    "invalid_request",
    { field: "collector.remote.ip", message: /not an IPv4 address/ },
  );
  // An admin's remote mirror still names only the tenant's own ports, on any node.
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...remote("192.0.2.250"),
      sources: [{ network: "shared", port: "gpub" }],
    }, TOKEN.admin),
    404,
    "not_found",
    { field: "sources[0]" },
  );
  const made = must(
    await t.call("POST", `${ACME}/mirrors`, {
      ...remote("192.0.2.250"),
      sources: [{ network: "blue", port: "web" }, { network: "blue", port: "far" }],
    }, TOKEN.admin),
    201,
  );
  assert.deepEqual(made.collector, { remote: { ip: "192.0.2.250", protocol: "gre" } });
  // The tenant sees it, and may delete it.
  assert.deepEqual(
    must(await t.call("GET", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 200),
    made,
  );
  must(await t.call("DELETE", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 204);
});

Deno.test("attack: an admin's remote collector is never a node: its tunnel port would take the copies into a network", async () => {
  using t = await world();
  const req = attempt(t);
  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.0.2.12" }, TOKEN.worker2), 201);
  const { segmentId } = must(await t.call("GET", `${GLOBEX}/networks/green`), 200);
  // VXLAN with the VNI of globex's network, to a node: decapsulated there into globex's network.
  for (
    const remote of [
      { ip: "192.0.2.12", protocol: "vxlan", vni: segmentId },
      { ip: "192.0.2.12", protocol: "gre" },
      { ip: "192.0.2.12", protocol: "erspan" },
    ]
  ) {
    mustFail(
      await req("POST", `${ACME}/mirrors`, mirror({ collector: { remote } }), TOKEN.admin),
      409,
      "conflict",
      { field: "collector.remote.ip", message: /is node "worker2"'s underlay address/ },
    );
  }
  assert.deepEqual(must(await t.call("GET", `${ACME}/mirrors`), 200).items, []);
});

function refusedRemote(reply: { status: number; body: unknown }) {
  mustFail(reply, 403, "forbidden", {
    field: "collector.remote",
    message: /Only an admin may send a mirror's copies to a remote address/,
  });
}

Deno.test("attack: another tenant neither reads, lists, deletes nor is fed a tenant's mirror", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor as string;
  must(await t.call("POST", `${ACME}/mirrors`, mirror(), TOKEN.acme), 201);
  const req = attempt(t);
  mustFail(await req("GET", `${ACME}/mirrors/m1`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(await req("GET", `${ACME}/mirrors`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(await req("DELETE", `${ACME}/mirrors/m1`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(await req("GET", "mirrors", undefined, TOKEN.globex), 403, "forbidden");
  mustFail(
    await req("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.globex),
    403,
    "forbidden",
  );
  assert.deepEqual(must(await t.call("GET", `${GLOBEX}/mirrors`, undefined, TOKEN.globex), 200), {
    items: [],
  });
});

// ---- bad input

Deno.test("bad input: unknown port, direction, self as collector, filter, twice: a clear 4xx, nothing changed", async () => {
  using t = await world();
  const req = attempt(t);
  const post = (body: unknown) => req("POST", `${ACME}/mirrors`, body, TOKEN.acme);
  mustFail(
    await post(mirror({ sources: [{ network: "blue", port: "nope" }] })),
    404,
    "not_found",
    { field: "sources[0]", message: /Port "nope"/ },
  );
  mustFail(
    await post(mirror({ collector: { network: "nonet", port: "tap" } })),
    404,
    "not_found",
    { message: /Network "nonet"/ },
  );
  mustFail(await post(mirror({ direction: "sideways" })), 400, "invalid_request", {
    field: "direction",
  });
  mustFail(
    await post(mirror({ collector: { network: "blue", port: "web" } })),
    400,
    "invalid_request",
    { field: "collector", message: /both a source and the collector/ },
  );
  mustFail(
    await post(
      mirror({ sources: [{ network: "blue", port: "web" }, { network: "blue", port: "web" }] }),
    ),
    400,
    "invalid_request",
    { field: "sources[1]", message: /listed twice/ },
  );
  mustFail(await post(mirror({ sources: [] })), 400, "invalid_request", { field: "sources" });
  mustFail(
    await post(mirror({ sources: [{ network: "blue", port: "far" }] })),
    409,
    "conflict",
    { field: "sources[0]", message: /node "worker2".*node "worker1"/ },
  );
  mustFail(await post({ ...mirror(), extra: 1 }), 400, "invalid_request");
  mustFail(await req("GET", `${ACME}/mirrors/none`, undefined, TOKEN.acme), 404, "not_found");
  mustFail(await req("DELETE", `${ACME}/mirrors/none`, undefined, TOKEN.acme), 404, "not_found");
});

Deno.test("bad input: a collector is never a source, of this mirror or of another", async () => {
  using t = await world();
  must(await t.call("POST", `${ACME}/mirrors`, mirror(), TOKEN.acme), 201);
  const req = attempt(t);
  const second = (source: string, collector: string) => ({
    name: "m2",
    sources: [{ network: source === "tap" ? "blue" : "shared", port: source }],
    collector: { network: collector === "pub" ? "shared" : "blue", port: collector },
  });
  mustFail(
    await req("POST", `${ACME}/mirrors`, mirror(second("tap", "pub")), TOKEN.acme),
    409,
    "conflict",
    { field: "sources[0]", message: /collector of mirror "m1"/ },
  );
  mustFail(
    await req("POST", `${ACME}/mirrors`, mirror(second("pub", "web")), TOKEN.acme),
    409,
    "conflict",
    { field: "collector", message: /source of mirror "m1"/ },
  );
  mustFail(await req("POST", `${ACME}/mirrors`, mirror(), TOKEN.acme), 409, "already_exists", {
    field: "name",
  });
});

Deno.test("bad input: at most 64 mirrors per tenant (403 quota_exceeded), the other tenant unaffected", async () => {
  using t = await world();
  for (let i = 0; i < 64; i++) {
    must(await t.call("POST", `${ACME}/mirrors`, mirror({ name: `m${i}` }), TOKEN.acme), 201);
  }
  mustFail(
    await attempt(t)("POST", `${ACME}/mirrors`, mirror({ name: "m64" }), TOKEN.acme),
    403,
    "quota_exceeded",
    { message: /has 64 mirrors, the most a tenant may have/ },
  );
  must(
    await t.call("POST", `${GLOBEX}/mirrors`, {
      ...mirror(),
      sources: [{ network: "green", port: "db" }],
      collector: { network: "green", port: "gtap" },
    }, TOKEN.globex),
    201,
  );
});

Deno.test("races: concurrent creates never pass the cap, nor make a port both a source and a collector", async () => {
  using t = await world();
  for (let i = 0; i < 56; i++) {
    must(await t.call("POST", `${ACME}/mirrors`, mirror({ name: `m${i}` }), TOKEN.acme), 201);
  }
  // 16 at once for the last 8 places (within the tenant's 32 requests in flight).
  const made = await Promise.all(
    Array.from(
      { length: 16 },
      (_, i) => t.call("POST", `${ACME}/mirrors`, mirror({ name: `n${i}` }), TOKEN.acme),
    ),
  );
  assert.deepEqual(
    made.map((r) => r.status).sort(),
    [...Array(8).fill(201), ...Array(8).fill(403)],
  );
  const listed = must(await t.call("GET", `${ACME}/mirrors`, undefined, TOKEN.acme), 200).items;
  assert.equal(listed.length, 64);
  // web and tap, each the other's collector, at once: one of them wins.
  using u = await world();
  const both = await Promise.all([
    u.call("POST", `${ACME}/mirrors`, mirror({ name: "a" }), TOKEN.acme),
    u.call("POST", `${ACME}/mirrors`, {
      ...mirror({ name: "b" }),
      sources: [{ network: "blue", port: "tap" }],
      collector: { network: "blue", port: "web" },
    }, TOKEN.acme),
  ]);
  assert.deepEqual(both.map((r) => r.status).sort(), [201, 409]);
});

// ---- what a tenant relies on

Deno.test("a mirror: created, read, listed for the agents, on the feed, deleted; its tenant is kept until it goes", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor as string;
  const created = must(
    await t.call("POST", `${ACME}/mirrors`, mirror({ direction: "out" }), TOKEN.acme),
    201,
  );
  const blue = must(await t.call("GET", `${ACME}/networks/blue`), 200).id as string;
  assert.deepEqual({ ...created, createdAt: undefined }, {
    name: "m1",
    tenant: "acme",
    sources: [{ network: "blue", networkId: blue, id: "web" }],
    direction: "out",
    collector: { network: "blue", networkId: blue, id: "tap" },
    createdAt: undefined,
  });
  assert.deepEqual(
    must(await t.call("GET", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 200),
    created,
  );
  assert.deepEqual(must(await t.call("GET", `${ACME}/mirrors`, undefined, TOKEN.acme), 200).items, [
    created,
  ]);
  assert.deepEqual(must(await t.call("GET", "mirrors", undefined, TOKEN.worker1), 200).items, [
    created,
  ]);
  // The default direction is both.
  const both = must(
    await t.call(
      "POST",
      `${ACME}/mirrors`,
      { ...mirror({ name: "m2" }), direction: undefined },
      TOKEN.acme,
    ),
    201,
  );
  assert.equal(both.direction, "both");
  // A tenant with mirrors is not deleted under them (its ports must go first, then its mirrors).
  for (const p of ["web", "tap", "far"]) {
    must(await t.call("DELETE", `${ACME}/networks/blue/ports/${p}`), 204);
  }
  must(await t.call("DELETE", `${ACME}/networks/shared/ports/pub`), 204);
  must(await t.call("DELETE", `${ACME}/networks/blue`), 204);
  mustFail(await t.call("DELETE", "tenants/acme"), 409, "in_use", {
    message: /mirrors "m1", "m2"/,
  });
  must(await t.call("DELETE", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 204);
  must(await t.call("DELETE", `${ACME}/mirrors/m2`, undefined, TOKEN.acme), 204);
  mustFail(await t.call("GET", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 404, "not_found");
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const events = page.events.filter((e: { type: string }) => e.type === "mirror");
  assert.deepEqual(
    events.map((e: { op: string; mirror: { name: string } }) => [e.op, e.mirror.name]),
    [["put", "m1"], ["put", "m2"], ["delete", "m1"], ["delete", "m2"]],
  );
  must(await t.call("DELETE", "tenants/acme"), 204);
});

Deno.test("a mirror as a cluster's agent reads it: only its tenants', port IDs relative to its cluster", async () => {
  using t = await testApp({ tenants: ["acme", "globex"], tokens: CLUSTER_TOKENS });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", `${ACME}/networks`, net("blue", "10.1.0.0/24")), 201);
  // globex's mirror, in the default cluster: east's tokens never see it (east serves acme only).
  must(await t.call("POST", `${GLOBEX}/networks`, net("green", "10.2.0.0/24")), 201);
  for (const p of ["db", "gtap"]) {
    must(await t.call("PUT", `${GLOBEX}/networks/green/ports/${p}`, { node: "worker1" }), 201);
  }
  const hidden = {
    name: "hidden",
    sources: [{ network: "green", port: "db" }],
    collector: { network: "green", port: "gtap" },
  };
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.1" }, CLUSTER_TOKEN.eastN1), 201);
  const cursor = must(await t.call("GET", "feed", undefined, CLUSTER_TOKEN.eastN1), 200).cursor;
  for (const p of ["web", "tap"]) {
    must(await t.call("PUT", `${ACME}/networks/blue/ports/${p}`, {}, CLUSTER_TOKEN.eastN1), 201);
  }
  must(await t.call("POST", `${GLOBEX}/mirrors`, hidden, TOKEN.globex), 201);
  // The tenant names the ports by their full IDs.
  const made = must(
    await t.call("POST", `${ACME}/mirrors`, {
      ...mirror(),
      sources: [{ network: "blue", port: "web@east" }],
      collector: { network: "blue", port: "tap@east" },
    }, TOKEN.acme),
    201,
  );
  assert.deepEqual([made.sources[0].id, made.collector.id], ["web@east", "tap@east"]);
  // East's agent knows them as "web" and "tap", as its ports list and its feed say.
  const ports = must(await t.call("GET", "ports", undefined, CLUSTER_TOKEN.eastN1), 200).items;
  assert.deepEqual(ports.map((p: { id: string }) => p.id).sort(), ["tap", "web"]);
  const listed = must(await t.call("GET", "mirrors", undefined, CLUSTER_TOKEN.eastN1), 200).items;
  assert.deepEqual(listed.map((m: { name: string }) => m.name), ["m1"], "not globex's");
  assert.deepEqual([listed[0].sources[0].id, listed[0].collector.id], ["web", "tap"]);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, CLUSTER_TOKEN.eastN1),
    200,
  );
  const fedMirrors = page.events.filter((e: { type: string }) => e.type === "mirror");
  assert.deepEqual(fedMirrors.map((e: { mirror: { name: string } }) => e.mirror.name), ["m1"]);
  const fed = fedMirrors[0].mirror;
  assert.deepEqual([fed.sources[0].id, fed.collector.id], ["web", "tap"]);
});

Deno.test("attack: the console's live view shows a tenant its own mirrors only", () => {
  const port = { network: "blue", networkId: "n-1", id: "web" };
  const mirror = {
    name: "m1",
    tenant: "acme",
    sources: [port],
    direction: "both" as const,
    collector: { ...port, id: "tap" },
    createdAt: "2026-11-28T00:00:00Z",
  };
  const event = { seq: 1, type: "mirror" as const, op: "put" as const, mirror };
  assert.deepEqual(seenBy({ scope: "tenant", tenant: "globex" }, event), []);
  assert.deepEqual(seenBy({ scope: "tenant", tenant: "acme" }, event), [event]);
  assert.deepEqual(seenBy({ scope: "admin" }, event), [event]);
});

// ---- filtered mirrors

const filtered = (more: Record<string, unknown> = {}) =>
  mirror({ direction: "out", filter: [{ protocol: "tcp", ports: "5001" }], ...more });

Deno.test("attack: a tenant cannot filter-mirror another tenant's port, whatever its filter names", async () => {
  using t = await world();
  const req = attempt(t);
  // acme's mirror of globex's port on the public network, filtered to globex's own network.
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...filtered({ filter: [{ protocol: "any", remote: "10.2.0.0/24" }] }),
      sources: [{ network: "shared", port: "gpub" }],
    }, TOKEN.acme),
    404,
    "not_found",
    { field: "sources[0]" },
  );
  // globex's port as the collector of a filtered mirror.
  mustFail(
    await req("POST", `${ACME}/mirrors`, {
      ...filtered(),
      sources: [{ network: "shared", port: "pub" }],
      collector: { network: "shared", port: "gpub" },
    }, TOKEN.acme),
    404,
    "not_found",
    { field: "collector" },
  );
  assert.deepEqual(
    must(await t.call("GET", `${ACME}/mirrors`, undefined, TOKEN.acme), 200).items,
    [],
  );
});

Deno.test("attack: a filter naming another tenant's addresses is kept to the tenant's own source ports", async () => {
  using t = await world();
  // 10.2.0.0/24 is globex's network: the rule narrows what acme's web sends there, nothing more.
  const m = must(
    await t.call(
      "POST",
      `${ACME}/mirrors`,
      filtered({ filter: [{ protocol: "any", remote: "10.2.0.0/24" }] }),
      TOKEN.acme,
    ),
    201,
  );
  assert.deepEqual(m.filter, [{ protocol: "any", remote: "10.2.0.0/24" }]);
  assert.deepEqual(m.sources.map((s: { id: string }) => s.id), ["web"]);
});

Deno.test("filtered mirror: created with its rules, read back, on the agents' list", async () => {
  using t = await world();
  const rules = [
    { protocol: "tcp", ports: "5001" },
    { protocol: "udp", ports: "5000-5003", remote: "10.9.0.0/16" },
    { protocol: "icmp" },
  ];
  const created = must(
    await t.call("POST", `${ACME}/mirrors`, filtered({ filter: rules }), TOKEN.acme),
    201,
  );
  assert.deepEqual(created.filter, rules);
  assert.equal(created.direction, "out");
  assert.deepEqual(
    must(await t.call("GET", `${ACME}/mirrors/m1`, undefined, TOKEN.acme), 200),
    created,
  );
  assert.deepEqual(must(await t.call("GET", "mirrors", undefined, TOKEN.worker1), 200).items, [
    created,
  ]);
});

Deno.test("bad input: a filter's rules are checked, each refusal names its field, nothing is made", async () => {
  using t = await world();
  const req = attempt(t);
  const post = (body: unknown) => req("POST", `${ACME}/mirrors`, body, TOKEN.acme);
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [filtered({ direction: "both" }), "direction", /copies what the pods send.*"out"/],
    [filtered({ direction: "in" }), "direction", /copies what the pods send.*"out"/],
    [filtered({ filter: [{ protocol: "icmp", ports: "80" }] }), "filter[0].ports", /tcp and udp/],
    [filtered({ filter: [{ protocol: "tcp", ports: "90-80" }] }), "filter[0].ports", /90-80/],
    [filtered({ filter: [{ protocol: "tcp", ports: "70000" }] }), "filter[0].ports", /65535/],
    [
      filtered({ filter: [{ protocol: "tcp", remote: "10.1.0.1/24" }] }),
      "filter[0].remote",
      /host bits/,
    ],
    [filtered({ filter: [{ protocol: "tcp", remote: "fd00::/64" }] }), "filter[0].remote", /IPv4/],
    [filtered({ filter: [] }), "filter", /./],
    [filtered({ filter: Array(5).fill({ protocol: "icmp" }) }), "filter", /./],
    [filtered({ filter: [{ protocol: "sctp" }] }), "filter[0].protocol", /./],
  ];
  for (const [body, field, message] of cases) {
    mustFail(await post(body), 400, "invalid_request", { field, message });
  }
  const admin = (body: unknown) => req("POST", `${ACME}/mirrors`, body);
  mustFail(
    await admin(filtered({ collector: { remote: { ip: "192.0.2.250", protocol: "gre" } } })),
    400,
    "invalid_request",
    { field: "filter", message: /collector port/ },
  );
  assert.deepEqual(
    must(await t.call("GET", `${ACME}/mirrors`, undefined, TOKEN.acme), 200).items,
    [],
  );
});
