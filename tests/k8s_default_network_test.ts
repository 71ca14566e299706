/**
 * One `kubectl apply -k deploy/` is a working install: the monitor makes the cluster's default
 * network at the manager from its configuration (`defaultNetwork`), once, marked as Knitter's, so no
 * Network resource (whose CRD would have to be established first) is needed. Started again, it
 * changes nothing; a Network resource of that name, applied by choice, adopts it; a network of that
 * name that Knitter did not make is left alone.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, type KubeCluster, startKubeCluster } from "./support/kube_cluster.ts";

const SPEC = {
  type: "vxlan" as const,
  cidr: "10.245.0.0/24",
  gateway: "10.245.0.1",
  public: true,
  description: "the cluster's default pod network (eth0)",
};

const ready = (o: KubeObject | undefined) =>
  o?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

async function readyz(k: KubeCluster): Promise<{ status: number; reasons: string[] }> {
  const r = await fetch(`${k.monitor!.healthUrl}/readyz`);
  const body = await r.json();
  return { status: r.status, reasons: body.reasons ?? [] };
}

Deno.test("stand-in API server: the monitor makes the configured default network once, marked as Knitter's; a Network resource of its name adopts it", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { defaultNetwork: { namespace: "knitter-system", name: "cluster", spec: SPEC } },
  });
  await k.startMonitor();
  await eventually("ready", async () => (await readyz(k)).status === 200 ? true : undefined);
  const made = await k.stack.api("GET", "tenants/knitter-system/networks/cluster");
  assert.equal(made.status, 200, JSON.stringify(made.body));
  assert.equal(made.body.cidr, SPEC.cidr);
  assert.equal(made.body.public, true);
  assert.deepEqual(made.body.labels, {
    "app.kubernetes.io/managed-by": "knitter-monitor",
    "knitter.io/network-resource": "knitter-system/cluster",
  });
  // Public: a port of another tenant's pod gets an address on it.
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status));
  const port = await k.stack.api("PUT", "tenants/acme/networks/cluster/ports/p1", {});
  assert.equal(port.status, 201, JSON.stringify(port.body));

  // Started again: the same network, nothing made twice.
  await k.stopMonitor();
  await k.startMonitor();
  await eventually("ready again", async () => (await readyz(k)).status === 200 ? true : undefined);
  const again = await k.stack.api("GET", "tenants/knitter-system/networks/cluster");
  assert.equal(again.body.id, made.body.id);
  const all = await k.stack.api("GET", "tenants/knitter-system/networks");
  assert.equal(all.body.items.filter((n: { name: string }) => n.name === "cluster").length, 1);

  // The optional Network resource (deploy/default-network/) adopts it instead of refusing it.
  k.namespace("knitter-system");
  k.api.create("networks", {
    metadata: { name: "cluster", namespace: "knitter-system" },
    spec: SPEC,
  });
  const adopted = await eventually("the resource Ready", () => {
    const o = k.api.get("networks", "knitter-system", "cluster");
    return ready(o)?.status === "True" ? o : undefined;
  });
  assert.equal(adopted.status.networkId, made.body.id);
  assert.equal(adopted.status.usage.used, 1);
});

Deno.test("stand-in API server: a network of the default network's name that Knitter did not make is left alone", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { defaultNetwork: { namespace: "knitter-system", name: "cluster", spec: SPEC } },
  });
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/knitter-system")).status));
  const theirs = await k.stack.api("POST", "tenants/knitter-system/networks", {
    name: "cluster",
    cidr: "10.246.0.0/24",
    public: true,
  });
  assert.equal(theirs.status, 201, JSON.stringify(theirs.body));
  await k.startMonitor();
  await eventually("ready", async () => (await readyz(k)).status === 200 ? true : undefined);
  const after = await k.stack.api("GET", "tenants/knitter-system/networks/cluster");
  assert.equal(after.body.id, theirs.body.id);
  assert.equal(after.body.cidr, "10.246.0.0/24");
  assert.equal(after.body.labels?.["knitter.io/network-resource"], undefined);
});
