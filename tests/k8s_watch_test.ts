/**
 * The monitor's watches against the stand-in API server: pods deleted while the watch was broken,
 * while the history expired (410 Gone), and while the monitor was down, all have their ports
 * released; a new pod of the same name keeps its own. Ports are made in the real manager as an
 * agent makes them (bound to the pod's UID).
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import { eventually, type KubeCluster, startKubeCluster } from "./support/kube_cluster.ts";

/** A pod object and a port bound to it, as the agent would make it on ADD. */
async function podWithPort(k: KubeCluster, name: string): Promise<KubeObject> {
  const obj = k.api.create("pods", {
    metadata: { name, namespace: "acme" },
    spec: { nodeName: "n1", containers: [] },
  });
  const uid = obj.metadata.uid;
  const r = await k.stack.api("PUT", `tenants/acme/networks/pods/ports/${uid}-eth0`, {
    pod: { namespace: "acme", name, uid },
    interface: "eth0",
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return obj;
}

async function portsOf(k: KubeCluster, name: string): Promise<{ id: string }[]> {
  return (await k.stack.api("GET", `ports?pod=acme/${name}`)).body.items;
}

function released(k: KubeCluster, name: string) {
  return eventually(
    `ports of ${name} released`,
    async () => (await portsOf(k, name)).length === 0 ? true : undefined,
  );
}

async function setup(cleanup: Cleanup): Promise<KubeCluster> {
  const k = await startKubeCluster({ cleanup, nodes: [] });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  return k;
}

Deno.test("stand-in API server: a deleted pod's ports are released by UID, never a new pod's of the same name", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup);
  await k.startMonitor();
  const old = await podWithPort(k, "web");
  k.api.delete("pods", "acme", "web");
  const fresh = await podWithPort(k, "web");
  const only = [`${fresh.metadata.uid}-eth0`];
  await eventually(
    "the old pod's port released",
    async () =>
      JSON.stringify((await portsOf(k, "web")).map((p) => p.id)) === JSON.stringify(only)
        ? true
        : undefined,
  );
  await k.monitor!.idle();
  assert.deepEqual((await portsOf(k, "web")).map((p) => p.id), only, "the new pod's port stays");
  assert.notEqual(old.metadata.uid, fresh.metadata.uid);
});

Deno.test("stand-in API server: the monitor resumes a cleanly closed watch from its resourceVersion, lists again after refusals and 410 Gone", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup);
  await k.startMonitor();
  await podWithPort(k, "a");
  await podWithPort(k, "b");
  await k.monitor!.idle();

  // Closed cleanly (a server-side timeout): the watch resumes from the last resourceVersion it
  // saw, without a new list.
  const lists = () =>
    k.api.requests.filter((r) =>
      r.path === "/api/v1/pods" && !r.query.includes("watch=") && !r.query.includes("limit=")
    ).length;
  const before = lists();
  assert.ok(k.api.breakWatches() >= 4, "the monitor had its watches open");
  k.api.delete("pods", "acme", "a");
  await released(k, "a");
  await eventually("watches open again", () => k.api.openWatches >= 4 ? true : undefined);
  assert.equal(lists(), before, "resumed from the resourceVersion, no list");

  // Refused for a while (an overloaded API server): started again after a backoff, each time
  // with a fresh list. A pod created and deleted meanwhile is in no list: the reclaim pass that
  // follows a fresh list finds its port.
  k.api.refuseWatches(3);
  k.api.breakWatches();
  await podWithPort(k, "c");
  k.api.delete("pods", "acme", "c");
  await released(k, "c");
  assert.ok(k.monitor!.stats().watchErrors >= 3, "the refusals were seen and retried");
  assert.ok(lists() > before, "listed again after the refusals");

  // The history expires while the watch is down: 410 Gone, a new list, and the pod deleted in
  // the gap is found missing from it and released.
  const beforeGone = lists();
  k.api.historyLimit = 0;
  k.api.compact();
  k.api.breakWatches();
  k.api.delete("pods", "acme", "b");
  await released(k, "b");
  assert.ok(lists() > beforeGone, "listed again after 410 Gone");
  assert.equal(k.monitor!.stats().pods, 0);
});

Deno.test("stand-in API server: a monitor that was down while pods were deleted reclaims their ports when it starts", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup);
  await k.startMonitor();
  await podWithPort(k, "keep");
  await podWithPort(k, "x");
  await podWithPort(k, "y");
  await k.monitor!.idle();
  await k.stopMonitor();
  k.api.delete("pods", "acme", "x");
  k.api.delete("pods", "acme", "y");
  assert.equal((await portsOf(k, "x")).length, 1, "nothing released while the monitor is down");

  await k.startMonitor();
  await released(k, "x");
  await released(k, "y");
  assert.equal((await portsOf(k, "keep")).length, 1, "a live pod's port stays");
  assert.ok(k.monitor!.stats().reclaimRuns >= 1);
});
