/**
 * A network's `advertise` (agent/README.md, "BGP advertisement"): the admin's choice, only within
 * the admin's advertisable ranges, never two overlapping networks, on the feed to the agents.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const ACME = "tenants/acme/networks";
const GLOBEX = "tenants/globex/networks";
const BLUE = `${ACME}/blue`;

async function world(ranges = ["10.0.0.0/8", "fd00::/8"]): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex", "initech"], advertisableRanges: ranges });
  must(
    await t.call(
      "POST",
      ACME,
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1", cidr6: "fd00:1::/64" }),
    ),
    201,
  );
  return t;
}

Deno.test("attack: a tenant cannot advertise its network to the fabric (create or change)", async () => {
  using t = await world();
  mustFail(
    await attempt(t)("PATCH", BLUE, { advertise: true }, TOKEN.acme),
    403,
    "forbidden",
    { field: "advertise", message: /only an admin.*ask the admin/ },
  );
  mustFail(
    await attempt(t)(
      "POST",
      ACME,
      net("red", "10.2.0.0/24", { gateway: "10.2.0.1", advertise: true }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "advertise" },
  );
  const blue = must(await t.call("GET", BLUE, undefined, TOKEN.acme), 200);
  assert.equal(blue.advertise, false);
});

Deno.test("attack: a tenant's CIDR that overlaps another tenant's advertised network is not advertised", async () => {
  using t = await world();
  must(await t.call("PATCH", BLUE, { advertise: true }, TOKEN.admin), 200);
  // globex took the same CIDR (allowed: tenants' networks are apart) and asks the admin.
  must(await t.call("POST", GLOBEX, net("copy", "10.1.0.0/25", { gateway: "10.1.0.1" })), 201);
  mustFail(
    await attempt(t)("PATCH", `${GLOBEX}/copy`, { advertise: true }, TOKEN.admin),
    409,
    "conflict",
    { field: "advertise", message: /overlaps.*advertised.*one routing table.*another cidr/ },
  );
  mustFail(
    await attempt(t)(
      "POST",
      "tenants/initech/networks",
      net("wide", "10.0.0.0/15", { gateway: "10.0.0.1", advertise: true }),
      TOKEN.admin,
    ),
    409,
    "conflict",
    { field: "advertise" },
  );
  // The IPv6 CIDRs are checked too.
  mustFail(
    await attempt(t)(
      "POST",
      GLOBEX,
      net("six", "10.9.0.0/24", { gateway: "10.9.0.1", cidr6: "fd00:1::/56", advertise: true }),
      TOKEN.admin,
    ),
    409,
    "conflict",
    { field: "advertise", message: /fd00:1::\/56/ },
  );
  const copy = must(await t.call("GET", `${GLOBEX}/copy`, undefined, TOKEN.globex), 200);
  assert.equal(copy.advertise, false);
});

Deno.test("attack: a public range is never advertised, even by the admin: only the configured ranges", async () => {
  using t = await world();
  must(await t.call("POST", GLOBEX, net("pub", "8.8.8.0/24", { gateway: "8.8.8.1" })), 201);
  mustFail(
    await attempt(t)("PATCH", `${GLOBEX}/pub`, { advertise: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /8\.8\.8\.0\/24 is outside.*bgp\.advertisableRanges/ },
  );
  must(
    await t.call(
      "POST",
      GLOBEX,
      net("v6pub", "10.7.0.0/24", { gateway: "10.7.0.1", cidr6: "2001:db8::/64" }),
    ),
    201,
  );
  mustFail(
    await attempt(t)("PATCH", `${GLOBEX}/v6pub`, { advertise: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /2001:db8::\/64 is outside/ },
  );
});

Deno.test("advertise: with no advertisable ranges configured nothing is advertised (the default)", async () => {
  using t = await world([]);
  mustFail(
    await attempt(t)("PATCH", BLUE, { advertise: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /no advertisable ranges.*bgp\.advertisableRanges/ },
  );
});

Deno.test("advertise: needs a gateway (the node's host port), and Knitter's own data plane", async () => {
  using t = await world();
  must(await t.call("POST", ACME, net("bare", "10.3.0.0/24"), TOKEN.acme), 201);
  mustFail(
    await attempt(t)("PATCH", `${ACME}/bare`, { advertise: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /no gateway/ },
  );
  mustFail(
    await attempt(t)(
      "POST",
      ACME,
      net("ext", "10.4.0.0/24", {
        gateway: "10.4.0.1",
        type: "vlan",
        physnet: "p1",
        dataPlane: "external",
        advertise: true,
      }),
      TOKEN.admin,
    ),
    400,
    "invalid_request",
    { field: "advertise" },
  );
});

Deno.test("advertise: the admin turns it on, the ports on the feed carry it, the tenant may turn it off", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}, TOKEN.acme), 201);
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor;
  const on = must(await t.call("PATCH", BLUE, { advertise: true }, TOKEN.admin), 200);
  assert.equal(on.advertise, true);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.deepEqual(page.events.map((e: { type: string }) => e.type), ["port"]);
  assert.equal(page.events[0].port.networkAdvertise, true);
  // Sent as it is by the tenant: fine; turned off by the tenant: fine (withdrawn).
  must(await t.call("PATCH", BLUE, { advertise: true, description: "x" }, TOKEN.acme), 200);
  const off = must(await t.call("PATCH", BLUE, { advertise: false }, TOKEN.acme), 200);
  assert.equal(off.advertise, false);
  const port = must(await t.call("GET", `${BLUE}/ports/p1`, undefined, TOKEN.acme), 200);
  assert.equal(port.networkAdvertise, undefined);
  // Off, its CIDR no longer blocks another tenant's.
  must(
    await t.call(
      "POST",
      GLOBEX,
      net("same", "10.1.0.0/24", { gateway: "10.1.0.1", advertise: true }),
      TOKEN.admin,
    ),
    201,
  );
});
