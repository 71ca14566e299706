/**
 * End to end on real Open vSwitch: on a public network two tenants' ports may have the same ID
 * (port IDs are per tenant). Each node's view of the other nodes' ports must keep both, or one
 * tenant's pod is missing from the flows of the nodes that do not host it.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack } from "../devstack/stack.ts";
import { portIdFor } from "../agent/cni/pod_request.ts";
import { addressOf, knitterList, makePod, pings } from "./support/pods.ts";

Deno.test("e2e public ports: two tenants' pods whose ports have the same ID are each reached at their own address, across nodes, and deleting one keeps the other", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  for (const name of ["acme", "globex"]) {
    assert.equal((await stack.api("POST", "tenants", { name })).status, 201);
  }
  const shared = await stack.api("POST", "tenants/admin/networks", {
    name: "shared",
    cidr: "10.40.0.0/24",
    gateway: "10.40.0.1",
    public: true,
  });
  assert.equal(shared.status, 201, JSON.stringify(shared.body));

  // The same pod UID and container ID on two nodes: the same port ID, one in each tenant.
  const list = knitterList(["shared"]);
  const same = { podUid: "sameuid", containerId: "samecontainer" };
  const a = await makePod(n1, "a", "acme", list, same);
  const b = await makePod(n2, "b", "globex", list, same);
  const p = await makePod(n2, "p", "acme", list);
  const q = await makePod(n1, "q", "globex", list);
  const ips: Record<string, string> = {};
  for (const pod of [a, b, p, q]) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  }
  const id = portIdFor("sameuid-samecontainer", "eth0");
  for (const tenant of ["acme", "globex"]) {
    const r = await stack.api("GET", `tenants/${tenant}/networks/shared/ports/${id}`);
    assert.equal(r.status, 200, `${tenant} has port ${id}: ${JSON.stringify(r.body)}`);
  }
  assert.notEqual(ips.a, ips.b);

  assert.ok(await pings(p, ips.a), "p (on n2, beside b) reaches acme's a on n1");
  assert.ok(await pings(q, ips.b), "q (on n1, beside a) reaches globex's b on n2");
  assert.ok(await pings(a, ips.p), "a reaches p");
  assert.ok(await pings(b, ips.q), "b reaches q");

  assert.equal((await b.del()).code, 0);
  assert.ok(await pings(p, ips.a), "globex's port deleted: acme's of the same ID stays reachable");
  assert.ok(!(await pings(q, ips.b)), "and globex's is gone");

  for (const pod of [a, p, q]) assert.equal((await pod.del()).code, 0);
});
