/**
 * Kubernetes Services on a Knitter network (issue 28; monitor/services.ts): a Service annotated
 * `k8s.v1.cni.cncf.io/service-network` and its EndpointSlices in the stand-in API server, followed
 * by the monitor (real client library), become a real manager's service of that network: the
 * Service's TCP/UDP ports, its ready endpoints' pods' ports as backends, its session affinity; it
 * follows a slice's change and goes with the annotation. Another namespace's Service naming a
 * tenant's private network gets nothing.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { eventually, podWithPort, portsOfPod, startKubeCluster } from "./support/kube_cluster.ts";
import { SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from "../monitor/services.ts";

const ref = (name: string, namespace = "acme") => ({ kind: "Pod", name, namespace });

Deno.test("stand-in API server: an annotated Service and its EndpointSlices become a service of the network at the manager, follow the slices, and go with the annotation", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [], monitor: { resyncSeconds: 3600 } });
  const monitor = await k.startMonitor();
  for (const ns of ["acme", "globex"]) {
    k.namespace(ns);
    assert.ok([200, 201].includes((await k.stack.api("PUT", `tenants/${ns}`)).status));
  }
  const made = await k.stack.api("POST", "tenants/acme/networks", {
    name: "data",
    cidr: "10.90.0.0/24",
    gateway: "10.90.0.1",
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  for (const pod of ["web-0", "web-1", "db-0"]) await podWithPort(k, pod, { network: "data" });
  await podWithPort(k, "secret", { namespace: "globex" });
  const id = async (pod: string) => (await portsOfPod(k, pod))[0].id;

  // Attack first: globex's Service names acme's private network; nothing is made anywhere.
  k.api.create("services", {
    metadata: {
      name: "steal",
      namespace: "globex",
      annotations: { [SERVICE_NETWORK_ANNOTATION]: "data" },
    },
    spec: { ports: [{ protocol: "TCP", port: 80 }] },
  });

  k.api.create("services", {
    metadata: {
      name: "front",
      namespace: "acme",
      annotations: { [SERVICE_NETWORK_ANNOTATION]: "data" },
    },
    spec: {
      ports: [
        { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
        { name: "dns", protocol: "UDP", port: 53 },
        { name: "sig", protocol: "SCTP", port: 3868 },
      ],
      sessionAffinity: "ClientIP",
    },
  });
  k.api.create("endpointslices", {
    metadata: { name: "front-a", namespace: "acme", labels: { [SERVICE_NAME_LABEL]: "front" } },
    endpoints: [
      { conditions: { ready: true }, targetRef: ref("web-0") },
      { conditions: { ready: true }, targetRef: ref("web-1") },
      { conditions: { ready: false }, targetRef: ref("db-0") },
      // Another namespace's pod: its port is not acme's.
      { conditions: { ready: true }, targetRef: ref("secret", "globex") },
    ],
  });
  const both = [await id("web-0"), await id("web-1")].sort();
  const front = await eventually("acme/front at the manager with both web pods", async () => {
    const r = await k.stack.api("GET", "tenants/acme/services/front");
    return r.status === 200 && JSON.stringify(r.body.backends) === JSON.stringify(both)
      ? r.body
      : undefined;
  });
  assert.equal(front.network, "data");
  assert.match(front.vip, /^10\.90\.0\.\d+$/);
  assert.deepEqual(front.ports, [
    { protocol: "TCP", port: 80, targetPort: 8080 },
    { protocol: "UDP", port: 53, targetPort: 53 },
  ]);
  assert.equal(front.sessionAffinity, "ClientIP");

  // A pod no longer ready leaves the backends; the VIP stays.
  k.api.update("endpointslices", "acme", "front-a", (o) => {
    o.endpoints[1].conditions.ready = false;
  });
  const one = [await id("web-0")];
  const after = await eventually("acme/front with web-0 only", async () => {
    const r = await k.stack.api("GET", "tenants/acme/services/front");
    return JSON.stringify(r.body.backends) === JSON.stringify(one) ? r.body : undefined;
  });
  assert.equal(after.vip, front.vip);

  await monitor.idle();
  const stolen = await k.stack.api("GET", "tenants/globex/services");
  assert.deepEqual(stolen.body.items, [], "globex got no service on acme's network");

  // Without the annotation the manager's service goes, and its VIP with it.
  k.api.update("services", "acme", "front", (o) => {
    delete o.metadata.annotations[SERVICE_NETWORK_ANNOTATION];
  });
  await eventually(
    "acme/front gone at the manager",
    async () =>
      (await k.stack.api("GET", "tenants/acme/services/front")).status === 404 || undefined,
  );
});

Deno.test("stand-in API server: a Service's ipFamilyPolicy is carried: PreferDualStack on a dual-stack network has both VIPs, an IPv6-only network's Service an IPv6 VIP", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [], monitor: { resyncSeconds: 3600 } });
  await k.startMonitor();
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status));
  for (
    const body of [
      { name: "dual", cidr: "10.91.0.0/24", cidr6: "fd00:91::/64" },
      { name: "six", cidr: "fd00:92::/120" },
    ]
  ) {
    const made = await k.stack.api("POST", "tenants/acme/networks", body);
    assert.equal(made.status, 201, JSON.stringify(made.body));
  }
  // As the API server fills them on a single-stack IPv4 cluster: its ipFamilies say nothing of
  // the Knitter network's.
  const service = (name: string, network: string, ipFamilyPolicy: string) =>
    k.api.create("services", {
      metadata: { name, namespace: "acme", annotations: { [SERVICE_NETWORK_ANNOTATION]: network } },
      spec: { ports: [{ protocol: "TCP", port: 80 }], ipFamilies: ["IPv4"], ipFamilyPolicy },
    });
  service("both", "dual", "PreferDualStack");
  service("v6", "six", "SingleStack");
  const at = (name: string) =>
    eventually(`acme/${name} at the manager`, async () => {
      const r = await k.stack.api("GET", `tenants/acme/services/${name}`);
      return r.status === 200 ? r.body : undefined;
    });
  const both = await at("both");
  assert.deepEqual(both.ipFamilies, ["IPv4", "IPv6"]);
  assert.match(both.vips[0], /^10\.91\.0\.\d+$/);
  assert.match(both.vips[1], /^fd00:91::[0-9a-f]+$/);
  const v6 = await at("v6");
  assert.deepEqual(v6.vips, [v6.vip]);
  assert.match(v6.vip, /^fd00:92::[0-9a-f]+$/);

  // A policy back to SingleStack replaces the service: one VIP, IPv4.
  k.api.update("services", "acme", "both", (o) => {
    o.spec.ipFamilyPolicy = "SingleStack";
  });
  const single = await eventually("acme/both with one VIP", async () => {
    const r = await k.stack.api("GET", "tenants/acme/services/both");
    return r.status === 200 && r.body.vips.length === 1 ? r.body : undefined;
  });
  assert.deepEqual(single.ipFamilies, ["IPv4"]);
});
