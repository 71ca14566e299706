/**
 * A network's data plane at the manager: an external network (another plugin's interfaces, the
 * knitter IPAM) keeps its addresses, segment and tenant here and tells its ports so; what only
 * Knitter's flows carry out (security groups, DSCP, egress, hostAccess, bandwidth limits, routers)
 * is refused on it, saying why, since no flow would ever apply it.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp } from "./test_support.ts";

Deno.test("data plane: an external network's ports say so; an ovs network's say nothing", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const data = must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("data", "10.1.0.0/24", { dataPlane: "external" }),
    ),
    201,
  );
  assert.equal(data.dataPlane, "external");
  assert.ok(data.segmentId !== undefined, "it still has its segment");
  const port = must(await t.call("PUT", "tenants/acme/networks/data/ports/p1", {}), 201);
  assert.equal(port.networkDataPlane, "external");
  const plain = must(await t.call("POST", "tenants/acme/networks", net("web", "10.2.0.0/24")), 201);
  assert.equal(plain.dataPlane, undefined);
  const p2 = must(await t.call("PUT", "tenants/acme/networks/web/ports/p2", {}), 201);
  assert.equal(p2.networkDataPlane, undefined);
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("odd", "10.3.0.0/24", { dataPlane: "sriov" }),
    ),
    400,
    "invalid_request",
    { field: "dataPlane" },
  );
});

Deno.test("data plane: what only Knitter's flows do is refused on an external network, naming the field", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/security-groups", { name: "web", rules: [] }), 201);
  const flowsOnly: [string, unknown][] = [
    ["securityGroups", ["web"]],
    ["dscp", 46],
    ["egress", true],
    ["hostAccess", true],
    ["bandwidth", { ingressRate: 1_000_000 }],
  ];
  for (const [field, value] of flowsOnly) {
    const body = net(`x${field.toLowerCase()}`, "10.4.0.0/24", {
      gateway: "10.4.0.1",
      dataPlane: "external",
      [field]: value,
    });
    mustFail(await t.call("POST", "tenants/acme/networks", body), 400, "invalid_request", {
      field,
      message: /external.*Open vSwitch/,
    });
  }
});

Deno.test("data plane: a router refuses an external network (its routing is Knitter's flows), naming it", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("web", "10.5.0.0/24", { gateway: "10.5.0.1" }),
    ),
    201,
  );
  const data = net("data", "10.6.0.0/24", { gateway: "10.6.0.1", dataPlane: "external" });
  must(await t.call("POST", "tenants/acme/networks", data), 201);
  mustFail(
    await t.call("POST", "tenants/acme/routers", { name: "r1", networks: ["web", "data"] }),
    400,
    "invalid_request",
    { field: "networks[1]", message: /"data" has the external data plane/ },
  );
});

Deno.test("data plane: a change of an external network refuses the same, and lets them stay off", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const data = net("data", "10.7.0.0/24", { gateway: "10.7.0.1", dataPlane: "external" });
  must(await t.call("POST", "tenants/acme/networks", data), 201);
  const path = "tenants/acme/networks/data";
  for (const [field, value] of [["dscp", 46], ["egress", true], ["hostAccess", true]] as const) {
    mustFail(await t.call("PATCH", path, { [field]: value }), 400, "invalid_request", {
      field,
      message: /external.*Open vSwitch/,
    });
  }
  const off = { dscp: null, egress: false, hostAccess: false, description: "macvlan on eth1.300" };
  assert.equal(must(await t.call("PATCH", path, off), 200).description, "macvlan on eth1.300");
});

Deno.test("data plane: a port of an external network cannot name security groups, at PUT or PATCH; nothing is allocated", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/security-groups", { name: "web", rules: [] }), 201);
  const data = must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("data", "10.1.0.0/24", { dataPlane: "external" }),
    ),
    201,
  );
  mustFail(
    await t.call("PUT", "tenants/acme/networks/data/ports/p1", { securityGroups: ["web"] }),
    400,
    "invalid_request",
    { field: "securityGroups", message: /external.*Open vSwitch/ },
  );
  mustFail(await t.call("GET", "tenants/acme/networks/data/ports/p1"), 404, "not_found");
  must(await t.call("PUT", "tenants/acme/networks/data/ports/p2", {}), 201);
  mustFail(
    await t.call("PATCH", "tenants/acme/networks/data/ports/p2", {
      networkId: data.id,
      securityGroups: ["web"],
    }),
    400,
    "invalid_request",
    { field: "securityGroups", message: /external.*Open vSwitch/ },
  );
  const p2 = must(await t.call("GET", "tenants/acme/networks/data/ports/p2"), 200);
  assert.equal(p2.securityGroups, undefined);
  must(
    await t.call("PATCH", "tenants/acme/networks/data/ports/p2", {
      networkId: data.id,
      securityGroups: [],
    }),
    200,
  );
});
