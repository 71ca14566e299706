/**
 * The monitor's watches against the stand-in API server misbehaving as real ones do: a watch
 * dropped without a close (half-open: no byte ever again, the socket stays open), stalled, cut
 * abruptly, ended with 410 Expired, the server restarted, lists that never answer. The client library does not report a
 * half-open watch under Deno; the monitor finds each case itself (the count probe, the deadline)
 * and starts again with a fresh list, so the pods deleted and created meanwhile are seen.
 */
import assert from "node:assert/strict";
import type { MonitorConfig } from "../monitor/config.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  eventually,
  type KubeCluster,
  podWithPort,
  portsOfPod,
  startKubeCluster,
} from "./support/kube_cluster.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";

async function setup(
  cleanup: Cleanup,
  monitor: Partial<MonitorConfig>,
  bookmarkMs?: number,
): Promise<KubeCluster> {
  const k = await startKubeCluster({ cleanup, nodes: [], monitor, bookmarkMs });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  await k.startMonitor();
  return k;
}

function released(k: KubeCluster, name: string, ms = 30_000) {
  return eventually(
    `ports of ${name} released`,
    async () => (await portsOfPod(k, name)).length === 0 ? true : undefined,
    ms,
  );
}

/** The monitor heard of the pod: it wrote the pod's network-status. */
function heard(k: KubeCluster, name: string, ms = 30_000) {
  return eventually(
    `network-status of ${name}`,
    () => k.api.get("pods", "acme", name)?.metadata.annotations?.[STATUS] ? true : undefined,
    ms,
  );
}

Deno.test("stand-in API server: a watch dropped half-open is found deaf by the count probe long before its deadline; the deleted pod's port is released", async () => {
  await using cleanup = new Cleanup();
  // The deadline is far: only the probe can find this one in time.
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 60,
    watchDeadlineSeconds: 120,
    watchProbeSeconds: 1,
  });
  await podWithPort(k, "a");
  await podWithPort(k, "b");
  await heard(k, "b");
  await k.monitor!.idle();
  const lists = k.monitor!.stats().lists;

  assert.ok(k.api.dropWatches() >= 4, "the monitor had its watches open");
  const t0 = performance.now();
  k.api.delete("pods", "acme", "a");
  await released(k, "a", 15_000);
  const ms = performance.now() - t0;
  assert.ok(ms < 15_000, `found in ${ms} ms`);
  assert.ok(k.monitor!.stats().watchRestarts >= 1, "the pods watch was found dead");
  assert.ok(k.monitor!.stats().lists > lists, "and listed again");

  // Listening again: a new pod is heard.
  await podWithPort(k, "c");
  await heard(k, "c", 10_000);
  assert.equal((await portsOfPod(k, "b")).length, 1, "a running pod keeps its port");
});

Deno.test("stand-in API server: a watch dropped half-open while one pod goes and another comes (same count) is found dead at its deadline", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 2,
    watchDeadlineSeconds: 3,
    watchProbeSeconds: 0,
  });
  await podWithPort(k, "a");
  await podWithPort(k, "b");
  await heard(k, "b");
  await k.monitor!.idle();

  k.api.dropWatches();
  k.api.delete("pods", "acme", "a");
  await podWithPort(k, "c");
  await released(k, "a", 15_000);
  await heard(k, "c", 15_000);
  assert.ok(k.monitor!.stats().watchRestarts >= 1);
  assert.equal((await portsOfPod(k, "b")).length, 1);
  assert.equal((await portsOfPod(k, "c")).length, 1);
});

Deno.test("stand-in API server: a stalled watch is abandoned at its deadline and listed again; the held events arriving later change nothing", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 2,
    watchDeadlineSeconds: 3,
    watchProbeSeconds: 0,
  });
  await podWithPort(k, "a");
  await podWithPort(k, "b");
  await heard(k, "b");
  await k.monitor!.idle();

  assert.ok(k.api.stallWatches() >= 4);
  k.api.delete("pods", "acme", "a");
  await released(k, "a", 15_000);
  assert.ok(k.monitor!.stats().watchRestarts >= 1);
  k.api.resumeWatches();
  await podWithPort(k, "c");
  await heard(k, "c", 10_000);
  await k.monitor!.idle();
  assert.equal(k.monitor!.stats().pods, 2);
  assert.equal((await portsOfPod(k, "b")).length, 1);
});

Deno.test("stand-in API server: watches cut abruptly, ended with 410 Expired, and an API server restart each end in a fresh list that sees what changed", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 2,
    watchDeadlineSeconds: 3,
    watchProbeSeconds: 1,
  });
  for (const n of ["a", "b", "c", "d"]) await podWithPort(k, n);
  await heard(k, "d");
  await k.monitor!.idle();

  // Cut mid-stream.
  let lists = k.monitor!.stats().lists;
  assert.ok(k.api.abortWatches() >= 4);
  k.api.delete("pods", "acme", "a");
  await released(k, "a", 15_000);
  await eventually(
    "listed again after the cut",
    () => k.monitor!.stats().lists > lists ? true : undefined,
  );

  // ERROR 410 Expired on the open watches, history gone.
  await eventually("watches open again", () => k.api.openWatches >= 4 ? true : undefined);
  lists = k.monitor!.stats().lists;
  assert.ok(k.api.expireWatches() >= 4);
  k.api.delete("pods", "acme", "b");
  await released(k, "b", 15_000);
  assert.ok(k.monitor!.stats().lists > lists, "listed again after 410");

  // The API server restarts and answers nothing for 4 s (longer than the deadline): the watches
  // are stale meanwhile; pods deleted and created while it was down are seen once it is back.
  await eventually("watches open again", () => k.api.openWatches >= 4 ? true : undefined);
  const restarted = k.api.restart(4000);
  await eventually(
    "the pods watch stale while the server is down",
    () => k.monitor!.watches().find((w) => w.what === "pods")!.stale ? true : undefined,
    10_000,
  );
  await restarted;
  k.api.delete("pods", "acme", "c");
  await podWithPort(k, "e");
  await released(k, "c", 30_000);
  await heard(k, "e", 30_000);
  await eventually(
    "no watch stale",
    () => k.monitor!.watches().every((w) => !w.stale) ? true : undefined,
  );
  assert.equal((await portsOfPod(k, "d")).length, 1, "a running pod keeps its port");
});

Deno.test("stand-in API server: a quiet watch on a server that sends no bookmarks stays alive through its clean timeouts: no restart, no list", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 1,
    watchDeadlineSeconds: 2,
    watchProbeSeconds: 1,
  }, 0);
  await podWithPort(k, "a");
  await heard(k, "a");
  const before = k.monitor!.stats();
  await new Promise((r) => setTimeout(r, 6000));
  const after = k.monitor!.stats();
  assert.equal(after.watchRestarts, 0, "never found dead");
  assert.equal(after.lists, before.lists, "never listed again");
  assert.ok(k.monitor!.watches().every((w) => !w.stale));
  const watches = k.api.requests.filter((r) => r.path === "/api/v1/pods" && /watch=/.test(r.query));
  assert.ok(watches.length >= 4, `resumed after each timeout (${watches.length} watches)`);
});

Deno.test("stand-in API server: a list that never answers is given up at the deadline and tried again; the monitor is stale meanwhile, then hears again", async () => {
  await using cleanup = new Cleanup();
  const k = await setup(cleanup, {
    watchTimeoutSeconds: 2,
    watchDeadlineSeconds: 3,
    watchProbeSeconds: 0,
  });
  await podWithPort(k, "a");
  await heard(k, "a");
  const errors = k.monitor!.stats().watchErrors;

  // The watches go deaf and every list hangs: the fresh lists that follow never come back.
  k.api.hangLists(true);
  k.api.dropWatches();
  k.api.delete("pods", "acme", "a");
  await eventually(
    "the pods watch stale",
    () => k.monitor!.watches().find((w) => w.what === "pods")!.stale ? true : undefined,
    15_000,
  );
  await eventually(
    "the hung list given up",
    () => k.monitor!.stats().watchErrors > errors ? true : undefined,
    15_000,
  );
  k.api.hangLists(false);
  await released(k, "a", 30_000);
  await podWithPort(k, "b");
  await heard(k, "b", 30_000);
  await eventually(
    "no watch stale",
    () => k.monitor!.watches().every((w) => !w.stale) ? true : undefined,
  );
});
