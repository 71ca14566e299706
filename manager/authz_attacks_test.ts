/**
 * Issue 33, who may place what where: each test is the hostile request first (a tenant, a stolen
 * node token, a stolen monitor token), then the refusal, that nothing changed, and that what the
 * legitimate caller does still works. On a Deno KV file (or etcd, see test_support.ts).
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
  type TestAppOptions,
  TOKEN,
} from "./test_support.ts";

const TOK = CLUSTER_TOKEN;

const BLUE = "tenants/acme/networks/blue";
const ACME_NETS = "tenants/acme/networks";
const GLOBEX_NETS = "tenants/globex/networks";

/** A manager on a Deno KV file of its own, removed when the test ends. */
async function onFile(options: TestAppOptions = {}): Promise<TestApp> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-authz-" });
  const t = await testApp({ path: `${dir}/manager.kv`, ...options });
  const close = () => {
    t.close();
    Deno.removeSync(dir, { recursive: true });
  };
  return { ...t, close, [Symbol.dispose]: close };
}

/** Clusters east (acme) and west (globex), each with a node n1 and a monitor; acme's blue. */
async function clusters(): Promise<TestApp> {
  const t = await onFile({
    tenants: ["acme", "globex"],
    tokens: CLUSTER_TOKENS,
  });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", "clusters", { name: "west", tenants: ["globex"] }), 201);
  must(await t.call("POST", ACME_NETS, net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.1" }, TOK.eastN1), 201);
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.2" }, TOK.westN1), 201);
  return t;
}

// ---- finding 2: ports only in a cluster that serves their tenant

Deno.test("attack: a tenant cannot put a port into a cluster that does not serve it; west's monitor never sees it and west can be deleted", async () => {
  using t = await clusters();
  const req = attempt(t);
  mustFail(await req("PUT", `${BLUE}/ports/z0@west`, {}, TOKEN.acme), 403, "forbidden", {
    message: /cluster "west" does not serve tenant "acme".*PATCH \/api\/v1\/clusters\/west/,
  });
  // Nor with a pod, nor through the admin's token: a port of cluster west is a pod's of west.
  mustFail(
    await req(
      "PUT",
      `${BLUE}/ports/z1@west`,
      { pod: { namespace: "acme", name: "a" } },
      TOKEN.acme,
    ),
    403,
    "forbidden",
  );
  mustFail(await req("PUT", `${BLUE}/ports/z2@west`, {}), 403, "forbidden");
  assert.deepEqual(must(await t.call("GET", "ports", undefined, TOK.westMon), 200).items, []);
  must(await t.call("DELETE", "clusters/west"), 204);
  // East serves acme: its port goes in, and east's monitor sees it bare.
  const made = must(await t.call("PUT", `${BLUE}/ports/z3@east`, {}, TOKEN.acme), 201);
  assert.equal(made.cluster, "east");
  const seen = must(await t.call("GET", "ports", undefined, TOK.eastMon), 200).items;
  assert.deepEqual(seen.map((p: { id: string }) => p.id), ["z3"]);
});

Deno.test("attack: a port with no cluster suffix is the default cluster's, which must serve its tenant too", async () => {
  using t = await clusters();
  must(await t.call("PUT", `${BLUE}/ports/before`, {}, TOKEN.acme), 201);
  must(await t.call("PATCH", "clusters/default", { tenants: ["globex"] }), 200);
  mustFail(await attempt(t)("PUT", `${BLUE}/ports/bare`, {}, TOKEN.acme), 403, "forbidden", {
    message: /cluster "default" does not serve tenant "acme"/,
  });
  // A port made before the change is still read and released, though not put again.
  mustFail(await attempt(t)("PUT", `${BLUE}/ports/before`, {}, TOKEN.acme), 403, "forbidden");
  must(await t.call("GET", `${BLUE}/ports/before`, undefined, TOKEN.acme), 200);
  must(await t.call("DELETE", `${BLUE}/ports/before`, undefined, TOKEN.acme), 204);
  must(await t.call("PATCH", "clusters/default", { tenants: ["*"] }), 200);
  must(await t.call("PUT", `${BLUE}/ports/bare`, {}, TOKEN.acme), 201);
});

Deno.test("attack: a port left in a cluster that no longer serves its tenant is not its monitor's to see; the admin releases it, then deletes the cluster", async () => {
  using t = await clusters();
  must(await t.call("PATCH", "clusters/west", { tenants: ["globex", "acme"] }), 200);
  must(await t.call("PUT", `${BLUE}/ports/z0@west`, {}, TOKEN.acme), 201);
  const cursor = must(await t.call("GET", "feed", undefined, TOK.westMon), 200).cursor;
  must(await t.call("PATCH", "clusters/west", { tenants: ["globex"] }), 200);
  assert.deepEqual(must(await t.call("GET", "ports", undefined, TOK.westMon), 200).items, []);
  mustFail(await t.call("GET", `${BLUE}/ports/z0`, undefined, TOK.westMon), 403, "forbidden");
  // The change expired the monitor's cursor; its new one shows nothing of acme's.
  mustFail(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOK.westMon),
    410,
    "feed_expired",
  );
  const fresh = must(await t.call("GET", "feed", undefined, TOK.westMon), 200).cursor;
  must(await t.call("PUT", `${BLUE}/ports/z0@west`, {}), 403);
  must(await t.call("DELETE", `${BLUE}/ports/z0@west`), 204);
  const page = must(
    await t.call("GET", `feed?after=${fresh}&timeout=0`, undefined, TOK.westMon),
    200,
  );
  assert.deepEqual(page.events, []);
  must(await t.call("DELETE", "clusters/west"), 204);
});

// ---- finding 3: flat networks and chosen segment IDs are the admin's

Deno.test("attack: a tenant cannot squat a physnet's flat network or pick a VLAN ID or VNI; the admin can", async () => {
  using t = await onFile({ tenants: ["acme", "globex"] });
  must(
    await t.call("POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] }),
    201,
  );
  must(await t.call("PUT", "tenants/acme/quota", { vlanIds: 0 }), 200);
  const req = attempt(t);
  mustFail(
    await req(
      "POST",
      ACME_NETS,
      net("flat", "10.2.0.0/24", { type: "flat", physnet: "phys1" }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "type", message: /flat network.*physnet "phys1".*admin/ },
  );
  mustFail(
    await req(
      "POST",
      GLOBEX_NETS,
      net("tagged", "10.3.0.0/24", { type: "vlan", physnet: "phys1", segmentId: 150 }),
      TOKEN.globex,
    ),
    403,
    "forbidden",
    { field: "segmentId", message: /VLAN ID.*admin/ },
  );
  mustFail(
    await req("POST", ACME_NETS, net("vni", "10.4.0.0/24", { segmentId: 5500 }), TOKEN.acme),
    403,
    "forbidden",
    { field: "segmentId", message: /VNI.*admin/ },
  );
  // Automatic segments stay the tenant's (globex has no quota).
  const auto = must(
    await t.call(
      "POST",
      GLOBEX_NETS,
      net("tagged", "10.3.0.0/24", { type: "vlan", physnet: "phys1" }),
      TOKEN.globex,
    ),
    201,
  );
  assert.ok(auto.segmentId >= 100 && auto.segmentId <= 199);
  // The admin makes the flat network, and picks IDs, for any tenant.
  must(
    await t.call("POST", ACME_NETS, net("flat", "10.2.0.0/24", { type: "flat", physnet: "phys1" })),
    201,
  );
  must(await t.call("POST", ACME_NETS, net("vni", "10.4.0.0/24", { segmentId: 5500 })), 201);
});

// ---- finding 5: node tokens get the least a node needs

Deno.test("attack: a node token cannot bind another's unbound port, name another namespace's pod, or release an unbound port it did not make", async () => {
  using t = await onFile({ tenants: ["acme", "globex"] });
  must(await t.call("POST", ACME_NETS, net("blue", "10.1.0.0/24")), 201);
  const req = attempt(t);
  // The tenant's own unbound port (a reservation) stays the tenant's.
  must(await t.call("PUT", `${BLUE}/ports/reserved`, {}, TOKEN.acme), 201);
  mustFail(
    await req(
      "PUT",
      `${BLUE}/ports/reserved`,
      { pod: { namespace: "acme", name: "x" } },
      TOKEN.worker1,
    ),
    403,
    "forbidden",
    { message: /not bound to a node.*did not make/ },
  );
  mustFail(
    await req("DELETE", `${BLUE}/ports/reserved`, undefined, TOKEN.worker1),
    403,
    "forbidden",
    {
      message: /did not make/,
    },
  );
  // A pod of another namespace than the port's tenant.
  mustFail(
    await req(
      "PUT",
      `${BLUE}/ports/p1`,
      { pod: { namespace: "globex", name: "db-0" } },
      TOKEN.worker1,
    ),
    403,
    "forbidden",
    { field: "pod.namespace" },
  );
  // A port bound to another node: neither taken nor released.
  must(await t.call("PUT", `${BLUE}/ports/w2`, {}, TOKEN.worker2), 201);
  mustFail(await req("PUT", `${BLUE}/ports/w2`, {}, TOKEN.worker1), 409, "conflict", {
    field: "node",
  });
  mustFail(await req("DELETE", `${BLUE}/ports/w2`, undefined, TOKEN.worker1), 403, "forbidden");
  // A stable port binds on any node, but only to the pod its ID names.
  const STABLE = `${BLUE}/ports/stable:acme:web-0-eth0`;
  const first = must(
    await t.call(
      "PUT",
      STABLE,
      { pod: { namespace: "acme", name: "web-0" }, interface: "eth0" },
      TOKEN.worker2,
    ),
    201,
  );
  must(await t.call("POST", `${STABLE}/unbind`), 200);
  mustFail(
    await req(
      "PUT",
      STABLE,
      { pod: { namespace: "acme", name: "evil" }, interface: "eth0" },
      TOKEN.worker1,
    ),
    403,
    "forbidden",
    { field: "pod", message: /stable port.*not to acme\/evil on eth0/ },
  );
  mustFail(await req("DELETE", STABLE, undefined, TOKEN.worker1), 403, "forbidden");
  const again = must(
    await t.call(
      "PUT",
      STABLE,
      { pod: { namespace: "acme", name: "web-0" }, interface: "eth0" },
      TOKEN.worker1,
    ),
    200,
  );
  assert.deepEqual([again.ip, again.node], [first.ip, "worker1"]);
  // What the node made itself it may release, also once an admin took it off its pod.
  must(
    await t.call(
      "PUT",
      `${BLUE}/ports/mine`,
      { pod: { namespace: "acme", name: "m" } },
      TOKEN.worker1,
    ),
    201,
  );
  must(await t.call("POST", `${BLUE}/ports/mine/unbind`), 200);
  must(await t.call("DELETE", `${BLUE}/ports/mine`, undefined, TOKEN.worker1), 204);
  // The record of who made a port is the manager's: never answered.
  assert.equal(JSON.stringify(again).includes("madeBy"), false);
});

Deno.test("attack: a stolen monitor token's hostAccess blocks no network of a tenant its cluster never meets; a cluster change that would make them meet is refused", async () => {
  using t = await clusters();
  // The default cluster serves nobody here: east and west never share a node.
  must(await t.call("PATCH", "clusters/default", { tenants: [] }), 200);
  must(
    await t.call("POST", ACME_NETS, net("wide", "172.16.0.0/12", { gateway: "172.16.0.1" })),
    201,
  );
  must(
    await t.call("POST", GLOBEX_NETS, net("red", "172.16.5.0/24", { gateway: "172.16.5.1" })),
    201,
  );
  must(await t.call("PATCH", `${ACME_NETS}/wide`, { hostAccess: true }, TOK.eastMon), 200);
  must(await t.call("PATCH", `${GLOBEX_NETS}/red`, { egress: true, hostAccess: true }), 200);
  // Letting acme into west would put both on west's nodes.
  mustFail(
    await attempt(t)("PATCH", "clusters/west", { tenants: ["globex", "acme"] }),
    409,
    "conflict",
    { message: /acme\/wide.*globex\/red|globex\/red.*acme\/wide/ },
  );
  // Where they meet (a cluster serving both), the rule holds as before.
  must(await t.call("POST", "clusters", { name: "both", tenants: ["acme", "globex"] }), 409);
});

// ---- finding 5: link-local networks, impossible dates

Deno.test("attack: a tenant cannot make a link-local network (169.254.0.0/16, fe80::/10)", async () => {
  using t = await onFile({ tenants: ["acme"] });
  const bad: [string, Record<string, unknown>][] = [
    ["cidr", net("meta", "169.254.169.0/24")],
    ["cidr", net("ll", "169.254.0.0/16")],
    [
      "cidr",
      net("wide", "168.0.0.0/6", { allocationPools: [{ start: "168.0.0.10", end: "168.0.0.20" }] }),
    ],
    ["cidr", net("v6ll", "fe80::/64")],
    ["cidr6", net("dual", "10.1.0.0/24", { cidr6: "fe80::/64" })],
  ];
  for (const [field, body] of bad) {
    mustFail(await attempt(t)("POST", ACME_NETS, body, TOKEN.acme), 400, "invalid_request", {
      field,
      message: /link-local/,
    });
  }
  must(await t.call("POST", ACME_NETS, net("ok", "169.253.255.0/24"), TOKEN.acme), 201);
});

Deno.test("attack: history refuses an impossible date (2026-02-30) with 400 naming the field", async () => {
  using t = await onFile({ tenants: ["acme"], historyRetentionDays: 30 });
  const at = (time: string) =>
    t.call(
      "GET",
      `tenants/acme/history?ip=10.1.0.5&at=${encodeURIComponent(time)}`,
      undefined,
      TOKEN.acme,
    );
  const impossible = [
    "2026-02-30T00:00:00Z",
    "2026-02-29",
    "2026-13-01T00:00:00Z",
    "2026-04-31T12:00:00Z",
    "2026-01-01T24:30:00Z",
    "2026-01-01T10:61:00Z",
  ];
  for (const time of impossible) {
    mustFail(await at(time), 400, "invalid_request", {
      field: "query.at",
      message: /no such (date|time)/,
    });
  }
  mustFail(
    await t.call("GET", "history?ip=10.1.0.5&from=2026-02-30T00:00:00Z"),
    400,
    "invalid_request",
    { field: "query.from" },
  );
  for (const time of ["2024-02-29T00:00:00Z", "2026-11-25T03:00:00.123+02:00", "2026-11-25"]) {
    must(await at(time), 200);
  }
});
