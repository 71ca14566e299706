/**
 * Services (issue 28): the hostile requests first, each refused with a clear 4xx in the one error
 * shape and nothing written; then bad input and the documented limits; then what a tenant relies
 * on: the VIP from the pool (or the one asked for), the endpoints and "no endpoints", the feed
 * event and the agents' list, the update, the delete that gives the VIP back.
 */
import assert from "node:assert/strict";
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
import { MAX_SERVICE_BACKENDS, MAX_SERVICE_PORTS, MAX_SERVICES_PER_TENANT } from "./schemas.ts";
import { checkStore } from "./check.ts";

const ACME = "tenants/acme";
const GLOBEX = "tenants/globex";

/**
 * acme: network blue (10.1.0.0/24, gateway 10.1.0.1) with ports web1 (worker1), web2 (worker2)
 * and idle (unbound); globex: network green with port db; a public network of admin's with
 * globex's port gpub.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(
    await t.call("POST", `${ACME}/networks`, net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" })),
    201,
  );
  must(await t.call("POST", `${GLOBEX}/networks`, net("green", "10.2.0.0/24")), 201);
  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  const put = async (path: string, body: unknown) => must(await t.call("PUT", path, body), 201);
  await put(`${ACME}/networks/blue/ports/web1`, { node: "worker1" });
  await put(`${ACME}/networks/blue/ports/web2`, { node: "worker2" });
  await put(`${ACME}/networks/blue/ports/idle`, {});
  await put(`${GLOBEX}/networks/green/ports/db`, { node: "worker1" });
  await put(`${GLOBEX}/networks/shared/ports/gpub`, { node: "worker1" });
  return t;
}

const svc = (more: Record<string, unknown> = {}) => ({
  name: "front",
  network: "blue",
  ports: [{ protocol: "TCP", port: 80, targetPort: 8080 }],
  backends: ["web1", "web2"],
  ...more,
});

// ---- attacks

Deno.test("attack: a tenant cannot put a service on another tenant's network, private or public", async () => {
  using t = await world();
  const req = attempt(t);
  // acme's private network, from globex's path: it does not exist for globex.
  mustFail(
    await req("POST", `${GLOBEX}/services`, svc({ backends: [] }), TOKEN.globex),
    404,
    "not_found",
  );
  // The public network both may use: its VIP would be the admin's address, its backends anyone's.
  mustFail(
    await req(
      "POST",
      `${GLOBEX}/services`,
      svc({ network: "shared", backends: ["gpub"] }),
      TOKEN.globex,
    ),
    403,
    "forbidden",
    { field: "network", message: /belongs to tenant "admin"/ },
  );
  // Another tenant's path altogether.
  mustFail(await req("POST", `${ACME}/services`, svc(), TOKEN.globex), 403, "forbidden");
});

Deno.test("attack: a service cannot take another tenant's port as a backend, nor read its services", async () => {
  using t = await world();
  const req = attempt(t);
  // globex's port db is on green: on blue no port of that ID exists.
  mustFail(
    await req("POST", `${ACME}/services`, svc({ backends: ["web1", "db"] }), TOKEN.acme),
    404,
    "not_found",
    { field: "backends[1]" },
  );
  must(await t.call("POST", `${ACME}/services`, svc(), TOKEN.acme), 201);
  mustFail(await req("GET", `${ACME}/services/front`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(
    await req("DELETE", `${ACME}/services/front`, undefined, TOKEN.globex),
    403,
    "forbidden",
  );
  // A tenant does not list every tenant's services (the agents do).
  mustFail(await req("GET", "services", undefined, TOKEN.globex), 403, "forbidden");
});

Deno.test("attack: a VIP cannot be an address someone holds: a port, the gateway, another service", async () => {
  using t = await world();
  const req = attempt(t);
  const web1 = must(await t.call("GET", `${ACME}/networks/blue/ports/web1`), 200).ip;
  mustFail(
    await req("POST", `${ACME}/services`, svc({ vip: web1 }), TOKEN.acme),
    409,
    "address_taken",
    { field: "vip", message: /used by port "web1"/ },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ vip: "10.1.0.1" }), TOKEN.acme),
    409,
    "address_taken",
    { field: "vip", message: /gateway/ },
  );
  must(await t.call("POST", `${ACME}/services`, svc({ vip: "10.1.0.100" }), TOKEN.acme), 201);
  mustFail(
    await req("POST", `${ACME}/services`, svc({ name: "back", vip: "10.1.0.100" }), TOKEN.acme),
    409,
    "address_taken",
    { field: "vip", message: /the VIP of service "front"/ },
  );
  // Nor can a port take the VIP.
  mustFail(
    await req("PUT", `${ACME}/networks/blue/ports/late`, { ip: "10.1.0.100" }, TOKEN.acme),
    409,
    "address_taken",
  );
});

// ---- bad input and limits

Deno.test("bad input: a VIP outside the network, a full pool, ports and backends over the limits", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", `${ACME}/services`, svc({ vip: "10.9.0.5" }), TOKEN.acme),
    400,
    "invalid_request",
    { field: "vip", message: /outside 10\.1\.0\.0\/24/ },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ vip: "not-an-ip" }), TOKEN.acme),
    400,
    "invalid_request",
    { field: "vip" },
  );
  // A /30 whose two addresses are the gateway and a port's.
  must(
    await t.call("POST", `${ACME}/networks`, net("tiny", "10.9.0.0/30", { gateway: "10.9.0.1" })),
    201,
  );
  must(await t.call("PUT", `${ACME}/networks/tiny/ports/only`, { node: "worker1" }), 201);
  mustFail(
    await req("POST", `${ACME}/services`, svc({ network: "tiny", backends: ["only"] }), TOKEN.acme),
    409,
    "pool_exhausted",
    { field: "vip", message: /no free address/ },
  );
  const many = Array.from({ length: MAX_SERVICE_PORTS + 1 }, (_, i) => ({ port: 1000 + i }));
  mustFail(
    await req("POST", `${ACME}/services`, svc({ ports: many }), TOKEN.acme),
    400,
    "invalid_request",
    { message: new RegExp(`at most ${MAX_SERVICE_PORTS} ports`) },
  );
  const backends = Array.from({ length: MAX_SERVICE_BACKENDS + 1 }, (_, i) => `p${i}`);
  mustFail(
    await req("POST", `${ACME}/services`, svc({ backends }), TOKEN.acme),
    400,
    "invalid_request",
    { message: new RegExp(`at most ${MAX_SERVICE_BACKENDS} backends`) },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ ports: [{ port: 80 }, { port: 80 }] }), TOKEN.acme),
    400,
    "invalid_request",
    { field: "ports[1]", message: /TCP\/80 is listed twice/ },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ ports: [{ port: 0 }] }), TOKEN.acme),
    400,
    "invalid_request",
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ backends: ["web1", "web1"] }), TOKEN.acme),
    400,
    "invalid_request",
    { field: "backends[1]" },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ sessionAffinity: "Cookie" }), TOKEN.acme),
    400,
    "invalid_request",
  );
});

Deno.test("limits: a tenant has at most MAX_SERVICES_PER_TENANT services; one more is refused and changes nothing", async () => {
  using t = await world();
  for (let i = 0; i < MAX_SERVICES_PER_TENANT; i++) {
    must(await t.call("POST", `${ACME}/services`, svc({ name: `s${i}`, backends: [] })), 201);
  }
  mustFail(
    await attempt(t)("POST", `${ACME}/services`, svc({ name: "extra" }), TOKEN.acme),
    403,
    "quota_exceeded",
    { message: new RegExp(`${MAX_SERVICES_PER_TENANT} services`) },
  );
});

// ---- what a tenant relies on

Deno.test("a service: VIP from the pool, endpoints, on the feed and the agents' list, updated, deleted", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor as string;
  const made = must(await t.call("POST", `${ACME}/services`, svc(), TOKEN.acme), 201);
  assert.match(made.vip, /^10\.1\.0\.\d+$/);
  assert.deepEqual(made.ports, [{ protocol: "TCP", port: 80, targetPort: 8080 }]);
  assert.equal(made.sessionAffinity, "None");
  assert.deepEqual(made.status.endpoints.map((e: { port: string }) => e.port), ["web1", "web2"]);
  assert.equal(made.status.message, undefined);
  // The VIP is held: the network counts it, no port gets it.
  const blue = must(await t.call("GET", `${ACME}/networks/blue`), 200);
  assert.equal(blue.usage.used, 4);
  const late = must(await t.call("PUT", `${ACME}/networks/blue/ports/late`, {}), 201);
  assert.notEqual(late.ip, made.vip);

  // The agents' list and the feed carry it (without status: endpoints are the agents' to resolve).
  const listed = must(await t.call("GET", "services", undefined, TOKEN.worker1), 200).items;
  assert.deepEqual(listed.map((s: { name: string; vip: string }) => [s.name, s.vip]), [[
    "front",
    made.vip,
  ]]);
  assert.equal(listed[0].status, undefined);
  assert.equal(listed[0].vipIndex, undefined);

  // An unbound backend is no endpoint, and the status says so; a service may have none.
  const upd = must(
    await t.call("PUT", `${ACME}/services/front`, {
      ports: [{ protocol: "UDP", port: 53 }],
      backends: ["idle"],
      sessionAffinity: "ClientIP",
    }, TOKEN.acme),
    200,
  );
  assert.equal(upd.vip, made.vip);
  assert.deepEqual(upd.ports, [{ protocol: "UDP", port: 53, targetPort: 53 }]);
  assert.deepEqual(upd.status.endpoints, []);
  assert.match(
    upd.status.message,
    /^no endpoints: the VIP answers nothing; .*"idle" \(bound to no node\)/,
  );
  const none = must(
    await t.call("POST", `${ACME}/services`, svc({ name: "empty", backends: [] }), TOKEN.acme),
    201,
  );
  assert.match(none.status.message, /no endpoints: .*names no backend/);

  // The network cannot go while a VIP holds one of its addresses.
  mustFail(
    await attempt(t)("DELETE", `${ACME}/networks/blue`),
    409,
    "in_use",
    { message: /the VIPs of services "acme\/empty", "acme\/front"/ },
  );
  assert.deepEqual((await checkStore(t.store)).problems, []);

  must(await t.call("DELETE", `${ACME}/services/front`, undefined, TOKEN.acme), 204);
  must(await t.call("DELETE", `${ACME}/services/empty`, undefined, TOKEN.acme), 204);
  mustFail(await t.call("GET", `${ACME}/services/front`, undefined, TOKEN.acme), 404, "not_found");
  assert.equal(must(await t.call("GET", `${ACME}/networks/blue`), 200).usage.used, 4);
  // The VIP is free again: a port may ask for it.
  must(await t.call("PUT", `${ACME}/networks/blue/ports/vip`, { ip: made.vip }), 201);
  assert.deepEqual((await checkStore(t.store)).problems, []);

  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const events = page.events.filter((e: { type: string }) => e.type === "service");
  assert.deepEqual(
    events.map((e: { op: string; service: { name: string } }) => [e.op, e.service.name]),
    [["put", "front"], ["put", "front"], ["put", "empty"], ["delete", "front"], [
      "delete",
      "empty",
    ]],
  );
  assert.equal(events[1].service.sessionAffinity, "ClientIP");
});

Deno.test("a service as a cluster's agent reads it: only its tenants', backends as its ports list names them", async () => {
  using t = await testApp({ tenants: ["acme", "globex"], tokens: CLUSTER_TOKENS });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", `${ACME}/networks`, net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", `${GLOBEX}/networks`, net("green", "10.2.0.0/24")), 201);
  must(await t.call("PUT", `${GLOBEX}/networks/green/ports/db`, { node: "worker1" }), 201);
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.1" }, CLUSTER_TOKEN.eastN1), 201);
  const cursor = must(await t.call("GET", "feed", undefined, CLUSTER_TOKEN.eastN1), 200).cursor;
  must(await t.call("PUT", `${ACME}/networks/blue/ports/web`, {}, CLUSTER_TOKEN.eastN1), 201);
  // globex's service, in the default cluster: east's tokens never see it.
  const hidden = { ...svc({ name: "hidden", network: "green", backends: ["db"] }) };
  must(await t.call("POST", `${GLOBEX}/services`, hidden, TOKEN.globex), 201);
  // The tenant names its backend by the port's full ID.
  const made = must(
    await t.call("POST", `${ACME}/services`, svc({ backends: ["web@east"] }), TOKEN.acme),
    201,
  );
  assert.deepEqual(made.backends, ["web@east"]);
  // East's agent knows the port as "web", in its ports list, the services list and the feed.
  const ports = must(await t.call("GET", "ports", undefined, CLUSTER_TOKEN.eastN1), 200).items;
  assert.deepEqual(ports.map((p: { id: string }) => p.id), ["web"]);
  const listed = must(await t.call("GET", "services", undefined, CLUSTER_TOKEN.eastN1), 200).items;
  assert.deepEqual(listed.map((s: { name: string; backends: string[] }) => [s.name, s.backends]), [
    ["front", ["web"]],
  ]);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, CLUSTER_TOKEN.eastN1),
    200,
  );
  const fed = page.events.filter((e: { type: string }) => e.type === "service");
  assert.deepEqual(
    fed.map((e: { service: { name: string; backends: string[] } }) => [
      e.service.name,
      e.service.backends,
    ]),
    [["front", ["web"]]],
  );
});

Deno.test("a selector on port labels: the tenant's matching ports of the network bound to a node are endpoints; one matching nothing says so", async () => {
  using t = await world();
  const put = (id: string, labels: Record<string, string>, node?: string) =>
    t.call("PUT", `${ACME}/networks/blue/ports/${id}`, { labels, ...(node ? { node } : {}) });
  const a = must(await put("app-a", { app: "web", tier: "front" }, "worker1"), 201);
  assert.deepEqual(a.labels, { app: "web", tier: "front" });
  must(await put("app-b", { app: "web" }, "worker2"), 201);
  must(await put("app-c", { app: "web", tier: "front" }), 201); // unbound: no endpoint
  must(await put("app-d", { app: "db", tier: "front" }, "worker1"), 201);
  const made = must(
    await t.call(
      "POST",
      `${ACME}/services`,
      svc({
        backends: [],
        selector: { app: "web", tier: "front" },
      }),
      TOKEN.acme,
    ),
    201,
  );
  assert.deepEqual(made.selector, { app: "web", tier: "front" });
  assert.deepEqual(made.status.endpoints.map((e: { port: string }) => e.port), ["app-a"]);
  // Named backends and a selector together; then a selector nobody matches.
  const both = must(
    await t.call("PUT", `${ACME}/services/front`, {
      ports: [{ port: 80 }],
      backends: ["web1"],
      selector: { app: "web" },
    }, TOKEN.acme),
    200,
  );
  assert.deepEqual(
    both.status.endpoints.map((e: { port: string }) => e.port).sort(),
    ["app-a", "app-b", "web1"],
  );
  const none = must(
    await t.call("PUT", `${ACME}/services/front`, {
      ports: [{ port: 80 }],
      selector: { app: "nothing" },
    }, TOKEN.acme),
    200,
  );
  assert.deepEqual(none.status.endpoints, []);
  assert.match(none.status.message, /no endpoints: .*selector matches no port bound to a node/);
  // Labels are checked like a network's.
  mustFail(
    await attempt(t)("PUT", `${ACME}/networks/blue/ports/bad`, { labels: { "-x": "1" } }),
    400,
    "invalid_request",
  );
});
