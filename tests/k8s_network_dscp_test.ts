/**
 * A Network resource's `dscp` through the monitor (real client library, stand-in API server) into
 * a real manager and its ports: set at creation, then changed.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, startKubeCluster } from "./support/kube_cluster.ts";

const ready = (o: KubeObject | undefined) =>
  o?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

Deno.test("stand-in API server: a Network resource's dscp reaches the manager's network and its ports, a change too", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  k.api.create("networks", {
    metadata: { name: "data", namespace: "acme" },
    spec: { cidr: "10.33.0.0/24", gateway: "10.33.0.1", dscp: 46 },
  });
  await eventually("Network ready", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.status === "True" ? o : undefined;
  });
  const net = await k.stack.api("GET", "tenants/acme/networks/data");
  assert.equal(net.body.dscp, 46, JSON.stringify(net.body));
  const port = await k.stack.api("PUT", "tenants/acme/networks/data/ports/p1", {});
  assert.equal(port.body.networkDscp, 46);

  k.api.update("networks", "acme", "data", (o) => (o.spec.dscp = 10));
  await eventually("the change applied", async () => {
    const r = await k.stack.api("GET", "tenants/acme/networks/data");
    return r.body.dscp === 10 ? true : undefined;
  });
  const after = await k.stack.api("GET", "tenants/acme/networks/data/ports/p1");
  assert.equal(after.body.networkDscp, 10, "the port carries the new marking at once");
  assert.equal(ready(k.api.get("networks", "acme", "data"))?.status, "True");
  assert.equal((await k.stack.api("DELETE", "tenants/acme/networks/data/ports/p1")).status, 204);
});
