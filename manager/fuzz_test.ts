/**
 * Property-based: sequences of requests generated for every operation of the OpenAPI document,
 * with valid and hostile values (bad names, broadcast MACs, taken and excluded addresses, nulls,
 * wrong types, extra fields, garbage bodies, wrong content types) and every kind of token. After
 * each request:
 *
 * - no 5xx, and every error answer has the one error shape;
 * - an error answer changed nothing in the store;
 * - a tenant's answer names none of another tenant's objects (unless the request named them);
 * - the store is consistent (manager/check.ts): no two ports of a network share an address or a
 *   MAC, every pool's count equals the ports and group addresses that exist, quotas count exactly.
 *
 * Among the requests, mass releases (up to 110 ports of one network at once, beyond what one
 * commit could end together: issue 33) and the clock moved past the quarantine, after which the
 * network must still allocate.
 *
 * Bounded for CI (KNITTER_FUZZ_RUNS sequences, default 40, within KNITTER_FUZZ_MS, default 8 s;
 * fewer on etcd);
 * `make fuzz` runs a long one. A failure prints fast-check's seed and path: replay it with
 * KNITTER_FUZZ_SEED and KNITTER_FUZZ_PATH.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { checkStore } from "./check.ts";
import { openApiDocument } from "./openapi.ts";
import { ROUTES } from "./routes.ts";
import { dump, must, net, type TestApp, testApp, TOKEN } from "./test_support.ts";
import type { TokenConfig } from "./auth.ts";

const env = (name: string) => Deno.env.get(name);
/** On etcd (tests/etcd_api_N_test.ts) every store call is an HTTP request: fewer, shorter runs. */
const ON_ETCD = env("KNITTER_TEST_ETCD_ENDPOINTS") !== undefined;
const RUNS = Number(env("KNITTER_FUZZ_RUNS") ?? (ON_ETCD ? 6 : 40));
const TIME_MS = Number(env("KNITTER_FUZZ_MS") ?? (ON_ETCD ? 4000 : 8000));
const STEPS = Number(env("KNITTER_FUZZ_STEPS") ?? 25);

// ---- the world every sequence starts from

/** Names only their own tenant (or an admin or a node) may ever see. */
const SECRETS = {
  acme: [
    "acme",
    "ac-secret-net",
    "ac-secret-port",
    "ac-secret-group",
    "ac-secret-router",
    "ac-secret-sg",
    "ac-secret-tap",
    "ac-secret-mirror",
    "ac-secret-claim",
  ],
  globex: [
    "globex",
    "gx-secret-net",
    "gx-secret-port",
    "gx-secret-group",
    "gx-secret-router",
    "gx-secret-sg",
    "gx-secret-tap",
    "gx-secret-mirror",
    "gx-secret-claim",
  ],
};

/** The test app, with the manager's clock in the test's hand (quarantine, history). */
type World = TestApp & { advance(ms: number): void; clock(): number };

const QUARANTINE_S = 60;

async function world(): Promise<World> {
  let now = Date.now();
  // With the address history on, its answers are held to the same secrets as the rest.
  const t = Object.assign(
    await testApp({
      tenants: ["acme", "globex"],
      historyRetentionDays: 30,
      quarantineSeconds: QUARANTINE_S,
      clock: () => now,
      tokens: CLUSTER_TOKENS,
    }),
    { advance: (ms: number) => now += ms, clock: () => now },
  );
  const ok = async (method: string, path: string, body?: unknown, token?: string) =>
    must(await t.call(method, path, body, token), method === "POST" ? 201 : 200);
  await ok("POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 102 }] });
  // A cluster of acme's (with a node and a monitor token): globex is not its tenant.
  await ok("POST", "clusters", { name: "east", tenants: ["acme"] });
  await ok("POST", "tenants/admin/networks", net("shared", "10.200.0.0/28", { public: true }));
  await ok(
    "POST",
    "tenants/acme/networks",
    net("ac-secret-net", "10.50.0.0/28", { gateway: "10.50.0.1" }),
  );
  await ok("POST", "tenants/acme/networks", net("blue", "10.1.0.0/28", { excludes: ["10.1.0.8"] }));
  // Room for the mass releases.
  await ok("POST", "tenants/acme/networks", net("wide", "10.2.0.0/24"));
  await ok(
    "POST",
    "tenants/globex/networks",
    net("gx-secret-net", "10.60.0.0/28", { gateway: "10.60.0.1" }),
  );
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.0.2.1" }, TOKEN.worker1), 201);
  for (const [tenant, nw] of [["acme", "ac-secret-net"], ["globex", "gx-secret-net"]]) {
    const short = tenant === "acme" ? "ac" : "gx";
    must(
      await t.call("PUT", `tenants/${tenant}/networks/shared/ports/${short}-secret-port`, {
        mac: `02:5e:c0:00:00:0${short === "ac" ? 1 : 2}`,
      }, TOKEN.worker1),
      201,
    );
    must(
      await t.call("POST", `tenants/${tenant}/ipgroups`, {
        name: `${short}-secret-group`,
        network: nw,
        size: 2,
      }),
      201,
    );
    // A security group each: the other tenant, and east's tokens (acme only), never see globex's.
    const rules = [{ direction: "ingress", protocol: "tcp", ports: "22", peer: { network: nw } }];
    must(
      await t.call("POST", `tenants/${tenant}/security-groups`, {
        name: `${short}-secret-sg`,
        rules,
      }),
      201,
    );
  }
  // A mirror of each tenant's, from its shared port to a tap port on its secret network.
  for (
    const [tenant, short, nw] of [["acme", "ac", "ac-secret-net"], [
      "globex",
      "gx",
      "gx-secret-net",
    ]]
  ) {
    const tap = `${short}-secret-tap`;
    must(
      await t.call("PUT", `tenants/${tenant}/networks/${nw}/ports/${tap}`, {}, TOKEN.worker1),
      201,
    );
    must(
      await t.call("POST", `tenants/${tenant}/mirrors`, {
        name: `${short}-secret-mirror`,
        sources: [{ network: "shared", port: `${short}-secret-port` }],
        collector: { network: nw, port: tap },
      }),
      201,
    );
  }
  // A claim of each tenant's on the public network, a port of each bound to it.
  for (const short of ["ac", "gx"]) {
    const tenant = short === "ac" ? "acme" : "globex";
    must(
      await t.call("POST", `tenants/${tenant}/networks/shared/claims`, {
        name: `${short}-secret-claim`,
      }),
      201,
    );
  }
  // A router of each tenant's, connecting its secret network: the other tenant must never see it,
  // nor cluster east's tokens globex's (east serves acme only).
  for (const [tenant, short] of [["acme", "ac"], ["globex", "gx"]]) {
    must(
      await t.call("POST", `tenants/${tenant}/routers`, {
        name: `${short}-secret-router`,
        networks: [`${short}-secret-net`],
      }),
      201,
    );
  }
  return t;
}

// ---- values, valid and hostile

const pick = <T>(...values: T[]) => fc.constantFrom(...values);
/** Mostly values that name something (so requests get through and change things), some hostile. */
const mostly = (good: string[], bad: string[]) =>
  fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...good) }, {
    weight: 1,
    arbitrary: fc.constantFrom(...bad),
  });
const PARAM_VALUES: Record<string, fc.Arbitrary<string>> = {
  tenant: mostly(["acme", "globex", "admin"], ["nope", "Acme", "a_b", "x".repeat(70)]),
  network: mostly(["blue", "wide", "shared", "n1", "ac-secret-net", "gx-secret-net"], [
    "nope",
    "BAD",
  ]),
  port: mostly(["p1", "p2", "p3", "stable:acme:db-0-eth0", "gx-secret-port"], [
    "-x",
    "a".repeat(210),
  ]),
  group: mostly(
    ["g1", "g2", "ac-secret-group", "gx-secret-group", "ac-secret-sg", "gx-secret-sg"],
    [
      "G!",
    ],
  ),
  physnet: mostly(["phys1", "phys2"], ["Bad"]),
  node: mostly(["worker1", "worker2"], ["node-x", "UPPER", "a..b"]),
  router: mostly(["r1", "ac-secret-router", "gx-secret-router"], ["R!"]),
  mirror: mostly(["m1", "m2", "ac-secret-mirror", "gx-secret-mirror"], ["M!"]),
  service: mostly(["s1", "s2"], ["S!"]),
  cluster: mostly(["default", "east"], ["Bad!", "nope"]),
  claim: mostly(["c1", "c2", "ac-secret-claim", "gx-secret-claim"], ["C!", "a..b"]),
  pool: mostly(["ext", "ext2"], ["P!"]),
  address: mostly(["203.0.113.1", "203.0.113.2", "203.0.113.9"], ["1.2.3", "999.1.1.1"]),
};
/** Tokens of cluster east, which may use acme's networks and never sees globex's. */
const CLUSTER_TOKENS: TokenConfig[] = [
  { token: "east-node-token-for-fuzz-01", scope: "node", node: "worker1", cluster: "east" },
  { token: "east-monitor-token-for-fuzz", scope: "monitor", cluster: "east" },
];
const TOKENS = {
  admin: TOKEN.admin,
  eastNode: CLUSTER_TOKENS[0].token,
  eastMonitor: CLUSTER_TOKENS[1].token,
  acme: TOKEN.acme,
  globex: TOKEN.globex,
  worker1: TOKEN.worker1,
  worker2: TOKEN.worker2,
  metrics: TOKEN.metrics,
  none: null,
  bogus: "not-a-token-of-this-manager",
} as const;
type TokenKind = keyof typeof TOKENS;

const ip = pick(
  "10.1.0.1",
  "10.1.0.2",
  "10.1.0.5",
  "10.1.0.8",
  "10.1.0.15",
  "10.200.0.3",
  "10.50.0.1",
  "10.60.0.2",
  "300.1.1.1",
  "fd00::5",
  "fd00:20::3",
  "",
);
const mac = pick(
  "02:aa:00:00:00:01",
  "02:aa:00:00:00:02",
  "02:5e:c0:00:00:02",
  "ff:ff:ff:ff:ff:ff",
  "01:00:5e:00:00:01",
  "00:00:00:00:00:00",
  "00:1b:21:00:00:01",
  "02:AA:00:00:00:01",
);
const int = pick(0, 1, 2, 3, 5, 600, 5000, 5001, 100, 4095, 16777216, -1, 1.5, 2 ** 53, 1e300);
const cidr = pick(
  "10.1.0.0/24",
  "10.20.0.0/28",
  "10.21.0.0/30",
  "10.0.0.0/8",
  "10.200.0.0/24",
  "fd00::/64",
  "10.20.0.5/28",
  "bad",
);
const name = pick("n1", "n2", "blue", "shared", "g1", "g2", "phys2", "Bad!", "");
/** A field left out two times in three: requests with a few fields set get furthest. */
const opt = <T>(a: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });

function clean(o: Record<string, unknown>) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/** A port a mirror names: mostly one that exists. */
const MIRROR_PORT = fc.record({
  network: PARAM_VALUES.network,
  port: PARAM_VALUES.port,
});

const SECURITY_RULE = fc.record({
  direction: pick("ingress", "egress", "out"),
  protocol: pick("tcp", "udp", "icmp", "any", "gre"),
  ports: opt(pick("80", "8000-8100", "90-80", "0", "x")),
  peer: opt(fc.oneof(
    fc.record({ cidr }),
    fc.record({ group: PARAM_VALUES.group }),
    fc.record({ network: PARAM_VALUES.network }),
  )),
}).map(clean);

/** Bodies by the schema a route takes, as a careful or careless client would send them. */
const BODIES: Record<string, fc.Arbitrary<unknown>> = {
  TenantCreate: fc.record({ name: PARAM_VALUES.tenant }),
  QuotaSet: fc.record({
    networks: opt(int),
    ports: opt(int),
    addresses: opt(int),
    vlanIds: opt(int),
    vnis: opt(int),
    floatingIps: opt(int),
  }).map(clean),
  NetworkCreate: fc.record({
    name,
    cidr,
    type: opt(pick("vxlan", "vlan", "flat", "gre")),
    physnet: opt(pick("phys1", "phys2")),
    gateway: opt(ip),
    cidr6: opt(pick("fd00:20::/64", "fd00::/64", "fd00:21::/120", "10.9.0.0/24", "fd00:20::5/64")),
    gateway6: opt(pick("fd00:20::1", "fd00:20::5", "fd00:21::1", "10.20.0.1", "::")),
    excludes: opt(
      fc.array(pick("10.20.0.0/29", "10.20.0.8/29", "10.20.0.1-10.20.0.14", "10.0.0.0/9", "x"), {
        maxLength: 3,
      }),
    ),
    public: opt(fc.boolean()),
    segmentId: opt(int),
    mtu: opt(pick(1400, 100, 9000)),
    allocationPools: opt(pick([{ start: "fd00::10", end: "fd00::20" }], [{
      start: "10.20.0.9",
      end: "10.20.0.3",
    }])),
  }).map(clean),
  NetworkUpdate: fc.record({
    mtu: opt(pick(1400, 100)),
    description: opt(pick("d", "x".repeat(2000))),
    cidr: opt(cidr),
    excludes: opt(pick([], ["10.1.0.9"])),
  }).map(clean),
  PortRequest: fc.record({
    ip: opt(ip),
    mac: opt(mac),
    node: opt(PARAM_VALUES.node),
    ipGroup: opt(PARAM_VALUES.group),
    pod: opt(fc.record({ namespace: pick("acme", "globex"), name: pick("db-0", "web") })),
    interface: opt(pick("eth0", "net1", "much-too-long-ifname")),
    claim: opt(PARAM_VALUES.claim),
  }).map(clean),
  ClaimCreate: fc.record({ name: PARAM_VALUES.claim }),
  FloatingPoolCreate: fc.record({
    name: PARAM_VALUES.pool,
    cidrs: fc.array(pick("203.0.113.0/29", "198.51.100.0/30", "10.0.0.0/8", "fd00::/64", "x"), {
      maxLength: 2,
    }),
  }),
  FloatingIpCreate: fc.record({ pool: PARAM_VALUES.pool, address: opt(PARAM_VALUES.address) })
    .map(clean),
  FloatingIpBind: fc.record({
    network: PARAM_VALUES.network,
    port: opt(PARAM_VALUES.port),
    claim: opt(PARAM_VALUES.claim),
  }).map(clean),
  PortGroupsUpdate: fc.record({
    networkId: pick("n-1", "", "x".repeat(80)),
    securityGroups: fc.array(PARAM_VALUES.group, { maxLength: 3 }),
  }),
  IpGroupCreate: fc.record({
    name: PARAM_VALUES.group,
    network: PARAM_VALUES.network,
    size: opt(int),
    addresses: opt(fc.array(ip, { maxLength: 3 })),
  }).map(clean),
  IpGroupUpdate: fc.record({ size: opt(int), addresses: opt(fc.array(ip, { maxLength: 3 })) })
    .map(clean),
  SecurityGroupCreate: fc.record({
    name: PARAM_VALUES.group,
    rules: opt(fc.array(SECURITY_RULE, { maxLength: 3 })),
  }).map(clean),
  SecurityGroupUpdate: fc.record({ rules: fc.array(SECURITY_RULE, { maxLength: 3 }) }),
  RouterCreate: fc.record({
    name: PARAM_VALUES.router,
    networks: fc.array(PARAM_VALUES.network, { maxLength: 3 }),
    routes: opt(fc.array(fc.record({ dst: cidr, via: ip }), { maxLength: 2 })),
  }).map(clean),
  RouterUpdate: fc.record({
    networks: fc.array(PARAM_VALUES.network, { maxLength: 3 }),
    routes: opt(fc.array(fc.record({ dst: cidr, via: ip }), { maxLength: 2 })),
  }).map(clean),
  MirrorCreate: fc.record({
    name: PARAM_VALUES.mirror,
    sources: fc.array(MIRROR_PORT, { maxLength: 3 }),
    direction: opt(pick("in", "out", "both", "sideways")),
    collector: fc.oneof(
      MIRROR_PORT,
      fc.record({
        remote: fc.record({ ip: fc.oneof(ip, pick("fd00::1")), protocol: pick("gre", "vxlan") }),
      }),
    ),
    filter: opt(pick({ protocol: "tcp" })),
  }).map(clean),
  TraceRequest: fc.record({
    from: MIRROR_PORT,
    to: MIRROR_PORT,
    proto: opt(pick("icmp", "tcp", "udp", "gre")),
    dport: opt(pick(80, 0, 65536, -1)),
  }).map(clean),
  ServiceCreate: fc.record({
    name: PARAM_VALUES.service,
    network: PARAM_VALUES.network,
    vip: opt(ip),
    ports: fc.array(
      fc.record({ protocol: opt(pick("TCP", "UDP", "SCTP")), port: int, targetPort: opt(int) })
        .map(clean),
      { maxLength: 3 },
    ),
    backends: fc.array(PARAM_VALUES.port, { maxLength: 3 }),
    sessionAffinity: opt(pick("None", "ClientIP", "Cookie")),
  }).map(clean),
  ServiceUpdate: fc.record({
    ports: fc.array(fc.record({ port: int }), { maxLength: 2 }),
    backends: fc.array(PARAM_VALUES.port, { maxLength: 3 }),
  }),
  PhysnetCreate: fc.record({
    name: PARAM_VALUES.physnet,
    vlanRanges: opt(fc.array(fc.record({ start: int, end: int }), { maxLength: 2 })),
  }).map(clean),
  ClusterCreate: fc.record({
    name: PARAM_VALUES.cluster,
    tenants: opt(fc.array(pick("acme", "*", "Bad!"), { maxLength: 2 })),
    networks: opt(fc.array(pick("acme/blue", "admin/shared", "blue"), { maxLength: 2 })),
    physnets: opt(fc.array(pick("phys1", "*"), { maxLength: 2 })),
  }).map(clean),
  ClusterUpdate: fc.record({
    // Never globex for east: its tokens must not see globex's names (judge()).
    tenants: opt(fc.array(pick("acme", "admin", "Bad!"), { maxLength: 2 })),
    physnets: opt(fc.array(pick("phys1", "*"), { maxLength: 2 })),
  }).map(clean),
  NodeRegister: fc.record({
    underlayIp: pick("192.0.2.7", "nope", "fd00::1"),
    labels: opt(pick({ a: "b" }, { [`k`.repeat(400)]: "v" })),
  }).map(clean),
  ConflictReport: fc.record({
    items: fc.array(
      fc.record({
        networkId: pick("n-1", "", "x".repeat(80)),
        tenant: PARAM_VALUES.tenant,
        id: pick("p1", "db-0", "../x"),
        field: pick("mac", "ip", "vni"),
        value: fc.oneof(ip, mac),
        reason: pick("local", "remote", "other"),
        with: opt(fc.record({ tenant: PARAM_VALUES.tenant, id: pick("p1", "p2") })),
      }).map(clean),
      { maxLength: 3 },
    ),
  }),
};

/** Bodies that mostly go through: without them most sequences would only be refused. */
const PLAIN: Record<string, fc.Arbitrary<unknown>> = {
  PortRequest: fc.oneof(
    fc.constant({}),
    fc.record({ pod: fc.record({ namespace: pick("acme", "globex"), name: pick("db-0", "web") }) }),
    fc.record({ mac: pick("02:aa:00:00:00:01", "02:aa:00:00:00:02") }),
    fc.record({ ip: pick("10.1.0.2", "10.1.0.3", "10.200.0.3", "10.50.0.3") }),
    fc.record({ claim: pick("c1", "c2") }),
  ),
  ClaimCreate: fc.record({ name: pick("c1", "c2") }),
  NetworkCreate: fc.record({
    name: pick("n1", "n2"),
    cidr: pick("10.20.0.0/28", "10.21.0.0/28", "10.22.0.0/29"),
    cidr6: pick("fd00:20::/64", "fd00:21::/64"),
  }, { requiredKeys: ["name", "cidr"] }),
  IpGroupCreate: fc.record({
    name: pick("g1", "g2"),
    network: pick("blue", "shared"),
    size: pick(1, 2),
  }),
  QuotaSet: fc.record({ ports: pick(2, 4), addresses: pick(3, 6) }, { requiredKeys: [] }),
  RouterCreate: fc.record({
    name: pick("r1", "r2"),
    networks: pick(["ac-secret-net"], ["n1", "ac-secret-net"], ["blue"], ["shared"]),
  }),
  MirrorCreate: fc.record({
    name: pick("m1", "m2"),
    sources: pick([{ network: "blue", port: "p1" }], [{ network: "shared", port: "p2" }]),
    collector: pick({ network: "blue", port: "p3" }, {
      remote: { ip: "192.0.2.9", protocol: "gre" },
    }),
  }),
  TraceRequest: fc.record({
    from: pick({ network: "blue", port: "p1" }, { network: "shared", port: "p2" }),
    to: pick({ network: "blue", port: "p3" }, { network: "blue", port: "p1" }),
  }),
  ServiceCreate: fc.record({
    name: pick("s1", "s2"),
    network: pick("blue", "ac-secret-net", "shared"),
    ports: pick([{ port: 80 }], [{ protocol: "UDP", port: 53 }]),
    backends: pick([], ["p1"], ["p1", "p3"]),
  }),
};

/** Careless and hostile variations of any body. */
function hostile(body: fc.Arbitrary<unknown>): fc.Arbitrary<{ body: unknown; type: string }> {
  const json = "application/json";
  return fc.oneof(
    { weight: 16, arbitrary: body.map((b) => ({ body: b, type: json })) },
    {
      weight: 1,
      arbitrary: fc.tuple(body, pick("name", "ip", "mac", "cidr", "extra", "size"))
        .map(([b, k]) => ({ body: { ...(b as object), [k]: null }, type: json })),
    },
    {
      weight: 1,
      arbitrary: fc.jsonValue({ maxDepth: 2 }).map((v) => ({ body: v, type: json })),
    },
    {
      weight: 1,
      arbitrary: pick("{", "", "[]", "null", '{"a":1}{').map((s) => ({ body: s, type: json })),
    },
    { weight: 1, arbitrary: body.map((b) => ({ body: b, type: "text/plain" })) },
  );
}

// ---- operations, from the OpenAPI document

interface Operation {
  method: string;
  path: string;
  params: string[];
  query: string[];
  /** The name of the body schema in BODIES. */
  body?: string;
}

function operations(): Operation[] {
  const doc = openApiDocument(ROUTES);
  const bodyName = (method: string, path: string) => {
    const r = ROUTES.find((r) => r.method === method && r.path === path)!;
    if (!r.body) return undefined;
    const found = Object.keys(BODIES).find((k) => (S as Record<string, unknown>)[k] === r.body);
    assert.ok(found, `no body generator for ${method} ${path}`);
    return found;
  };
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [m, op] of Object.entries(methods)) {
      const parameters = (op as { parameters: { name: string; in: string }[] }).parameters;
      const method = m.toUpperCase();
      out.push({
        method,
        path,
        params: parameters.filter((p) => p.in === "path").map((p) => p.name),
        query: parameters.filter((p) => p.in === "query").map((p) => p.name),
        body: bodyName(method, path),
      });
    }
  }
  return out;
}

import * as S from "./schemas.ts";

const QUERY_VALUES: Record<string, fc.Arbitrary<string>> = {
  node: PARAM_VALUES.node,
  pod: pick("acme/db-0", "globex/db-0", "nope", "a/b/c"),
  tenant: PARAM_VALUES.tenant,
  after: pick("00000000:0", "zz", "ffffffff:99999999999"),
  // Never a wait: the feed's long poll would only slow the run down.
  timeout: pick("0", "", "61", "99999999999", "-1", "1e3"),
  // A stream: the cursors above are never current (410), so none stays open to hold the run.
  stream: pick("ndjson", "sse", ""),
  // The address history's query (service/history.ts).
  ip: pick("10.200.0.2", "10.200.0.3", "10.1.0.2", "fd00::2", "10.1.0.300", ""),
  mac: pick("02:5e:c0:00:00:01", "02-5E-C0-00-00-02", "02:00:00:00:00:01", "zz", ""),
  at: pick("2026-11-25T00:00:00Z", "yesterday", "", "8640000000000001"),
  from: pick("2026-11-24T00:00:00Z", "not-a-time"),
  to: pick("2026-11-26T00:00:00Z", "1970-01-01T00:00:00Z"),
};

interface Command {
  op: Operation;
  token: TokenKind;
  params: Record<string, string>;
  query: Record<string, string>;
  body?: { body: unknown; type: string };
}

const TOKEN_KINDS = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom<TokenKind>("admin", "acme") },
  {
    weight: 3,
    arbitrary: fc.constantFrom<TokenKind>("globex", "worker1", "eastNode", "eastMonitor"),
  },
  { weight: 1, arbitrary: fc.constantFrom<TokenKind>("worker2", "metrics", "none", "bogus") },
);

function command(ops: Operation[]): fc.Arbitrary<Command> {
  return fc.tuple(fc.constantFrom(...ops), TOKEN_KINDS).chain(([op, token]) =>
    fc.record({
      op: fc.constant(op),
      token: fc.constant(token),
      // A tenant token mostly names its own tenant (else most answers are a 403).
      params: fc.record(Object.fromEntries(op.params.map((p) => [
        p,
        p === "tenant" && (token === "acme" || token === "globex")
          ? fc.oneof({ weight: 3, arbitrary: fc.constant(token) }, {
            weight: 1,
            arbitrary: PARAM_VALUES.tenant,
          })
          : PARAM_VALUES[p],
      ]))),
      query: fc.record(
        Object.fromEntries(op.query.map((q) => [q, QUERY_VALUES[q]])),
        { requiredKeys: [] },
      ).map((q) => {
        // With a cursor, a feed request waits unless told not to.
        const out = q as Record<string, string>;
        if (out.after !== undefined && out.timeout === undefined) out.timeout = "0";
        return out;
      }),
      body: op.body
        ? (PLAIN[op.body]
          ? fc.oneof(
            {
              weight: 2,
              arbitrary: PLAIN[op.body].map((b) => ({ body: b, type: "application/json" })),
            },
            { weight: 1, arbitrary: hostile(BODIES[op.body]) },
          )
          : hostile(BODIES[op.body]))
        : fc.constant(undefined),
    })
  );
}

function urlOf(c: Command): string {
  const path = c.op.path.replace(/\{(\w+)\}/g, (_, p) => encodeURIComponent(c.params[p]));
  const q = new URLSearchParams(c.query).toString();
  return q ? `${path}?${q}` : path;
}

async function send(t: TestApp, c: Command) {
  const headers: Record<string, string> = {};
  const token = TOKENS[c.token];
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body: string | undefined;
  if (c.body) {
    headers["content-type"] = c.body.type;
    body = typeof c.body.body === "string" ? c.body.body : JSON.stringify(c.body.body);
  }
  const res = await t.app.request(urlOf(c), { method: c.op.method, headers, body });
  const text = await res.text();
  return { status: res.status, text };
}

// ---- the invariants

/** Answers by status class, to see that the runs do change things, not only get refused. */
const statuses = new Map<string, number>();

/**
 * Besides requests: many ports of network wide made and released at once, then maybe the clock
 * moved past their quarantine and a port asked for.
 */
type Action = { massRelease: number; expire: boolean };

const ACTION: fc.Arbitrary<Action> = fc.record({
  massRelease: fc.constantFrom(5, 48, 110),
  expire: fc.boolean(),
});

function commandOrAction(ops: Operation[]): fc.Arbitrary<Command | Action> {
  return fc.oneof({ weight: 8, arbitrary: command(ops) }, { weight: 1, arbitrary: ACTION });
}

const WIDE = "tenants/acme/networks/wide/ports";

/**
 * Valid requests of a tenant: refusals are fine (a quota, the network gone or being deleted),
 * a 400 (one commit too many, as in issue 33) or a 5xx is not.
 */
async function tenantCall(t: TestApp, method: string, path: string): Promise<void> {
  const r = await t.call(method, path, method === "PUT" ? {} : undefined, TOKEN.acme);
  assert.ok(r.status !== 400 && r.status < 500, `${method} ${path}: ${JSON.stringify(r.body)}`);
}

async function act(t: World, a: Action): Promise<void> {
  const ids = Array.from({ length: a.massRelease }, (_, i) => `mass-${i}`);
  await Promise.all(ids.map((id) => tenantCall(t, "PUT", `${WIDE}/${id}`)));
  await Promise.all(ids.map((id) => tenantCall(t, "DELETE", `${WIDE}/${id}`)));
  if (!a.expire) return;
  t.advance(QUARANTINE_S * 1000 + 1);
  await tenantCall(t, "PUT", `${WIDE}/after-expiry`);
  await tenantCall(t, "DELETE", `${WIDE}/after-expiry`);
}

async function step(t: World, c: Command | Action, seen: Set<string>): Promise<void> {
  if (!("op" in c)) {
    await act(t, c);
    assert.deepEqual((await checkStore(t.store, t)).problems, [], `after ${JSON.stringify(c)}`);
    return;
  }
  const before = await dump(t.store);
  const r = await send(t, c);
  const what = judge(t, c, r, seen);
  if (r.status >= 400) {
    assert.deepEqual(await dump(t.store), before, `${what}: an error answer changed the store`);
  }
  const report = await checkStore(t.store, t);
  assert.deepEqual(report.problems, [], `${what}: the store is inconsistent`);
}

/** What holds for one answer alone: no 5xx, the error shape, no other tenant's names. */
function judge(
  t: TestApp,
  c: Command,
  r: { status: number; text: string },
  seen: Set<string>,
): string {
  const what = `${c.op.method} ${urlOf(c)} as ${c.token} ${JSON.stringify(c.body ?? "")}`.slice(
    0,
    400,
  );
  seen.add(`${c.op.method} ${c.op.path}`);
  const cls = `${c.op.method === "GET" ? "read" : "write"} ${r.status}`;
  statuses.set(cls, (statuses.get(cls) ?? 0) + 1);
  assert.ok(r.status < 500, `${what}: ${r.status} ${r.text}`);
  assert.deepEqual(t.internal, [], what);
  if (r.status >= 400) {
    const err = JSON.parse(r.text);
    assert.deepEqual(Object.keys(err), ["error"], `${what}: ${r.text}`);
    assert.ok(typeof err.error.code === "string" && err.error.message.length > 0, r.text);
  }
  const acmeSide = c.token === "acme" || c.token === "eastNode" || c.token === "eastMonitor";
  if (acmeSide || c.token === "globex") {
    const asked = urlOf(c) + JSON.stringify(c.body?.body ?? "");
    const other = acmeSide ? SECRETS.globex : SECRETS.acme;
    for (const s of other) {
      if (asked.includes(s)) continue;
      assert.ok(!r.text.includes(s), `${what}: the answer names ${s}: ${r.text.slice(0, 300)}`);
    }
  }
  return what;
}

Deno.test("fuzz: every operation, valid and hostile requests, every token: the invariants hold", async () => {
  const ops = operations();
  assert.ok(ops.length >= 30, `${ops.length} operations`);
  const seen = new Set<string>();
  const seed = env("KNITTER_FUZZ_SEED");
  const path = env("KNITTER_FUZZ_PATH");
  const started = performance.now();
  await fc.assert(
    fc.asyncProperty(
      fc.array(commandOrAction(ops), { minLength: 1, maxLength: STEPS }),
      async (cmds) => {
        using t = await world();
        for (const c of cmds) await step(t, c, seen);
      },
    ),
    {
      numRuns: RUNS,
      interruptAfterTimeLimit: TIME_MS,
      ...(seed ? { seed: Number(seed) } : {}),
      ...(path ? { path } : {}),
    },
  );
  const ms = performance.now() - started;
  console.log(`fuzz: ${seen.size} of ${ops.length} operations exercised in ${Math.round(ms)} ms`);
  console.log(`fuzz: answers ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
  const writesDone = [...statuses].filter(([k]) => /^write 20/.test(k)).reduce(
    (a, [, n]) => a + n,
    0,
  );
  // A run of a few sequences (on etcd) may by chance change nothing; the longer run on Deno KV
  // is the one that shows the generators reach writes at all.
  if (RUNS >= 20) assert.ok(writesDone > 0, "no request changed anything");
  // A short run covers most operations; a long one all of them.
  if (RUNS >= 100) assert.equal(seen.size, ops.length, [...seen].join(", "));
});

Deno.test("fuzz: requests racing each other leave a consistent store", async () => {
  const ops = operations().filter((o) => o.method !== "GET");
  const seen = new Set<string>();
  const seed = env("KNITTER_FUZZ_SEED");
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(command(ops), { minLength: 2, maxLength: 6 }), {
        minLength: 1,
        maxLength: 6,
      }),
      async (rounds) => {
        using t = await world();
        for (const round of rounds) {
          const answers = await Promise.all(round.map((c) => send(t, c)));
          round.forEach((c, i) => judge(t, c, answers[i], seen));
          const report = await checkStore(t.store, t);
          assert.deepEqual(report.problems, [], `after ${round.length} racing requests`);
        }
      },
    ),
    {
      numRuns: RUNS,
      interruptAfterTimeLimit: TIME_MS,
      ...(seed ? { seed: Number(seed) } : {}),
    },
  );
});
