/**
 * Services on IPv6 (issue 29 for issue 28's services), the way Kubernetes does dual-stack Services
 * (`ipFamilies`, `ipFamilyPolicy`): the hostile requests first, each refused with a clear 4xx and
 * nothing written; then what a tenant relies on: an IPv6-only network's VIP from its pool, a
 * dual-stack network's VIPs per family (IPv4 only unless asked), backends resolved per family.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";
import { checkStore } from "./check.ts";

const ACME = "tenants/acme";
const GLOBEX = "tenants/globex";

/**
 * acme: v6 (IPv6-only, fd00:6::/120, ports a6 on worker1 and b6 on worker2) and dual
 * (10.5.0.0/24 + fd00:5::/64, ports d1 on worker1, d2 on worker2); a4 (IPv4 only); globex: g6
 * (IPv6-only) with port gp.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  const post = async (path: string, body: unknown) => must(await t.call("POST", path, body), 201);
  await post(`${ACME}/networks`, net("v6", "fd00:6::/120", { gateway: "fd00:6::1" }));
  await post(
    `${ACME}/networks`,
    net("dual", "10.5.0.0/24", {
      gateway: "10.5.0.1",
      cidr6: "fd00:5::/64",
      gateway6: "fd00:5::1",
    }),
  );
  await post(`${ACME}/networks`, net("a4", "10.4.0.0/24"));
  await post(`${GLOBEX}/networks`, net("g6", "fd00:7::/120"));
  const put = async (path: string, body: unknown) => must(await t.call("PUT", path, body), 201);
  await put(`${ACME}/networks/v6/ports/a6`, { node: "worker1" });
  await put(`${ACME}/networks/v6/ports/b6`, { node: "worker2" });
  await put(`${ACME}/networks/dual/ports/d1`, { node: "worker1" });
  await put(`${ACME}/networks/dual/ports/d2`, { node: "worker2" });
  await put(`${GLOBEX}/networks/g6/ports/gp`, { node: "worker1" });
  return t;
}

const svc = (more: Record<string, unknown> = {}) => ({
  name: "front",
  network: "v6",
  ports: [{ protocol: "TCP", port: 80, targetPort: 8080 }],
  backends: ["a6", "b6"],
  ...more,
});

/** The tenant's networks' usage, to show a refusal took nothing. */
async function usage(t: TestApp) {
  const out: Record<string, number> = {};
  for (const n of ["v6", "dual", "a4"]) {
    out[n] = must(await t.call("GET", `${ACME}/networks/${n}`), 200).usage.used;
  }
  return out;
}

// ---- attacks

Deno.test("attack (IPv6): a service cannot be on another tenant's IPv6 network nor take its ports", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("POST", `${GLOBEX}/services`, svc({ backends: [] }), TOKEN.globex),
    404,
    "not_found",
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ backends: ["a6", "gp"] }), TOKEN.acme),
    404,
    "not_found",
    { field: "backends[1]" },
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ network: "g6", backends: [] }), TOKEN.acme),
    404,
    "not_found",
  );
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("attack (IPv6): a VIP of the wrong family, outside the CIDR or held is refused, and nothing is taken", async () => {
  using t = await world();
  const req = attempt(t);
  const before = await usage(t);
  const a6 = must(await t.call("GET", `${ACME}/networks/v6/ports/a6`), 200).ip;
  const dual = { network: "dual", backends: [] };
  // [what the request adds, the status, the code, what the message says]
  const cases: [Record<string, unknown>, number, string, RegExp][] = [
    // A VIP of the other family than the network's or than the first family asked for.
    [{ vip: "10.5.0.9" }, 400, "invalid_request", /10\.5\.0\.9 is IPv4.*IPv6-only/],
    [{ network: "a4", backends: [], vip: "fd00:4::9" }, 400, "invalid_request", /is IPv6.*IPv4/],
    [
      { ...dual, ipFamilies: ["IPv6", "IPv4"], vip: "10.5.0.9" },
      400,
      "invalid_request",
      /10\.5\.0\.9 is IPv4.*ipFamilies\[0\] is IPv6/,
    ],
    // Outside the network.
    [{ vip: "fd00:9::5" }, 400, "invalid_request", /outside fd00:6::\/120/],
    [
      { ...dual, ipFamilies: ["IPv6"], vip: "fd00:9::5" },
      400,
      "invalid_request",
      /outside fd00:5::/,
    ],
    // A port's address, the gateway.
    [{ vip: a6 }, 409, "address_taken", /used by port "a6"/],
    [{ vip: "fd00:6::1" }, 409, "address_taken", /gateway/],
  ];
  for (const [more, status, code, message] of cases) {
    const res = await req("POST", `${ACME}/services`, svc(more), TOKEN.acme);
    mustFail(res, status, code, { field: "vip", message });
  }
  assert.deepEqual(await usage(t), before);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("attack (IPv6): families a network lacks, or a policy they contradict, are refused", async () => {
  using t = await world();
  const req = attempt(t);
  const before = await usage(t);
  const refused = async (body: Record<string, unknown>, field: string, message: RegExp) =>
    mustFail(
      await req("POST", `${ACME}/services`, svc({ backends: [], ...body }), TOKEN.acme),
      400,
      "invalid_request",
      { field, message },
    );
  await refused({ ipFamilies: ["IPv4"] }, "ipFamilies[0]", /network "v6" has no IPv4 subnet/);
  await refused(
    { network: "a4", ipFamilies: ["IPv6"] },
    "ipFamilies[0]",
    /network "a4" has no IPv6 subnet/,
  );
  await refused(
    { network: "a4", ipFamilyPolicy: "RequireDualStack" },
    "ipFamilyPolicy",
    /"a4" is not dual-stack/,
  );
  await refused(
    { network: "dual", ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "SingleStack" },
    "ipFamilyPolicy",
    /SingleStack takes one family/,
  );
  mustFail(
    await req("POST", `${ACME}/services`, svc({ ipFamilies: ["IPv6", "IPv6"] }), TOKEN.acme),
    400,
    "invalid_request",
  );
  assert.deepEqual(await usage(t), before);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("attack (IPv6): a full IPv6 pool refuses the VIP and changes nothing", async () => {
  using t = await world();
  // A /126: three hosts (IPv6 has no broadcast address), the gateway and two ports.
  must(
    await t.call(
      "POST",
      `${ACME}/networks`,
      net("tiny6", "fd00:8::/126", { gateway: "fd00:8::1" }),
    ),
    201,
  );
  must(await t.call("PUT", `${ACME}/networks/tiny6/ports/only`, { node: "worker1" }), 201);
  must(await t.call("PUT", `${ACME}/networks/tiny6/ports/other`, { node: "worker2" }), 201);
  mustFail(
    await attempt(t)(
      "POST",
      `${ACME}/services`,
      svc({ network: "tiny6", backends: ["only"] }),
      TOKEN.acme,
    ),
    409,
    "pool_exhausted",
    { field: "vip" },
  );
  mustFail(await t.call("GET", `${ACME}/services/front`), 404, "not_found");
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

// ---- what a tenant relies on

Deno.test("an IPv6-only network's service: an IPv6 VIP from the pool, IPv6 endpoints, freed on delete", async () => {
  using t = await world();
  const made = must(await t.call("POST", `${ACME}/services`, svc(), TOKEN.acme), 201);
  assert.match(made.vip, /^fd00:6::[0-9a-f]+$/);
  assert.deepEqual(made.vips, [made.vip]);
  assert.deepEqual(made.ipFamilies, ["IPv6"]);
  assert.equal(made.ipFamilyPolicy, "SingleStack");
  const ips = new Set([
    must(await t.call("GET", `${ACME}/networks/v6/ports/a6`), 200).ip,
    must(await t.call("GET", `${ACME}/networks/v6/ports/b6`), 200).ip,
  ]);
  assert.deepEqual(new Set(made.status.endpoints.map((e: { ip: string }) => e.ip)), ips);
  assert.equal(made.status.message, undefined);
  const listed = must(await t.call("GET", "services", undefined, TOKEN.worker1), 200).items;
  assert.deepEqual(listed[0].vips, [made.vip]);
  // A named VIP.
  const named = must(
    await t.call("POST", `${ACME}/services`, svc({ name: "named", vip: "fd00:6::80" }), TOKEN.acme),
    201,
  );
  assert.equal(named.vip, "fd00:6::80");
  must(await t.call("DELETE", `${ACME}/services/named`, undefined, TOKEN.acme), 204);
  must(await t.call("PUT", `${ACME}/networks/v6/ports/late`, { ip: "fd00:6::80" }), 201);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("a dual-stack network's service: IPv4 only by default, both when asked, backends per family", async () => {
  using t = await world();
  const dual = (more: Record<string, unknown>) =>
    svc({ network: "dual", backends: ["d1", "d2"], ...more });
  const v4 = must(await t.call("POST", `${ACME}/services`, dual({ name: "v4" }), TOKEN.acme), 201);
  assert.match(v4.vip, /^10\.5\.0\.\d+$/);
  assert.deepEqual(v4.ipFamilies, ["IPv4"]);
  assert.deepEqual(v4.vips, [v4.vip]);

  const both = must(
    await t.call(
      "POST",
      `${ACME}/services`,
      dual({ name: "both", ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "RequireDualStack" }),
      TOKEN.acme,
    ),
    201,
  );
  assert.equal(both.vips.length, 2);
  assert.equal(both.vip, both.vips[0]);
  assert.match(both.vips[0], /^10\.5\.0\.\d+$/);
  // The IPv6 VIP is the IPv4 one's pair, as a port's addresses are.
  assert.equal(both.vips[1], `fd00:5::${both.vips[0].split(".")[3]}`);
  const d1 = must(await t.call("GET", `${ACME}/networks/dual/ports/d1`), 200);
  const d2 = must(await t.call("GET", `${ACME}/networks/dual/ports/d2`), 200);
  assert.deepEqual(
    new Set(both.status.endpoints.map((e: { ip: string }) => e.ip)),
    new Set([d1.ip, d2.ip, d1.ip6, d2.ip6]),
  );

  // PreferDualStack with no families: both, IPv4 first.
  const prefer = must(
    await t.call(
      "POST",
      `${ACME}/services`,
      dual({ name: "prefer", ipFamilyPolicy: "PreferDualStack" }),
      TOKEN.acme,
    ),
    201,
  );
  assert.deepEqual(prefer.ipFamilies, ["IPv4", "IPv6"]);
  // IPv6 first, the VIP named by its IPv6 address.
  const six = must(
    await t.call(
      "POST",
      `${ACME}/services`,
      dual({ name: "six", ipFamilies: ["IPv6", "IPv4"], vip: "fd00:5::77" }),
      TOKEN.acme,
    ),
    201,
  );
  assert.deepEqual(six.vips, ["fd00:5::77", "10.5.0.119"]);
  assert.deepEqual(six.ipFamilyPolicy, "RequireDualStack");
  // The pair is held with it: no port takes 10.5.0.119.
  for (const ip of ["10.5.0.119", "fd00:5::77"]) {
    mustFail(
      await attempt(t)("PUT", `${ACME}/networks/dual/ports/late`, { ip }, TOKEN.acme),
      409,
      "address_taken",
      { message: /the VIP of service "six"/ },
    );
  }
  // An update keeps the families and VIPs.
  const upd = must(
    await t.call("PUT", `${ACME}/services/six`, {
      ports: [{ protocol: "UDP", port: 53 }],
      backends: ["d1"],
    }, TOKEN.acme),
    200,
  );
  assert.deepEqual(upd.vips, six.vips);
  assert.deepEqual(upd.ipFamilies, ["IPv6", "IPv4"]);
  assert.deepEqual(upd.status.endpoints.map((e: { ip: string }) => e.ip), [d1.ip6, d1.ip]);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
