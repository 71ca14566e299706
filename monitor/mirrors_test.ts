/**
 * The Mirror kind (mirrors.ts) through the one reconciler: pods of the namespace resolved to their
 * ports (by interface, by network, the only one), refusals that say what to do (no port yet, a
 * pod with several, another namespace's pod, a remote collector outside remoteMirrorNamespaces), the
 * manager's mirror replaced when a pod's port changes, and released with the resource.
 */
import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { CrReconciler } from "./cr_reconciler.ts";
import type { MirrorResource, MirrorSpec } from "./crd_types.ts";
import { KubeFake } from "./kube_fake.ts";
import { MirrorManagerFake } from "./mirror_manager_fake.ts";
import { mirrorKind } from "./mirrors.ts";
import { Tenants } from "./namespaces.ts";
import { Requeue } from "./work_queue.ts";

const log = createLogger("mirror-test", "error");

function setup(remoteNamespaces: string[] = []) {
  const kube = new KubeFake();
  const m = new MirrorManagerFake();
  const manager = m.asManager();
  const reconciler = new CrReconciler(
    mirrorKind(remoteNamespaces, m),
    { kube: kube.asKube(), manager, log },
    new Tenants(manager, log),
    5000,
  );
  const now = (namespace = "acme") => kube.get("mirrors", namespace, "tap") as MirrorResource;
  const ready = (namespace = "acme") => now(namespace).status!.conditions![0];
  const put = (spec: MirrorSpec, namespace = "acme") =>
    kube.put("mirrors", { metadata: { namespace, name: "tap", generation: 1 }, spec });
  /** The resource with `spec` is refused, tried again later, and its Ready condition says why. */
  const refused = async (spec: MirrorSpec, reason: string, why: RegExp, namespace = "acme") => {
    put(spec, namespace);
    await assert.rejects(reconciler.reconcile(now(namespace)), (err) => err instanceof Requeue);
    assert.equal(ready(namespace).reason, reason);
    assert.match(ready(namespace).message, why);
  };
  return { kube, m, reconciler, now, ready, put, refused };
}

Deno.test("mirror kind: pods resolve to their ports by interface, by network or as the only one; the status names them", async () => {
  const { m, reconciler, now, ready, put } = setup();
  m.addPort("acme", "web", "eth0", "pods", "w-eth0");
  m.addPort("acme", "web", "net1", "blue", "w-net1");
  m.addPort("acme", "sniffer", "net1", "blue", "s-net1");
  put({ sources: [{ pod: "web", interface: "net1" }], collector: { pod: "sniffer" } });
  await reconciler.reconcile(now());
  assert.equal(ready().status, "True", ready().message);
  assert.deepEqual(m.mirrors.get("acme/tap")?.sources.map((s) => s.id), ["w-net1"]);
  assert.equal(m.mirrors.get("acme/tap")?.direction, "both");
  assert.deepEqual(now().status!.sources, [
    { network: "blue", port: "w-net1", pod: "web", interface: "net1" },
  ]);
  assert.deepEqual(now().status!.collector, {
    network: "blue",
    port: "s-net1",
    pod: "sniffer",
    interface: "net1",
  });

  // Unchanged: the manager is asked nothing but the mirror's GET.
  const before = m.requests.length;
  await reconciler.reconcile(now());
  assert.deepEqual(m.requests.slice(before), ["GET /api/v1/tenants/acme/mirrors/tap"]);
});

Deno.test("mirror kind: a pod with no port, or with several, is refused and says what to name; nothing is made", async () => {
  const { m, reconciler, now, ready, refused } = setup();
  m.addPort("acme", "web", "eth0", "pods", "w-eth0");
  m.addPort("acme", "web", "net1", "blue", "w-net1");
  await refused(
    { sources: [{ pod: "web" }], collector: { pod: "sniffer" } },
    "AmbiguousPod",
    /sources\[0\]: pod "acme\/web" has 2 Knitter ports \(eth0 on pods, net1 on blue\): name one with interface or network/,
  );
  await refused(
    { sources: [{ pod: "web", network: "blue" }], collector: { pod: "sniffer" } },
    "PortNotFound",
    /collector: pod "acme\/sniffer" has no Knitter port/,
  );
  assert.equal(m.mirrors.size, 0);

  // The pod's port arrives: the next try makes the mirror.
  m.addPort("acme", "sniffer", "net1", "blue", "s-net1");
  await reconciler.reconcile(now());
  assert.equal(ready().status, "True", ready().message);
});

Deno.test("mirror kind: another namespace's pod is refused by name and by port ID; nothing is made", async () => {
  const { m, refused } = setup();
  m.addPort("acme", "sniffer", "net1", "blue", "s-net1");
  m.addPort("globex", "secret", "eth0", "pods", "g-eth0");
  await refused(
    { sources: [{ pod: "globex/secret" }], collector: { pod: "sniffer" } },
    "OtherNamespace",
    /never copies another tenant's traffic/,
  );
  await refused(
    { sources: [{ network: "pods", port: "g-eth0" }], collector: { pod: "sniffer" } },
    "NotFound",
    /a mirror names only its own tenant's ports/,
  );
  assert.equal(m.mirrors.size, 0);
});

Deno.test("mirror kind: a remote collector only in remoteMirrorNamespaces", async () => {
  const spec = {
    sources: [{ pod: "web" }],
    collector: { remote: { ip: "192.0.2.250", protocol: "gre" } },
  };
  const acme = setup(["knitter-system"]);
  acme.m.addPort("acme", "web", "eth0", "pods", "w-eth0");
  await acme.refused(spec, "RemoteCollectorNotAllowed", /remoteMirrorNamespaces/);
  assert.equal(acme.m.mirrors.size, 0);

  const ops = setup(["knitter-system"]);
  ops.m.addPort("knitter-system", "web", "eth0", "pods", "w-eth0");
  ops.put(spec, "knitter-system");
  await ops.reconciler.reconcile(ops.now("knitter-system"));
  assert.equal(ops.ready("knitter-system").status, "True");
  assert.match(ops.ready("knitter-system").message, /to 192\.0\.2\.250 over GRE/);
  assert.deepEqual(ops.now("knitter-system").status!.collector, spec.collector);
  // A VXLAN collector, its fields in another order than the manager answers them: the same mirror.
  const far = setup(["knitter-system"]);
  far.m.addPort("knitter-system", "web", "eth0", "pods", "w-eth0");
  const vxlan = { remote: { vni: 5001, protocol: "vxlan", ip: "192.0.2.250" } };
  far.put({ ...spec, collector: vxlan }, "knitter-system");
  await far.reconciler.reconcile(far.now("knitter-system"));
  assert.match(far.ready("knitter-system").message, /to 192\.0\.2\.250 over VXLAN/);
  const made = [...far.m.mirrors.values()];
  assert.deepEqual(made.map((x) => x.collector), [{
    remote: { ip: "192.0.2.250", protocol: "vxlan", vni: 5001 },
  }]);
  const createdAt = made[0].createdAt;
  await far.reconciler.reconcile(far.now("knitter-system"));
  assert.equal([...far.m.mirrors.values()][0].createdAt, createdAt, "not made again");
});

Deno.test("mirror kind: a pod recreated with a new port gets the mirror replaced; the feed behind is no refusal; deleting releases it", async () => {
  const { kube, m, reconciler, now, ready, put } = setup();
  m.addPort("acme", "web", "eth0", "pods", "w1");
  m.addPort("acme", "sniffer", "eth0", "pods", "s1");
  put({ sources: [{ pod: "web" }], direction: "in", collector: { pod: "sniffer" } });
  await reconciler.reconcile(now());
  m.ports = m.ports.filter((p) => p.id !== "w1");
  m.addPort("acme", "web", "eth0", "pods", "w2");
  await reconciler.reconcile(now());
  assert.deepEqual(m.mirrors.get("acme/tap")?.sources.map((s) => s.id), ["w2"]);
  assert.equal(m.mirrors.get("acme/tap")?.direction, "in");
  assert.equal(ready().status, "True");

  // Not knowing the ports is not the user's doing: thrown for the queue's backoff, no status.
  m.behind = "not listed yet";
  const written = kube.writes.length;
  await assert.rejects(reconciler.reconcile(now()), /the manager's ports are not known yet/);
  assert.equal(kube.writes.length, written);
  m.behind = undefined;

  kube.put("mirrors", { ...now(), metadata: { ...now().metadata, deletionTimestamp: "now" } });
  await reconciler.reconcile(now());
  assert.equal(m.mirrors.size, 0);
  assert.deepEqual(now().metadata.finalizers, []);
});

Deno.test("mirror kind: a mirror of the same name not made by the resource is left alone unless it is what the spec asks", async () => {
  const { kube, m, reconciler, now, ready, refused } = setup();
  m.addPort("acme", "web", "eth0", "pods", "w1");
  m.addPort("acme", "sniffer", "eth0", "pods", "s1");
  const rest = {
    name: "tap",
    tenant: "acme",
    sources: [{ network: "pods", networkId: "net-pods", id: "w1" }],
    direction: "both" as const,
    collector: { remote: { ip: "192.0.2.250", protocol: "gre" as const } },
    createdAt: "2026-01-01T00:00:00Z",
  };
  m.mirrors.set("acme/tap", rest);
  await refused(
    { sources: [{ pod: "web" }], collector: { pod: "sniffer" } },
    "NotOwned",
    /not made by this Mirror and asks something else: it is left alone/,
  );
  kube.put("mirrors", { ...now(), metadata: { ...now().metadata, deletionTimestamp: "now" } });
  await reconciler.reconcile(now());
  assert.deepEqual(m.mirrors.get("acme/tap"), rest, "neither replaced nor deleted");
  assert.ok(!m.requests.some((r) => r.startsWith("DELETE") || r.startsWith("POST")));

  // What the spec asks, already there (made before a status write failed): adopted as it is.
  const same = { ...rest, collector: { network: "pods", networkId: "net-pods", id: "s1" } };
  m.mirrors.set("acme/tap", same);
  kube.put("mirrors", {
    metadata: { namespace: "acme", name: "tap", generation: 1 },
    spec: { sources: [{ pod: "web" }], collector: { pod: "sniffer" } },
  });
  await reconciler.reconcile(now());
  assert.equal(ready().status, "True", ready().message);
  assert.equal(now().status!.createdAt, rest.createdAt);
  assert.ok(!m.requests.some((r) => r.startsWith("DELETE") || r.startsWith("POST")));
});

Deno.test("mirror kind: a filter reaches the manager; the record's canonical form is no change; another filter replaces it", async () => {
  const { kube, m, reconciler, now, ready, put } = setup();
  m.addPort("acme", "web", "eth0", "pods", "w1");
  m.addPort("acme", "sniffer", "eth0", "pods", "s1");
  const spec = (ports: string): MirrorSpec => ({
    sources: [{ pod: "web" }],
    direction: "out",
    filter: [{ protocol: "tcp", ports }, { protocol: "icmp", remote: "10.9.0.0/16" }],
    collector: { pod: "sniffer" },
  });
  put(spec("5001-5001"));
  await reconciler.reconcile(now());
  assert.equal(ready().status, "True", ready().message);
  assert.deepEqual(m.mirrors.get("acme/tap")?.filter, [
    { protocol: "tcp", ports: "5001" },
    { protocol: "icmp", remote: "10.9.0.0/16" },
  ]);
  // "5001-5001" is kept as "5001": the same filter, so the manager is asked nothing but the GET.
  const before = m.requests.length;
  await reconciler.reconcile(now());
  assert.deepEqual(m.requests.slice(before), ["GET /api/v1/tenants/acme/mirrors/tap"]);
  kube.put("mirrors", {
    ...now(),
    metadata: { ...now().metadata, generation: 2 },
    spec: spec("5002"),
  });
  await reconciler.reconcile(now());
  assert.equal(m.mirrors.get("acme/tap")?.filter?.[0].ports, "5002");
});
