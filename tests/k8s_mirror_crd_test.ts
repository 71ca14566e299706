/**
 * Port mirrors through kubectl: a Mirror resource in the stand-in API server naming pods of its
 * namespace, reconciled by the monitor (real client library) into a real manager's mirror of their
 * ports, Ready, and removed with the resource. A Mirror naming another namespace's pod (by a port
 * ID, or as namespace/name) or asking for a remote collector is refused, says why in its status,
 * and no mirror exists at the manager. On a simulated node (real Open vSwitch), the TCP stream of a
 * pod a Mirror names is seen byte for byte in the collector pod's capture.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { waitFor } from "../devstack/stack.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, podWithPort, portsOfPod, startKubeCluster } from "./support/kube_cluster.ts";
import { mirrorRows, type StreamEnd, streamSeen } from "./support/mirror_stream.ts";
import { addressOf } from "./support/pods.ts";

const PORT = 24681;

const ready = (o: KubeObject | undefined) =>
  o?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

/** The Mirror once its Ready condition has this status. */
function readyIs(
  k: { api: { get(...a: string[]): KubeObject | undefined } },
  name: string,
  s: string,
) {
  return eventually(`Mirror ${name} Ready=${s}`, () => {
    const o = k.api.get("mirrors", "acme", name);
    return ready(o)?.status === s ? o : undefined;
  });
}

Deno.test("stand-in API server: a Mirror resource mirrors the namespace's pods at the manager, is Ready, goes with the resource; another namespace's pod and a remote collector are refused", async () => {
  await using cleanup = new Cleanup();
  // Resynced once an hour: what happens here follows the watches and the manager's port feed.
  const k = await startKubeCluster({ cleanup, nodes: [], monitor: { resyncSeconds: 3600 } });
  await k.startMonitor();
  for (const ns of ["acme", "globex"]) {
    k.namespace(ns);
    // The monitor may have made the tenant already.
    assert.ok([200, 201].includes((await k.stack.api("PUT", `tenants/${ns}`)).status));
  }
  await podWithPort(k, "web", { namespace: "acme" });
  await podWithPort(k, "tap", { namespace: "acme" });
  await podWithPort(k, "secret", { namespace: "globex" });
  const [webPort] = await portsOfPod(k, "web");
  const [tapPort] = await portsOfPod(k, "tap");
  const [secretPort] = await portsOfPod(k, "secret", "globex");

  // Attacks first: acme names globex's pod by its port ID, and as namespace/name.
  k.api.create("mirrors", {
    metadata: { name: "by-port", namespace: "acme" },
    spec: { sources: [{ network: "pods", port: secretPort.id }], collector: { pod: "tap" } },
  });
  k.api.create("mirrors", {
    metadata: { name: "by-name", namespace: "acme" },
    spec: { sources: [{ pod: "globex/secret" }], collector: { pod: "tap" } },
  });
  k.api.create("mirrors", {
    metadata: { name: "far", namespace: "acme" },
    spec: {
      sources: [{ pod: "web" }],
      collector: { remote: { ip: "192.0.2.250", protocol: "gre" } },
    },
  });
  const byPort = ready(await readyIs(k, "by-port", "False"))!;
  assert.equal(byPort.reason, "NotFound");
  assert.match(byPort.message, /a mirror names only its own tenant's ports/);
  const byName = ready(await readyIs(k, "by-name", "False"))!;
  assert.equal(byName.reason, "OtherNamespace");
  assert.match(byName.message, /names the pods of its own namespace only/);
  const far = ready(await readyIs(k, "far", "False"))!;
  assert.equal(far.reason, "RemoteCollectorNotAllowed");
  assert.match(far.message, /namespace "acme" may not send mirrored copies to a remote address/);
  for (const tenant of ["acme", "globex"]) {
    const r = await k.stack.api("GET", `tenants/${tenant}/mirrors`);
    assert.deepEqual(r.body.items, [], `${tenant}: ${JSON.stringify(r.body)}`);
  }

  // The namespace's own pods: the mirror of their ports is made and the resource is Ready.
  k.api.create("mirrors", {
    metadata: { name: "watch-web", namespace: "acme" },
    spec: {
      sources: [{ pod: "web", interface: "eth0" }],
      direction: "out",
      collector: { pod: "tap", network: "pods" },
    },
  });
  const made = await readyIs(k, "watch-web", "True");
  assert.deepEqual(made.metadata.finalizers, ["knitter.io/manager"]);
  assert.deepEqual(made.status.sources, [
    { network: "pods", port: webPort.id, pod: "web", interface: "eth0" },
  ]);
  assert.deepEqual(made.status.collector, {
    network: "pods",
    port: tapPort.id,
    pod: "tap",
    interface: "eth0",
  });
  assert.match(ready(made)!.message, /copies out traffic of 1 port\(s\) to port/);
  const mirror = await k.stack.api("GET", "tenants/acme/mirrors/watch-web");
  assert.equal(mirror.status, 200, JSON.stringify(mirror.body));
  assert.equal(mirror.body.direction, "out");
  assert.deepEqual(mirror.body.sources.map((s: { id: string }) => s.id), [webPort.id]);
  assert.equal(mirror.body.collector.id, tapPort.id);

  // A changed direction replaces the manager's mirror.
  k.api.update("mirrors", "acme", "watch-web", (o) => {
    o.spec.direction = "both";
  });
  await eventually("the mirror follows the spec", async () => {
    const r = await k.stack.api("GET", "tenants/acme/mirrors/watch-web");
    return r.body.direction === "both" ? true : undefined;
  });

  // An admin's mirror made over REST in the tenant (interception): a Mirror of the same name
  // neither replaces nor, when deleted, removes it.
  const intercept = {
    name: "intercept",
    sources: [{ network: "pods", port: webPort.id }],
    collector: { remote: { ip: "192.0.2.250", protocol: "gre" } },
  };
  assert.equal((await k.stack.api("POST", "tenants/acme/mirrors", intercept)).status, 201);
  k.api.create("mirrors", {
    metadata: { name: "intercept", namespace: "acme" },
    spec: { sources: [{ pod: "tap" }], collector: { pod: "web" } },
  });
  const taken = ready(await readyIs(k, "intercept", "False"))!;
  assert.equal(taken.reason, "NotOwned");
  assert.match(taken.message, /not made by this Mirror.*left alone/);
  k.api.delete("mirrors", "acme", "intercept");
  await eventually("the resource gone", () => {
    return k.api.get("mirrors", "acme", "intercept") === undefined ? true : undefined;
  });
  const kept = await k.stack.api("GET", "tenants/acme/mirrors/intercept");
  assert.equal(kept.status, 200, "the admin's mirror stays");
  assert.deepEqual(kept.body.collector, intercept.collector);
  assert.deepEqual(kept.body.sources.map((p: { id: string }) => p.id), [webPort.id]);
  assert.equal((await k.stack.api("DELETE", "tenants/acme/mirrors/intercept")).status, 204);

  // A Mirror naming a pod that has no port yet waits, saying so, and is made when the port comes.
  k.api.create("mirrors", {
    metadata: { name: "watch-late", namespace: "acme" },
    spec: { sources: [{ pod: "late" }], collector: { pod: "tap-late" } },
  });
  assert.match(ready(await readyIs(k, "watch-late", "False"))!.message, /has no Knitter port/);
  await podWithPort(k, "late", { namespace: "acme" });
  await podWithPort(k, "tap-late", { namespace: "acme" });
  await readyIs(k, "watch-late", "True");
  assert.equal((await k.stack.api("GET", "tenants/acme/mirrors/watch-late")).status, 200);
  k.api.delete("mirrors", "acme", "watch-late");

  // Deleted: gone from the manager, and the resource goes once the finalizer is dropped.
  k.api.delete("mirrors", "acme", "watch-web");
  await eventually("the resource gone", () => {
    const left = ["watch-web", "watch-late"].filter((n) => k.api.get("mirrors", "acme", n));
    return left.length === 0 ? true : undefined;
  });
  assert.equal((await k.stack.api("GET", "tenants/acme/mirrors/watch-web")).status, 404);
  // Still refused, and still nothing made for them.
  assert.deepEqual((await k.stack.api("GET", "tenants/acme/mirrors")).body.items, []);
});

Deno.test("stand-in API server: the TCP stream of a pod a Mirror names is seen byte for byte in the collector pod", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  const pods: Record<string, StreamEnd> = {};
  for (const name of ["client", "server", "tap"]) {
    const { cni } = await k.pod(n1, { namespace: "acme", name });
    const r = await cni.add();
    assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    pods[name] = { netns: cni.netns, ip: addressOf(r.out) };
  }
  const payload = crypto.getRandomValues(new Uint8Array(30_000));
  const payloadFile = await Deno.makeTempFile();
  cleanup.defer(() => Deno.remove(payloadFile));
  await Deno.writeFile(payloadFile, payload);
  const ends = {
    client: pods.client,
    server: pods.server,
    tap: { netns: pods.tap.netns, iface: "eth0", filter: `tcp port ${PORT}` },
    port: PORT,
  };
  const stream = { file: payloadFile, length: payload.length };
  const before = await streamSeen(cleanup, ends, stream, false);
  assert.deepEqual([before.out.length, before.back.length], [0, 0], "no mirror: nothing seen");
  k.api.create("mirrors", {
    metadata: { name: "watch-client", namespace: "acme" },
    spec: { sources: [{ pod: "client" }], collector: { pod: "tap" } },
  });
  await readyIs(k, "watch-client", "True");
  // Ready is the manager's record; the copies start once n1's agent has made the OVS Mirror row.
  await waitFor("the Mirror row on n1", async () => (await mirrorRows(n1)).length === 1, 10_000);
  assert.deepEqual(await mirrorRows(n1), ["acme/watch-client"]);
  const got = await streamSeen(cleanup, ends, stream, true);
  assert.deepEqual(got.out, payload, "what the client sent, byte for byte");
  assert.deepEqual(got.back, payload, "its echo, what the client received");
});
