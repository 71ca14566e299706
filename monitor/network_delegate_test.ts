/**
 * A Network resource's delegate is fixed at creation, as the manager keeps it: a spec asking for
 * another master is named in the condition; the same delegate written with its keys in another
 * order is no change.
 */
import assert from "node:assert/strict";
import { immutableProblem, type ManagerNetwork } from "./networks.ts";

const NET: ManagerNetwork = {
  id: "n",
  tenant: "acme",
  name: "data",
  type: "vxlan",
  cidr: "10.1.0.0/24",
  allocationPools: [{ start: "10.1.0.1", end: "10.1.0.254" }],
  excludes: [],
  public: false,
  egress: false,
  hostAccess: false,
  mtu: 1450,
  routes: [],
  dns: {},
  delegate: { plugin: "macvlan", master: "eth1", mode: "bridge" },
  usage: { total: 254, used: 0, free: 254 },
};

Deno.test("monitor: a Network's delegate cannot change; the same one in another key order is no change", () => {
  const spec = { cidr: "10.1.0.0/24", dataPlane: "external" as const };
  assert.equal(
    immutableProblem(
      { ...spec, delegate: { mode: "bridge", master: "eth1", plugin: "macvlan" } },
      NET,
    ),
    undefined,
  );
  const moved = immutableProblem(
    { ...spec, delegate: { plugin: "macvlan", master: "eth0", mode: "bridge" } },
    NET,
  );
  assert.equal(moved?.reason, "ImmutableFieldChanged");
  assert.match(moved!.message, /^delegate \(is .*"eth1".*the spec asks .*"eth0"/);
});
