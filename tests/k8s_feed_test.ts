/**
 * The monitor follows the manager's change feed through a manager restart and a stalled manager
 * (common/feed_follower.ts): while it hears nothing its /readyz says 503, naming the feed; once
 * the manager answers again its port index catches up (a 410 for the old epoch, then a fresh list),
 * what the pods' network-status says is current, and releases and the leak pass work again. No
 * running pod's address is released on the way.
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

async function readyz(k: KubeCluster): Promise<{ status: number; reasons: string[] }> {
  const r = await fetch(`${k.monitor!.healthUrl}/readyz`);
  const body = await r.json();
  return { status: r.status, reasons: body.reasons ?? [] };
}

function notReadyOnFeed(k: KubeCluster) {
  return eventually("readyz 503 naming the manager's feed", async () => {
    const r = await readyz(k);
    return r.status === 503 && r.reasons.some((x) => /the manager's ports: nothing heard/.test(x))
      ? r
      : undefined;
  });
}

function readyAgain(k: KubeCluster) {
  return eventually("readyz 200", async () => (await readyz(k)).status === 200 ? true : undefined);
}

/** The network-status of `name` names the address of its port at the manager. */
async function statusCurrent(k: KubeCluster, name: string): Promise<void> {
  const [port] = await portsOfPod(k, name);
  assert.ok(port, `${name} has a port`);
  await eventually(`network-status of ${name} with ${port.ip}`, () => {
    const s = k.api.get("pods", "acme", name)?.metadata.annotations?.[STATUS];
    return s?.includes(`"${port.ip}"`) ? true : undefined;
  });
}

async function cluster(cleanup: Cleanup): Promise<KubeCluster> {
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: {
      // A feed quiet for 2 s is stale (the manager answers an idle poll after 1 s).
      feedWaitSeconds: 1,
      feedDeadlineSeconds: 2,
      reclaimIntervalSeconds: 3600,
      reclaimGraceSeconds: 0,
    },
  });
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status)); // the monitor may have made it
  await k.startMonitor();
  await readyAgain(k);
  return k;
}

Deno.test("stand-in API server: the manager restarted, the monitor is not ready while it hears nothing, then its port index catches up and releases and reclaim work", async () => {
  await using cleanup = new Cleanup();
  const k = await cluster(cleanup);
  const m = k.monitor!;
  await podWithPort(k, "keep");
  await podWithPort(k, "goes");
  await statusCurrent(k, "keep");
  await statusCurrent(k, "goes");
  const listsBefore = m.portFeed().lists;

  const downAt = performance.now();
  await k.stack.stopManager();
  await notReadyOnFeed(k);
  assert.equal(m.portFeed().stale, true);
  // A pod deleted while the manager is away: its release waits for the manager.
  k.api.delete("pods", "acme", "goes");

  await k.stack.startManager();
  const backAt = performance.now();
  // Made right after the restart: a pod with a port, and a port whose pod never existed (a leak).
  await podWithPort(k, "fresh");
  const ghost = "ffffffff-0000-4000-8000-000000000001";
  const leak = await k.stack.api("PUT", `tenants/acme/networks/pods/ports/${ghost}-eth0`, {
    pod: { namespace: "acme", name: "ghost", uid: ghost },
    interface: "eth0",
  });
  assert.equal(leak.status, 201);

  await readyAgain(k);
  await statusCurrent(k, "fresh");
  console.log(
    `manager down ${((backAt - downAt) / 1000).toFixed(1)} s (a restart); from its start to the ` +
      `monitor's index current (a pod made then has its network-status): ${
        Math.round(performance.now() - backAt)
      } ms`,
  );
  assert.ok(m.portFeed().lists > listsBefore, "the new epoch's 410 made a fresh list");
  await eventually(
    "the deleted pod's port released",
    async () => (await portsOfPod(k, "goes")).length === 0 ? true : undefined,
  );
  // The leak pass picks from the index, which now knows the leak, and releases it.
  await eventually("the leak released", async () => {
    await m.reclaimNow();
    return (await portsOfPod(k, "ghost")).length === 0 ? true : undefined;
  });
  assert.equal((await portsOfPod(k, "keep")).length, 1, "a running pod keeps its address");
  assert.equal((await portsOfPod(k, "fresh")).length, 1, "a running pod keeps its address");
});

Deno.test("stand-in API server: a stalled manager (its poll never answers) makes the monitor not ready; resumed, the feed catches up without a new list", async () => {
  await using cleanup = new Cleanup();
  const k = await cluster(cleanup);
  const m = k.monitor!;
  await podWithPort(k, "before");
  await statusCurrent(k, "before");
  const pid = k.stack.managerPid();
  const resume = () => {
    try {
      Deno.kill(pid, "SIGCONT");
    } catch { /* gone already */ }
  };
  cleanup.defer(() => Promise.resolve(resume()));
  const listsBefore = m.portFeed().lists;

  Deno.kill(pid, "SIGSTOP");
  await notReadyOnFeed(k);
  await eventually("a hung poll abandoned", () => m.portFeed().hung > 0 ? true : undefined);
  resume();
  await readyAgain(k);
  await podWithPort(k, "after");
  await statusCurrent(k, "after");
  // The same manager, the same epoch: the follower resumed from its cursor.
  assert.equal(m.portFeed().lists, listsBefore);
  assert.equal((await portsOfPod(k, "before")).length, 1);
});
