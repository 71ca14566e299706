/**
 * A failed ADD leaves no stale network-status, and the status is right once the pod runs. The
 * monitor writes a pod's `k8s.v1.cni.cncf.io/network-status` from the ports bound to the pod at the
 * manager, after the ADD made them (the order: the agent's ports, its answer to the runtime, then
 * the status, from the change feed); a rollback takes the ports away (a stable one is unbound), and
 * with them the status the monitor wrote. Against the stand-in API server, with a real agent,
 * plugin and manager.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  eventually,
  type KubeCluster,
  networkReady,
  podWithPort,
  startKubeCluster,
} from "./support/kube_cluster.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";
const WRITER = "knitter.io/network-status-writer";

interface StatusEntry {
  name: string;
  interface: string;
  ips: string[];
  mac: string;
}

function annotations(k: KubeCluster, name: string): Record<string, string> {
  return k.api.get("pods", "acme", name)?.metadata.annotations ?? {};
}

/** Waits until the monitor holds the manager's ports (the feed caught up) and has nothing queued. */
async function settled(k: KubeCluster): Promise<void> {
  await eventually("the monitor caught up and idle", async () => {
    const held = (await k.stack.api("GET", "ports")).body.items.length;
    if (k.monitor!.stats().ports !== held) return undefined;
    await k.monitor!.idle();
    return k.monitor!.stats().queued === 0 ? true : undefined;
  });
}

/** The CNI result's interfaces in the pod: name, addresses, MAC. */
function resultInterfaces(out: {
  interfaces: { name: string; mac: string; sandbox?: string }[];
  ips: { address: string; interface: number }[];
}): { interface: string; ips: string[]; mac: string }[] {
  return out.interfaces.flatMap((i, n) =>
    i.sandbox
      ? [{
        interface: i.name,
        mac: i.mac,
        ips: out.ips.filter((ip) => ip.interface === n).map((ip) => ip.address.split("/")[0]),
      }]
      : []
  );
}

Deno.test("stand-in API server: a failed ADD leaves no network-status naming what it rolled back; the next ADD's status equals its result", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "data", "10.50.0.0/24");

  // The status the monitor wrote goes when the ports it named go (as a rollback takes them).
  const early = await podWithPort(k, "early");
  await eventually("early's status", () => annotations(k, "early")[STATUS]);
  assert.match(annotations(k, "early")[WRITER], /^knitter-monitor [0-9a-f]{8}$/);
  const del = await k.stack.api(
    "DELETE",
    `tenants/acme/networks/pods/ports/${early.metadata.uid}-eth0`,
  );
  assert.equal(del.status, 204);
  await eventually(
    "early's status gone with its port",
    () => annotations(k, "early")[STATUS] === undefined ? true : undefined,
  );
  assert.equal(annotations(k, "early")[WRITER], undefined);

  // eth0 is made (its port on the default network), then net1's fixed address is taken: the ADD
  // fails after part of the pod was wired, and rolls back.
  const taken = await k.stack.api("PUT", "tenants/acme/networks/data/ports/squatter", {
    ip: "10.50.0.60",
  });
  assert.equal(taken.status, 201);
  const web = await k.pod(n1, {
    namespace: "acme",
    name: "web",
    annotations: {
      "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "data", ips: ["10.50.0.60/24"] }]),
    },
  });
  const failed = await web.cni.add();
  assert.notEqual(failed.code, 0);
  assert.match(JSON.stringify(failed.out), /10\.50\.0\.60/);
  assert.deepEqual((await k.stack.api("GET", "ports?pod=acme/web")).body.items, []);
  await settled(k);
  assert.equal(annotations(k, "web")[STATUS], undefined, "no status names the rolled-back eth0");

  // Another address asked (the squatter keeps its own): the runtime's next ADD works, and the
  // status then names exactly its result.
  k.api.update("pods", "acme", "web", (o) => {
    o.metadata.annotations["k8s.v1.cni.cncf.io/networks"] = JSON.stringify([{
      name: "data",
      ips: ["10.50.0.61/24"],
    }]);
  });
  const added = await web.cni.add();
  const returned = performance.now();
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const want = resultInterfaces(added.out);
  assert.deepEqual(want.map((i) => i.interface), ["eth0", "net1"]);
  const status: StatusEntry[] = await eventually("web's status", () => {
    const v = annotations(k, "web")[STATUS];
    return v && JSON.parse(v).length === want.length ? JSON.parse(v) : undefined;
  });
  console.log(
    `network-status written ${Math.round(performance.now() - returned)} ms after the ADD returned`,
  );
  assert.deepEqual(
    status.map((s) => ({ interface: s.interface, ips: s.ips, mac: s.mac })),
    want,
  );
  assert.deepEqual(status.map((s) => s.name), ["admin/pods", "acme/data"]);
});

Deno.test("stand-in API server: a StatefulSet pod's failed ADD unbinds the stable port it bound (same address, no pod), so no status names it; the next ADD binds it again", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "db", "10.60.0.0/24");
  const taken = await k.stack.api("PUT", "tenants/acme/networks/db/ports/squatter", {
    ip: "10.60.0.70",
  });
  assert.equal(taken.status, 201);
  const db = await k.pod(n1, {
    namespace: "acme",
    name: "db-0",
    owner: "StatefulSet",
    annotations: {
      "knitter.io/stable-address": "true",
      networks: JSON.stringify({
        ports: [
          { attach_to_network: "pods", attributes: { nic_name: "eth0" } },
          { attach_to_network: "db", attributes: { nic_name: "eth1", ip_addr: "10.60.0.70" } },
        ],
      }),
    },
  });
  const failed = await db.cni.add();
  assert.notEqual(failed.code, 0);
  const stable = async () =>
    (await k.stack.api("GET", "ports?tenant=acme")).body.items.filter((
      p: { id: string },
    ) => p.id.startsWith("stable:acme:db-0-"));
  const [kept] = await stable();
  assert.ok(kept, "the stable eth0 port keeps its address");
  assert.equal(kept.id, "stable:acme:db-0-eth0");
  assert.equal(kept.pod, undefined, "unbound by the rollback");
  assert.equal(kept.node, undefined);
  await settled(k);
  assert.equal(annotations(k, "db-0")[STATUS], undefined);

  k.api.update("pods", "acme", "db-0", (o) => {
    o.metadata.annotations.networks = o.metadata.annotations.networks.replace(
      "10.60.0.70",
      "10.60.0.71",
    );
  });
  const added = await db.cni.add();
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const bound = (await stable()).find((p: { id: string }) => p.id === kept.id);
  assert.equal(bound.ip, kept.ip, "the same address, bound again");
  assert.equal(bound.pod?.uid, db.obj.metadata.uid);
  const status: StatusEntry[] = await eventually("db-0's status", () => {
    const v = annotations(k, "db-0")[STATUS];
    return v && JSON.parse(v).length === 2 ? JSON.parse(v) : undefined;
  });
  assert.deepEqual(
    status.map((s) => ({ interface: s.interface, ips: s.ips, mac: s.mac })),
    resultInterfaces(added.out),
  );
});

/** A network-status as Multus writes it: the meta-plugin's view of every attachment. */
const MULTUS_STATUS = JSON.stringify([{
  name: "multus-cni-network",
  interface: "eth0",
  ips: ["10.244.0.9"],
  mac: "0a:58:0a:f4:00:09",
  default: true,
  dns: {},
}]);

/** Pod watch events of `type` the monitor applied (its /metrics). */
async function podEvents(k: KubeCluster, type: string): Promise<number> {
  const text = await (await fetch(`${k.monitor!.healthUrl}/metrics`)).text();
  const line = text.split("\n").find((l) =>
    l.startsWith("knitter_monitor_watch_events_total{") && l.includes(`resource="pods"`) &&
    l.includes(`type="${type}"`)
  );
  return line ? Number(line.split(" ").at(-1)) : 0;
}

Deno.test("stand-in API server: a network-status Multus wrote is never overwritten nor removed by the monitor, whichever was first", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  await k.startMonitor();
  k.namespace("acme");
  assert.ok([200, 201].includes((await k.stack.api("PUT", "tenants/acme")).status));

  // Multus wrote its status before the monitor heard of the port.
  const first = k.api.create("pods", {
    metadata: { name: "first", namespace: "acme", annotations: { [STATUS]: MULTUS_STATUS } },
    spec: { nodeName: "n1", containers: [] },
  });
  const { uid } = first.metadata;
  const put = await k.stack.api("PUT", `tenants/acme/networks/pods/ports/${uid}-eth0`, {
    pod: { namespace: "acme", name: "first", uid },
    interface: "eth0",
  });
  assert.equal(put.status, 201);
  await settled(k);
  assert.equal(annotations(k, "first")[STATUS], MULTUS_STATUS);
  assert.equal(annotations(k, "first")[WRITER], undefined);

  // The monitor wrote first; then Multus' ADD ended and wrote its own over it (Multus patches
  // its annotation only: the monitor's mark stays beside it).
  const late = await podWithPort(k, "late");
  await eventually("late's status", () => annotations(k, "late")[STATUS]);
  const modified = await podEvents(k, "MODIFIED");
  k.api.update("pods", "acme", "late", (o) => {
    o.metadata.annotations[STATUS] = MULTUS_STATUS;
  });
  await eventually(
    "the monitor heard of Multus' status",
    async () => (await podEvents(k, "MODIFIED")) > modified ? true : undefined,
  );
  await settled(k);
  assert.equal(annotations(k, "late")[STATUS], MULTUS_STATUS, "not overwritten");
  // A rollback takes the ports away: Multus' status stays, Multus takes care of it.
  for (const pod of [first, late]) {
    const del = await k.stack.api(
      "DELETE",
      `tenants/acme/networks/pods/ports/${pod.metadata.uid}-eth0`,
    );
    assert.equal(del.status, 204);
  }
  await settled(k);
  assert.equal(annotations(k, "first")[STATUS], MULTUS_STATUS);
  assert.equal(annotations(k, "late")[STATUS], MULTUS_STATUS, "not removed");
});
