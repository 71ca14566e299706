/**
 * The leak pass never releases an address on stale knowledge: against the stand-in API server,
 * with the monitor's watch silently broken (dropped half-open, so its memory falls behind), pods
 * are deleted, created and replaced; the pass releases only the ports of pods a fresh read from
 * the API server shows gone (404, or another UID under the name), and no running pod loses its
 * address.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  eventually,
  type KubeCluster,
  podWithPort,
  portsOfPod,
  startKubeCluster,
} from "./support/kube_cluster.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";

function heard(k: KubeCluster, name: string, ms = 30_000) {
  return eventually(
    `network-status of ${name}`,
    () => k.api.get("pods", "acme", name)?.metadata.annotations?.[STATUS] ? true : undefined,
    ms,
  );
}

Deno.test("stand-in API server: with the watch silently broken, the leak pass releases only ports of pods a fresh read shows gone; no running pod loses its address", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    // The watch stays deaf for the whole test: neither the deadline nor a probe finds it.
    monitor: {
      watchTimeoutSeconds: 300,
      watchDeadlineSeconds: 600,
      watchProbeSeconds: 0,
      reclaimIntervalSeconds: 3600,
      reclaimGraceSeconds: 0,
    },
  });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  await k.startMonitor();
  for (const n of ["keep1", "keep2", "old"]) await podWithPort(k, n);
  const web1 = await podWithPort(k, "web");
  await heard(k, "web");
  await k.monitor!.idle();

  assert.ok(k.api.dropWatches() >= 4);
  // What the monitor does not hear: a pod goes, a pod comes, a pod is replaced (same name).
  k.api.delete("pods", "acme", "old");
  await podWithPort(k, "fresh");
  k.api.delete("pods", "acme", "web");
  const web2 = await podWithPort(k, "web");
  assert.equal(k.monitor!.stats().pods, 4, "the monitor's memory is behind");

  await k.monitor!.reclaimNow();
  for (const n of ["keep1", "keep2", "fresh"]) {
    assert.equal((await portsOfPod(k, n)).length, 1, `${n} keeps its address`);
  }
  assert.ok(
    (await portsOfPod(k, "web")).some((p) => p.id === `${web2.metadata.uid}-eth0`),
    "the replacement pod keeps its address",
  );

  // The fresh read of "fresh" contradicted the watch's memory: the watch is started again, and
  // its fresh list shows what it missed: "old" gone, "web" replaced.
  await eventually(
    "the deleted pod's port released",
    async () => (await portsOfPod(k, "old")).length === 0 ? true : undefined,
    10_000,
  );
  await eventually(
    "the replaced pod's port released, its successor's kept",
    async () =>
      JSON.stringify((await portsOfPod(k, "web")).map((p) => p.id)) ===
          JSON.stringify([`${web2.metadata.uid}-eth0`])
        ? true
        : undefined,
    10_000,
  );
  assert.notEqual(web1.metadata.uid, web2.metadata.uid);

  assert.ok(k.monitor!.stats().watchRestarts >= 1, "the pods watch was started again");
  await heard(k, "fresh", 10_000);
  await k.monitor!.reclaimNow();
  for (const n of ["keep1", "keep2", "fresh", "web"]) {
    assert.equal((await portsOfPod(k, n)).length, 1, `${n} keeps its address`);
  }
});

Deno.test("stand-in API server: after a monitor restart a leak younger than the grace period is released when its grace ends, not at the next interval", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { reclaimGraceSeconds: 3, reclaimIntervalSeconds: 300 },
  });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  await k.startMonitor();
  await podWithPort(k, "keep");
  await heard(k, "keep");
  await k.stopMonitor();

  // While the monitor is down: a pod comes and goes (its port leaks), another comes and stays.
  await podWithPort(k, "gone");
  k.api.delete("pods", "acme", "gone");
  await podWithPort(k, "late");

  const t0 = performance.now();
  await k.startMonitor();
  assert.equal((await portsOfPod(k, "gone")).length, 1, "younger than the grace: kept at start");
  await eventually(
    "the leak released once its grace ended",
    async () => (await portsOfPod(k, "gone")).length === 0 ? true : undefined,
    15_000,
  );
  const s = (performance.now() - t0) / 1000;
  assert.ok(s < 10, `found ${s.toFixed(1)} s after the start (grace 3 s, interval 300 s)`);
  assert.equal((await portsOfPod(k, "keep")).length, 1);
  assert.equal((await portsOfPod(k, "late")).length, 1);
});

Deno.test("stand-in API server: pods created while the monitor starts and reclaims keep their addresses, even with no grace period", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { reclaimGraceSeconds: 0, reclaimIntervalSeconds: 1 },
  });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  // Pods keep coming, as the agent makes them (pod object first, then its port), while the
  // monitor lists, starts its watches and runs leak passes every second.
  let creating = true;
  const made: string[] = [];
  const creator = (async () => {
    // The default network has 253 addresses.
    for (let i = 0; creating && i < 200; i++) {
      await podWithPort(k, `p${i}`);
      made.push(`p${i}`);
    }
  })();
  await k.startMonitor();
  const until = performance.now() + 3000;
  while (performance.now() < until) {
    await k.monitor!.reclaimNow();
    await new Promise((r) => setTimeout(r, 100));
  }
  creating = false;
  await creator;
  await k.monitor!.reclaimNow();
  assert.ok(made.length > 10, `${made.length} pods made meanwhile`);
  const ports = (await k.stack.api("GET", "ports?tenant=acme")).body.items;
  assert.equal(ports.length, made.length, "every pod kept its port");
});
