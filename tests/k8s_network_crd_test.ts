/**
 * Networks as a service through kubectl: Network and IPGroup resources in the stand-in API server,
 * reconciled by the monitor (real client library) into a real manager, and back into their status.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, startKubeCluster } from "./support/kube_cluster.ts";

const ready = (o: KubeObject | undefined) =>
  o?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

Deno.test("stand-in API server: a Network resource is created, changed and deleted in the manager, its status says how it went", async () => {
  await using cleanup = new Cleanup();
  // acme is trusted with egress and hostAccess here (the admin listed it).
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { nodeReachNamespaces: ["knitter-system", "acme"] },
  });
  await k.startMonitor();
  k.namespace("acme");
  k.api.create("networks", {
    metadata: { name: "data", namespace: "acme" },
    spec: { cidr: "10.30.0.0/24", gateway: "10.30.0.1", description: "data plane" },
  });

  // Created: the namespace's tenant exists without anyone making it, the network is there.
  const created = await eventually("Network ready", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.status === "True" ? o : undefined;
  });
  const net = await k.stack.api("GET", "tenants/acme/networks/data");
  assert.equal(net.status, 200, JSON.stringify(net.body));
  assert.equal(net.body.cidr, "10.30.0.0/24");
  assert.deepEqual([net.body.egress, net.body.hostAccess], [false, false]);
  assert.equal(created!.status.networkId, net.body.id);
  assert.equal(created!.status.segmentId, net.body.segmentId, "the VNI the manager gave");
  assert.equal(created!.status.usage.total, 253);
  assert.equal(created!.status.observedGeneration, 1);
  assert.deepEqual(created!.metadata.finalizers, ["knitter.io/manager"]);

  // Usage follows ports allocated in the manager.
  const port = await k.stack.api("PUT", "tenants/acme/networks/data/ports/p1", {});
  assert.equal(port.status, 201);
  await eventually(
    "usage counts the port",
    () => k.api.get("networks", "acme", "data")?.status?.usage?.used === 1 ? true : undefined,
  );

  // Mutable fields are applied; a changed CIDR is refused in the condition, naming it.
  k.api.update("networks", "acme", "data", (o) => {
    o.spec.mtu = 1400;
    o.spec.bandwidth = { ingressRate: 20_000_000, egressRate: 10_000_000 };
    o.spec.egress = true;
    o.spec.hostAccess = true;
    o.spec.description = "data plane, jumbo-less";
    o.spec.cidr = "10.31.0.0/24";
  });
  const refused = await eventually("the CIDR change refused", () => {
    const o = k.api.get("networks", "acme", "data");
    return o?.status?.observedGeneration === 2 && ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(refused)!.reason, "ImmutableFieldChanged");
  assert.match(
    ready(refused)!.message,
    /cidr \(is "10.30.0.0\/24", the spec asks "10.31.0.0\/24"\).*cannot change after creation; the other changes were applied/,
  );
  const changed = (await k.stack.api("GET", "tenants/acme/networks/data")).body;
  assert.equal(changed.mtu, 1400);
  assert.deepEqual(changed.bandwidth, { ingressRate: 20_000_000, egressRate: 10_000_000 });
  assert.deepEqual([changed.egress, changed.hostAccess], [true, true]);
  assert.equal(changed.description, "data plane, jumbo-less");
  assert.equal(changed.cidr, "10.30.0.0/24");

  // Put back: ready again.
  k.api.update("networks", "acme", "data", (o) => (o.spec.cidr = "10.30.0.0/24"));
  await eventually("ready again", () => {
    const o = k.api.get("networks", "acme", "data");
    return o?.status?.observedGeneration === 3 && ready(o)?.status === "True" ? true : undefined;
  });

  // Deleted while a port uses it: held, and the condition says why; released, it goes.
  k.api.delete("networks", "acme", "data");
  const held = await eventually("deletion held", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.reason === "InUse" ? o : undefined;
  });
  assert.match(ready(held)!.message, /Cannot delete network "data": 1 address\(es\) are in use/);
  assert.ok(held!.metadata.deletionTimestamp);
  assert.equal((await k.stack.api("DELETE", "tenants/acme/networks/data/ports/p1")).status, 204);
  await eventually(
    "resource gone",
    () => k.api.get("networks", "acme", "data") === undefined ? true : undefined,
  );
  assert.equal((await k.stack.api("GET", "tenants/acme/networks/data")).status, 404);
});

Deno.test("stand-in API server: an IPGroup resource holds addresses, grows, reports its ports, and a bad one says why", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  k.api.create("networks", {
    metadata: { name: "db", namespace: "acme" },
    spec: { cidr: "10.40.0.0/24" },
  });
  k.api.create("ipgroups", {
    metadata: { name: "dbs", namespace: "acme" },
    spec: { network: "db", addresses: ["10.40.0.10", "10.40.0.11"] },
  });
  k.api.create("ipgroups", {
    metadata: { name: "broken", namespace: "acme" },
    spec: { network: "nowhere", size: 2 },
  });
  const group = await eventually("IPGroup ready", () => {
    const o = k.api.get("ipgroups", "acme", "dbs");
    return ready(o)?.status === "True" ? o : undefined;
  });
  assert.deepEqual(group!.status.addresses, [{ ip: "10.40.0.10" }, { ip: "10.40.0.11" }]);
  assert.equal(group!.status.size, 2);

  const bad = await eventually("the bad IPGroup refused", () => {
    const o = k.api.get("ipgroups", "acme", "broken");
    return ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(bad)!.reason, "NotFound");
  assert.match(ready(bad)!.message, /nowhere/);

  const port = await k.stack.api("PUT", "tenants/acme/networks/db/ports/p1", { ipGroup: "dbs" });
  assert.equal(port.status, 201, JSON.stringify(port.body));
  k.api.update("ipgroups", "acme", "dbs", (o) => {
    o.spec.addresses = ["10.40.0.10", "10.40.0.11", "10.40.0.12"];
  });
  const grown = await eventually("grown, with the port listed", () => {
    const o = k.api.get("ipgroups", "acme", "dbs");
    return o?.status?.size === 3 && o.status.used === 1 ? o : undefined;
  });
  assert.ok(grown!.status.addresses.some((a: { port?: string }) => a.port === "p1"));
});

Deno.test("stand-in API server: a Network resource never adopts a network of the same name made through the REST API; deleting the resource leaves that network alone", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  // The monitor may have made the namespace's tenant already: the PUT is idempotent.
  const tenant = await k.stack.api("PUT", "tenants/acme");
  assert.ok([200, 201].includes(tenant.status), JSON.stringify(tenant.body));
  const theirs = await k.stack.api("POST", "tenants/acme/networks", {
    name: "data",
    cidr: "10.30.0.0/24",
    description: "made by hand",
  });
  assert.equal(theirs.status, 201);
  assert.equal((await k.stack.api("PUT", "tenants/acme/networks/data/ports/p1", {})).status, 201);

  k.api.create("networks", {
    metadata: { name: "data", namespace: "acme" },
    spec: { cidr: "10.30.0.0/24", description: "the resource's" },
  });
  const refused = await eventually("the resource refuses the other network", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(refused)!.reason, "NotOwned");
  assert.match(
    ready(refused)!.message,
    /network "data" of tenant "acme" exists in the manager and was not made by this resource .*left as it is/,
  );
  assert.equal(refused!.status.networkId, undefined);
  const net = (await k.stack.api("GET", "tenants/acme/networks/data")).body;
  assert.equal(net.description, "made by hand", "nothing of it changed");
  assert.equal(net.deletingSince, undefined);

  k.api.delete("networks", "acme", "data");
  await eventually(
    "resource gone",
    () => k.api.get("networks", "acme", "data") === undefined ? true : undefined,
  );
  const kept = await k.stack.api("GET", "tenants/acme/networks/data");
  assert.equal(kept.status, 200, "the other network stays");
  assert.equal(kept.body.id, theirs.body.id);
  assert.equal(kept.body.deletingSince, undefined);
  assert.equal((await k.stack.api("GET", "tenants/acme/networks/data/ports/p1")).status, 200);
});

Deno.test("stand-in API server: a Network being deleted refuses new pods with a clear error, and goes once its last pod has", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  k.api.create("networks", {
    metadata: { name: "data", namespace: "acme" },
    spec: { cidr: "10.30.0.0/24" },
  });
  const made = await eventually("Network ready", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.status === "True" ? o : undefined;
  });
  const annotations = { "k8s.v1.cni.cncf.io/networks": "data" };
  const web = await k.pod(n1, { namespace: "acme", name: "web", annotations });
  assert.equal((await web.cni.add()).code, 0);

  k.api.delete("networks", "acme", "data");
  const held = await eventually("deletion held", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.reason === "InUse" ? o : undefined;
  });
  assert.match(ready(held)!.message, /1 address\(es\) are in use.*takes no new ports/);
  const net = (await k.stack.api("GET", "tenants/acme/networks/data")).body;
  assert.equal(net.id, made!.status.networkId);
  assert.ok(net.deletingSince, "marked as being deleted in the manager");

  const late = await k.pod(n1, { namespace: "acme", name: "late", annotations });
  const refused = await late.cni.add();
  assert.equal(refused.code, 1);
  assert.equal(refused.out.code, 7);
  assert.match(
    refused.out.msg,
    /Network "data" of tenant "acme" is being deleted \(since .*\): it takes no new ports/,
  );
  await eventually(
    "an event on late",
    () =>
      k.api.list("events", "acme").find((e) =>
        e.involvedObject.name === "late" && /being deleted/.test(e.message)
      ),
  );

  // The last pod goes: the network and the resource follow.
  assert.equal((await web.cni.del()).code, 0);
  k.api.delete("pods", "acme", "web");
  await eventually(
    "resource gone",
    () => k.api.get("networks", "acme", "data") === undefined ? true : undefined,
  );
  assert.equal((await k.stack.api("GET", "tenants/acme/networks/data")).status, 404);
});

Deno.test("stand-in API server: a dual-stack Network resource gets its IPv6 subnet in the manager, ports get both addresses, and a changed cidr6 is refused naming it", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  k.api.create("networks", {
    metadata: { name: "dual", namespace: "acme" },
    spec: {
      cidr: "10.32.0.0/24",
      gateway: "10.32.0.1",
      cidr6: "fd00:32::/64",
      gateway6: "fd00:32::1",
    },
  });
  await eventually("Network ready", () => {
    const o = k.api.get("networks", "acme", "dual");
    return ready(o)?.status === "True" ? o : undefined;
  });
  const net = (await k.stack.api("GET", "tenants/acme/networks/dual")).body;
  assert.deepEqual([net.cidr6, net.gateway6], ["fd00:32::/64", "fd00:32::1"]);
  const port = await k.stack.api("PUT", "tenants/acme/networks/dual/ports/p1", {});
  assert.equal(port.status, 201);
  assert.deepEqual([port.body.address, port.body.address6], ["10.32.0.2/24", "fd00:32::2/64"]);

  k.api.update("networks", "acme", "dual", (o) => (o.spec.cidr6 = "fd00:33::/64"));
  const refused = await eventually("the cidr6 change refused", () => {
    const o = k.api.get("networks", "acme", "dual");
    return o?.status?.observedGeneration === 2 && ready(o)?.status === "False" ? o : undefined;
  });
  assert.match(
    ready(refused)!.message,
    /cidr6 \(is "fd00:32::\/64", the spec asks "fd00:33::\/64"\).*cannot change after creation/,
  );
  assert.equal((await k.stack.api("DELETE", "tenants/acme/networks/dual/ports/p1")).status, 204);
});

Deno.test("attack through the stand-in API server: a tenant's Network resource cannot put the node on its network (egress, hostAccess) outside the admin's namespaces", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("globex");
  k.api.create("networks", {
    metadata: { name: "out", namespace: "globex" },
    spec: { cidr: "10.40.0.0/24", gateway: "10.40.0.1", egress: true },
  });
  const refused = await eventually("egress refused", () => {
    const o = k.api.get("networks", "globex", "out");
    return ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(refused)!.reason, "NodeReachNotAllowed");
  assert.match(ready(refused)!.message, /egress put the node on the network.*nodeReachNamespaces/);
  const none = await k.stack.api("GET", "tenants/globex/networks/out");
  assert.equal(none.status, 404, "nothing made at the manager");

  // Without it, the network is made; asking for hostAccess later is refused and changes nothing.
  k.api.update("networks", "globex", "out", (o) => delete o.spec.egress);
  await eventually("made without egress", () => {
    const o = k.api.get("networks", "globex", "out");
    return ready(o)?.status === "True" ? true : undefined;
  });
  k.api.update("networks", "globex", "out", (o) => (o.spec.hostAccess = true));
  await eventually("hostAccess refused", () => {
    const o = k.api.get("networks", "globex", "out");
    return ready(o)?.reason === "NodeReachNotAllowed" ? true : undefined;
  });
  const net = await k.stack.api("GET", "tenants/globex/networks/out");
  assert.deepEqual([net.body.egress, net.body.hostAccess], [false, false]);
});

Deno.test("attack through the stand-in API server: a tenant's Network resource cannot squat a physnet's flat segment or pick a segment ID outside the admin's namespaces", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  const phys = await k.stack.api("POST", "physnets", {
    name: "dc1",
    vlanRanges: [{ start: 100, end: 199 }],
  });
  assert.equal(phys.status, 201, JSON.stringify(phys.body));
  k.namespace("globex");
  const asks: [string, Record<string, unknown>][] = [
    ["flat", { cidr: "10.41.0.0/24", type: "flat", physnet: "dc1" }],
    ["tagged", { cidr: "10.42.0.0/24", type: "vlan", physnet: "dc1", segmentId: 150 }],
    ["vni", { cidr: "10.43.0.0/24", segmentId: 5500 }],
  ];
  for (const [name, spec] of asks) {
    k.api.create("networks", { metadata: { name, namespace: "globex" }, spec });
  }
  for (const [name] of asks) {
    const refused = await eventually(`${name} refused`, () => {
      const o = k.api.get("networks", "globex", name);
      return ready(o)?.status === "False" ? o : undefined;
    });
    assert.equal(ready(refused)!.reason, "SegmentNotAllowed");
    assert.match(ready(refused)!.message, /admin's decision.*segmentNamespaces/);
    const none = await k.stack.api("GET", `tenants/globex/networks/${name}`);
    assert.equal(none.status, 404, "nothing made at the manager");
  }
  // A VLAN network whose ID the manager allocates is the tenant's to ask for.
  k.api.update("networks", "globex", "tagged", (o) => delete o.spec.segmentId);
  await eventually("made with an allocated VLAN ID", () => {
    const o = k.api.get("networks", "globex", "tagged");
    return ready(o)?.status === "True" ? true : undefined;
  });
});

Deno.test("attack through the stand-in API server: a tenant's Network resource cannot set a delegate master (a node's interface) outside the admin's namespaces", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { nodeReachNamespaces: ["acme"] },
  });
  await k.startMonitor();
  k.namespace("globex");
  k.namespace("acme");
  const spec = {
    cidr: "10.60.0.0/24",
    dataPlane: "external",
    delegate: { plugin: "host-device", device: "eth0" },
  };
  k.api.create("networks", { metadata: { name: "steal", namespace: "globex" }, spec });
  const refused = await eventually("the delegate refused", () => {
    const o = k.api.get("networks", "globex", "steal");
    return ready(o)?.status === "False" ? o : undefined;
  });
  assert.equal(ready(refused)!.reason, "DelegateNotAllowed");
  assert.match(ready(refused)!.message, /delegate .*node's own interfaces.*nodeReachNamespaces/);
  const none = await k.stack.api("GET", "tenants/globex/networks/steal");
  assert.equal(none.status, 404, "nothing made at the manager");

  // In a namespace the admin listed, the same spec is made, delegate and all.
  k.api.create("networks", { metadata: { name: "data", namespace: "acme" }, spec });
  await eventually("made in acme", () => {
    const o = k.api.get("networks", "acme", "data");
    return ready(o)?.status === "True" ? true : undefined;
  });
  const net = await k.stack.api("GET", "tenants/acme/networks/data");
  assert.deepEqual(net.body.delegate, spec.delegate);
});
