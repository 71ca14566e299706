/**
 * Routers through kubectl: a Router resource in the stand-in API server, reconciled by the monitor
 * (real client library) into a real manager's router, changed and deleted with it; one naming
 * another namespace's network (another tenant's) is refused and says why in its status.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, startKubeCluster } from "./support/kube_cluster.ts";

const ready = (o: KubeObject | undefined) =>
  o?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

Deno.test("stand-in API server: a Router resource connects the namespace's networks in the manager, follows its spec, and refuses another tenant's network", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  for (const ns of ["acme", "globex"]) k.namespace(ns);
  const nets: [string, string, string][] = [
    ["acme", "red", "10.81.0"],
    ["acme", "blue", "10.82.0"],
    ["globex", "green", "10.83.0"],
  ];
  for (const [namespace, name, prefix] of nets) {
    k.api.create("networks", {
      metadata: { name, namespace },
      spec: { cidr: `${prefix}.0/24`, gateway: `${prefix}.1` },
    });
  }
  for (const [namespace, name] of nets) {
    await eventually(`${namespace}/${name} ready`, () => {
      return ready(k.api.get("networks", namespace, name))?.status === "True" ? true : undefined;
    });
  }
  k.api.create("routers", {
    metadata: { name: "planes", namespace: "acme" },
    spec: { networks: ["red", "blue"], routes: [{ dst: "10.9.0.0/16", via: "10.82.0.9" }] },
  });
  // acme naming globex's network: there is none of that name in acme.
  k.api.create("routers", {
    metadata: { name: "sneaky", namespace: "acme" },
    spec: { networks: ["red", "green"] },
  });

  const made = await eventually("Router ready", () => {
    const o = k.api.get("routers", "acme", "planes");
    return ready(o)?.status === "True" ? o : undefined;
  });
  assert.deepEqual(made!.status.networks, [
    { name: "red", cidr: "10.81.0.0/24" },
    { name: "blue", cidr: "10.82.0.0/24" },
  ]);
  assert.deepEqual(made!.metadata.finalizers, ["knitter.io/manager"]);
  const router = await k.stack.api("GET", "tenants/acme/routers/planes");
  assert.equal(router.status, 200, JSON.stringify(router.body));
  assert.deepEqual(router.body.routes, [{ dst: "10.9.0.0/16", via: "10.82.0.9" }]);

  const refused = await eventually("the other tenant's network refused", () => {
    const o = k.api.get("routers", "acme", "sneaky");
    return ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(refused)!.reason, "NotFound");
  assert.match(ready(refused)!.message, /"green" does not exist in tenant "acme"/);
  assert.equal((await k.stack.api("GET", "tenants/acme/routers/sneaky")).status, 404);
  assert.equal((await k.stack.api("GET", "tenants/globex/routers")).body.items.length, 0);

  // A changed spec replaces the router's networks and routes.
  k.api.update("routers", "acme", "planes", (o) => {
    o.spec = { networks: ["red"] };
  });
  await eventually("the router follows the spec", async () => {
    const r = await k.stack.api("GET", "tenants/acme/routers/planes");
    return r.body.networks?.length === 1 && r.body.routes.length === 0 ? true : undefined;
  });

  // Deleted: gone from the manager, and the resource goes once the finalizer is dropped.
  k.api.delete("routers", "acme", "planes");
  await eventually("the resource gone", () => {
    return k.api.get("routers", "acme", "planes") === undefined ? true : undefined;
  });
  assert.equal((await k.stack.api("GET", "tenants/acme/routers/planes")).status, 404);
});
