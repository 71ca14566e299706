/**
 * A network's delegate at the manager: how an external network's interfaces are made (macvlan,
 * ipvlan, host-device, sriov on a node's interface). The node's interfaces are the admin's: a tenant
 * neither chooses one nor changes the one of a network, its own or another's.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const MACVLAN = { plugin: "macvlan", master: "eth1", mode: "bridge" };

function external(name: string, cidr: string, delegate: unknown) {
  return net(name, cidr, { dataPlane: "external", delegate });
}

Deno.test("delegate: an admin gives an external network one; it is shown and its ports carry it", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const data = must(
    await t.call("POST", "tenants/acme/networks", external("data", "10.1.0.0/24", MACVLAN)),
    201,
  );
  assert.deepEqual(data.delegate, MACVLAN);
  const port = must(await t.call("PUT", "tenants/acme/networks/data/ports/p1", {}), 201);
  assert.deepEqual(port.networkDelegate, MACVLAN);
  const plain = must(await t.call("POST", "tenants/acme/networks", net("web", "10.2.0.0/24")), 201);
  assert.equal(plain.delegate, undefined);
});

Deno.test("delegate attack: a tenant cannot set a delegate master, on its own network or another's", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  // At creation, in its own tenant: a node's interface is not the tenant's to choose.
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      external("mine", "10.1.0.0/24", { plugin: "host-device", device: "eth0" }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "delegate", message: /admin/ },
  );
  assert.equal((await t.call("GET", "tenants/acme/networks/mine")).status, 404);
  // The admin's network in acme: acme cannot move it to another master.
  must(
    await t.call("POST", "tenants/acme/networks", external("data", "10.2.0.0/24", MACVLAN)),
    201,
  );
  const moved = { ...MACVLAN, master: "eth0" };
  mustFail(
    await t.call("PATCH", "tenants/acme/networks/data", { delegate: moved }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "delegate", message: /keeps the delegate/ },
  );
  // Another tenant does not reach acme's network at all.
  const other = await t.call(
    "PATCH",
    "tenants/acme/networks/data",
    { delegate: moved },
    TOKEN.globex,
  );
  assert.ok(other.status === 403 || other.status === 404, JSON.stringify(other.body));
  // Not even the admin moves it: ports made on eth1 would stay there.
  mustFail(
    await t.call("PATCH", "tenants/acme/networks/data", { delegate: moved }),
    400,
    "invalid_request",
    { field: "delegate" },
  );
  const after = must(await t.call("GET", "tenants/acme/networks/data"), 200);
  assert.deepEqual(after.delegate, MACVLAN);
  // The same delegate sent along with a whole spec is fine.
  must(await t.call("PATCH", "tenants/acme/networks/data", { delegate: MACVLAN }, TOKEN.acme), 200);
});

Deno.test("delegate: unknown plugins, bad interface names and an ovs network are refused, naming the field", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const bad: [unknown, string][] = [
    [{ plugin: "bridge", master: "eth1" }, "delegate.plugin"],
    [{ plugin: "macvlan", master: "../eth1" }, "delegate.master"],
    [{ plugin: "macvlan", master: "a-name-longer-than-15" }, "delegate.master"],
    [{ plugin: "macvlan", master: "eth1", mode: "l2" }, "delegate.mode"],
    [{ plugin: "ipvlan", master: "eth1", mode: "bridge" }, "delegate.mode"],
    [{ plugin: "host-device", master: "eth1" }, "delegate.device"],
    [{ plugin: "sriov", deviceID: "eth1" }, "delegate.deviceID"],
  ];
  for (const [k, [delegate, field]] of bad.entries()) {
    const reply = await t.call(
      "POST",
      "tenants/acme/networks",
      external(`bad${k}`, `10.${k + 10}.0.0/24`, delegate),
    );
    mustFail(reply, 400, "invalid_request", { field });
  }
  mustFail(
    await t.call("POST", "tenants/acme/networks", net("ovs", "10.3.0.0/24", { delegate: MACVLAN })),
    400,
    "invalid_request",
    { field: "delegate", message: /external/ },
  );
});
