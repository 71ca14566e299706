/** A network's egress and hostAccess: off by default, checked, changed at once, on the feed. */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const NETS = "tenants/acme/networks";
const BLUE = `${NETS}/blue`;

async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex", "initech"] });
  must(await t.call("POST", NETS, net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" })), 201);
  return t;
}

Deno.test("node reach: egress and hostAccess are off by default, set at creation and by PATCH", async () => {
  using t = await world();
  const blue = must(await t.call("GET", BLUE, undefined, TOKEN.acme), 200);
  assert.equal(blue.egress, false);
  assert.equal(blue.hostAccess, false);
  const green = must(
    await t.call(
      "POST",
      NETS,
      net("green", "10.2.0.0/24", { gateway: "10.2.0.1", egress: true, hostAccess: true }),
      TOKEN.admin,
    ),
    201,
  );
  assert.equal(green.egress, true);
  assert.equal(green.hostAccess, true);
  const on = must(await t.call("PATCH", BLUE, { egress: true }, TOKEN.admin), 200);
  assert.deepEqual([on.egress, on.hostAccess], [true, false]);
  // The tenant may send it as it is, and turn it off.
  must(await t.call("PATCH", BLUE, { egress: true, description: "x" }, TOKEN.acme), 200);
  const off = must(await t.call("PATCH", BLUE, { egress: false }, TOKEN.acme), 200);
  assert.equal(off.egress, false);
});

Deno.test("node reach: only an admin turns egress or hostAccess on (the node's addresses and routes are at stake)", async () => {
  using t = await world();
  for (const field of ["egress", "hostAccess"]) {
    mustFail(
      await attempt(t)("PATCH", BLUE, { [field]: true }, TOKEN.acme),
      403,
      "forbidden",
      { field, message: /only an admin may turn it on.*ask the admin/ },
    );
    mustFail(
      await attempt(t)(
        "POST",
        NETS,
        net(`n-${field.toLowerCase()}`, "10.4.0.0/24", { gateway: "10.4.0.1", [field]: true }),
        TOKEN.acme,
      ),
      403,
      "forbidden",
      { field },
    );
  }
  const blue = must(await t.call("GET", BLUE, undefined, TOKEN.acme), 200);
  assert.deepEqual([blue.egress, blue.hostAccess], [false, false]);
});

Deno.test("node reach: both need a gateway, with an error that says what to do; an IPv6-only network's will do", async () => {
  using t = await world();
  must(await t.call("POST", NETS, net("bare", "10.3.0.0/24"), TOKEN.acme), 201);
  mustFail(
    await attempt(t)("PATCH", `${NETS}/bare`, { egress: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "egress", message: /has no gateway.*give the network a gateway/ },
  );
  const six = must(
    await t.call(
      "POST",
      NETS,
      net("six", "fd00:6::/64", { gateway: "fd00:6::1", hostAccess: true, egress: true }),
      TOKEN.admin,
    ),
    201,
  );
  assert.deepEqual([six.egress, six.hostAccess], [true, true]);
});

Deno.test("node reach: hostAccess networks overlap neither each other nor egress networks, and another tenant's is not named", async () => {
  using t = await world();
  must(await t.call("PATCH", BLUE, { hostAccess: true }, TOKEN.admin), 200);
  const RED = "tenants/globex/networks/red";
  must(
    await t.call(
      "POST",
      "tenants/globex/networks",
      net("red", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  for (const field of ["hostAccess", "egress"]) {
    const refused = mustFail(
      await attempt(t)("PATCH", RED, { [field]: true }),
      409,
      "conflict",
      { field, message: /overlaps a network of another tenant that has hostAccess/ },
    );
    assert.doesNotMatch(refused, /acme|blue/);
  }
  mustFail(
    await attempt(t)(
      "POST",
      "tenants/initech/networks",
      net("teal", "10.1.0.0/16", { gateway: "10.1.0.1", hostAccess: true }),
    ),
    409,
    "conflict",
    { field: "hostAccess" },
  );
  // Egress networks may overlap each other (each has its own table on the node), not hostAccess.
  must(await t.call("PATCH", BLUE, { hostAccess: false, egress: true }, TOKEN.admin), 200);
  must(await t.call("PATCH", RED, { egress: true }), 200);
  mustFail(
    await attempt(t)(
      "POST",
      "tenants/initech/networks",
      net("teal", "10.1.0.0/16", { gateway: "10.1.0.1", hostAccess: true }),
    ),
    409,
    "conflict",
    { field: "hostAccess", message: /another tenant that has egress/ },
  );
});

Deno.test("node reach: a change reaches the agents through the network's ports on the feed", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}, TOKEN.acme), 201);
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor;
  must(await t.call("PATCH", BLUE, { egress: true, hostAccess: true }, TOKEN.admin), 200);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.deepEqual(page.events.map((e: { type: string }) => e.type), ["port"]);
  assert.equal(page.events[0].port.networkEgress, true);
  assert.equal(page.events[0].port.networkHostAccess, true);
  must(await t.call("PATCH", BLUE, { egress: false, hostAccess: false }, TOKEN.acme), 200);
  const port = must(await t.call("GET", `${BLUE}/ports/p1`, undefined, TOKEN.acme), 200);
  assert.equal(port.networkEgress, undefined);
  assert.equal(port.networkHostAccess, undefined);
});

Deno.test("node reach: a cluster's monitor turns them on as the admin's delegate, only for its tenants' networks", async () => {
  const monitor = "east-monitor-token-for-tests";
  using t = await testApp({
    tenants: ["acme", "globex"],
    tokens: [{ token: monitor, scope: "monitor", cluster: "east" }],
  });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", NETS, net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" })), 201);
  const red = net("red", "10.2.0.0/24", { gateway: "10.2.0.1" });
  must(await t.call("POST", "tenants/globex/networks", red), 201);
  const on = must(await t.call("PATCH", BLUE, { egress: true, hostAccess: true }, monitor), 200);
  assert.deepEqual([on.egress, on.hostAccess], [true, true]);
  const other = await attempt(t)("PATCH", "tenants/globex/networks/red", { egress: true }, monitor);
  assert.ok(other.status === 403 || other.status === 404, JSON.stringify(other));
});

Deno.test("node reach: a dual-stack network's IPv6 subnet overlaps no other hostAccess network's either (the node routes both families in its main table)", async () => {
  using t = await world();
  const dual = (name: string, third: number, cidr6: string, more = {}) =>
    net(name, `10.${third}.0.0/24`, {
      gateway: `10.${third}.0.1`,
      cidr6,
      gateway6: cidr6.replace("::/64", "::1").replace("::/48", "::1"),
      ...more,
    });
  must(
    await t.call("POST", NETS, dual("red6", 5, "fd00:5::/64", { hostAccess: true }), TOKEN.admin),
    201,
  );
  // Other IPv4 subnets, an IPv6 subnet around red6's: refused, naming the setting.
  const refused = mustFail(
    await attempt(t)(
      "POST",
      "tenants/globex/networks",
      dual("wide6", 6, "fd00:5::/48", { hostAccess: true }),
    ),
    409,
    "conflict",
    { field: "hostAccess", message: /fd00:5::\/48 overlaps a network of another tenant/ },
  );
  assert.doesNotMatch(refused, /acme|red6/);
  // Turned on later, the same.
  must(await t.call("POST", "tenants/globex/networks", dual("wide6", 6, "fd00:5::/48")), 201);
  mustFail(
    await attempt(t)("PATCH", "tenants/globex/networks/wide6", { egress: true }),
    409,
    "conflict",
    { field: "egress" },
  );
  // Disjoint IPv6 subnets are fine.
  must(
    await t.call(
      "POST",
      "tenants/initech/networks",
      dual("apart6", 7, "fd00:7::/64", { hostAccess: true }),
      TOKEN.admin,
    ),
    201,
  );
});
