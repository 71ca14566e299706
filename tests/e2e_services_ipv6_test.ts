/**
 * Services on IPv6 networks, end to end, as far as the nodes balance them today (agent/PIPELINE.md,
 * "Services", "Not covered"): two simulated nodes with real Open vSwitch; an IPv6-only network's
 * service (an IPv6 VIP the compiler has no flows for) must not break its node's flows, and a
 * dual-stack network's service with both families keeps its IPv4 VIP balanced over backends on
 * both nodes while its status says the IPv6 VIP answers nothing yet.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type StackNode, startStack } from "../devstack/stack.ts";
import { knitterList, makePod, podBook } from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { bucketsAre, count, portId, serveBackends, TARGET } from "./support/service_checks.ts";

Deno.test("e2e IPv6 services: an IPv6-only service leaves the node's flows whole; a dual-stack service's IPv4 VIP is balanced over both nodes", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" }, 201);
  const network = (body: Record<string, unknown>) =>
    api(stack, "POST", "tenants/acme/networks", body, 201);
  await network({ name: "six", cidr: "fd00:72::/120", gateway: "fd00:72::1" });
  await network({
    name: "dual",
    cidr: "10.73.0.0/24",
    gateway: "10.73.0.1",
    cidr6: "fd00:73::/64",
    gateway6: "fd00:73::1",
  });

  const book = podBook();
  const pod = async (node: StackNode, name: string, net: string) => {
    const p = await makePod(node, name, "acme", knitterList([net]));
    await book.add(p);
    return p;
  };
  // n1 has a pod on the IPv6-only network: its service is of a network of n1's.
  const lone = await pod(n1, "v6b", "six");
  await api(stack, "POST", "tenants/acme/services", {
    name: "six",
    network: "six",
    ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
    backends: [await portId(stack, lone)],
  }, 201);

  const client = await pod(n1, "dc", "dual");
  const backends = [await pod(n1, "db1", "dual"), await pod(n2, "db2", "dual")];
  await serveBackends(cleanup, backends);
  const made = await api(stack, "POST", "tenants/acme/services", {
    name: "front",
    network: "dual",
    ipFamilies: ["IPv4", "IPv6"],
    ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
    backends: await Promise.all(backends.map((b) => portId(stack, b))),
  }, 201);
  assert.match(made.vips[0], /^10\.73\.0\.\d+$/);
  assert.match(made.vips[1], /^fd00:73::[0-9a-f]+$/);
  assert.match(made.status.message, /is held but answers nothing yet/);
  // Two endpoints per family.
  assert.equal(made.status.endpoints.length, 4);

  // n1 compiles the IPv4 VIP's groups though it also has the IPv6-only service.
  const ips = backends.map((b) => book.ips[b.name]);
  await bucketsAre(n1, ips);
  // Two backends: each gets between 30 % and 70 % of the connections, none fails.
  const c = await count(client, made.vip, 200);
  assert.equal(c.failures, 0, JSON.stringify(c));
  for (const b of backends) {
    const share = (c.names[b.name] ?? 0) / 200;
    assert.ok(share >= 0.3 && share <= 0.7, `${b.name} got ${c.names[b.name]} of 200`);
  }
});
