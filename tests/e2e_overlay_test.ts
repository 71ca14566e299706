/**
 * End to end on real Open vSwitch (userspace datapath) in network namespaces: a manager, two
 * simulated nodes with an agent each, pods attached through the real CNI plugin.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, knitterList, makePod, pings } from "./support/pods.ts";
import { startStack } from "../devstack/stack.ts";

Deno.test("e2e overlay: pods of one VXLAN network reach each other across nodes; other networks and tenants do not", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  for (const name of ["acme", "globex"]) {
    assert.equal((await stack.api("POST", "tenants", { name })).status, 201);
  }
  const nets: [string, string, string][] = [
    ["acme", "control", "10.10.0.0/24"],
    ["acme", "data", "10.20.0.0/24"],
    ["globex", "control", "10.30.0.0/24"],
  ];
  for (const [tenant, name, cidr] of nets) {
    const r = await stack.api("POST", `tenants/${tenant}/networks`, {
      name,
      cidr,
      gateway: cidr.replace("0/24", "1"),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }

  const a1 = await makePod(n1, "a1", "acme", knitterList(["control"]));
  const a2 = await makePod(n2, "a2", "acme", knitterList(["control"]));
  const d2 = await makePod(n2, "d2", "acme", knitterList(["data"]));
  const g2 = await makePod(n2, "g2", "globex", knitterList(["control"]));
  const ips: Record<string, string> = {};
  for (const pod of [a1, a2, d2, g2]) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  }

  assert.ok(await pings(a1, ips.a2), "a1 reaches a2 on the same network across nodes");
  assert.ok(await pings(a2, ips.a1), "and back");
  assert.ok(!(await pings(a1, ips.d2)), "a1 does not reach another network of its tenant");
  assert.ok(!(await pings(a1, ips.g2)), "a1 does not reach another tenant's network");

  for (const pod of [a1, a2, d2, g2]) {
    assert.equal((await pod.del()).code, 0);
    assert.equal((await pod.del()).code, 0, "a second DEL succeeds too");
  }
  // Nothing is left: no OVS port, no veth on the node, no allocation.
  for (const node of [n1, n2]) {
    const ports = await new Ovs(node.sim.ovs).listPorts("br-int");
    assert.deepEqual(ports.filter((p) => p.externalIds["knitter-port"]).map((p) => p.name), []);
    const links = await run(["ip", "-n", node.sim.netns, "-o", "link", "show", "type", "veth"]);
    const podVeths = links.stdout.split("\n").filter((l) => /^\d+: kn/.test(l));
    assert.deepEqual(podVeths, [], `no pod veth left on ${node.name}`);
  }
  for (const [tenant, name] of nets) {
    const r = await stack.api("GET", `tenants/${tenant}/networks/${name}`);
    assert.equal(r.body.usage.used, 0, `${tenant}/${name} has no allocation left`);
  }
});
