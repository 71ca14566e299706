/**
 * StatefulSet stable addresses against the stand-in API server: a replacement pod (same name, new
 * UID) gets its predecessor's addresses once that pod is gone, also when it went while the monitor
 * was down (bindings compare UIDs, not only names); an address held for a pod that does not come
 * back says why and until when in its Network's status, keeps that date across monitor restarts,
 * and is released then.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import {
  eventually,
  type KubeCluster,
  networkReady,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { addressOf } from "./support/pods.ts";

interface PortView {
  id: string;
  ip: string;
  node?: string;
  pod?: { uid?: string };
  unboundAt?: string;
}

async function stablePorts(k: KubeCluster, pod: string): Promise<PortView[]> {
  return (await k.stack.api("GET", "ports?tenant=acme")).body.items.filter((p: PortView) =>
    p.id.startsWith(`stable:acme:${pod}-`)
  );
}

const ANNOTATIONS = {
  "knitter.io/stable-address": "true",
  networks: JSON.stringify({
    ports: [
      { attach_to_network: "pods", attributes: { nic_name: "eth0" } },
      { attach_to_network: "db", attributes: { nic_name: "eth1" } },
    ],
  }),
};

Deno.test("stand-in API server: a StatefulSet pod deleted while the monitor was down: its replacement on another node gets the stable addresses once the monitor is back", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "db", "10.60.0.0/24");
  const spec = { namespace: "acme", name: "db-0", owner: "StatefulSet", annotations: ANNOTATIONS };
  const first = await k.pod(n1, spec);
  const a = await first.cni.add();
  assert.equal(a.code, 0, JSON.stringify(a.out));
  const addresses = [addressOf(a.out, "eth0"), addressOf(a.out, "eth1")];
  await k.monitor!.idle();

  // The monitor is down while the old pod goes and its replacement comes to another node.
  await k.stopMonitor();
  assert.equal((await first.cni.del()).code, 0);
  k.api.delete("pods", "acme", "db-0");
  const second = await k.pod(n2, spec);
  assert.notEqual(second.obj.metadata.uid, first.obj.metadata.uid);
  const refused = await second.cni.add();
  assert.equal(refused.code, 1, "a CNI error");
  assert.equal(refused.out.code, 11, "try again later");
  assert.match(refused.out.msg, /still bound to its previous pod on node "n1"/);

  // Back: the ports name the old UID, the API has the new one under the name: the old pod is gone.
  await k.startMonitor();
  const b = await eventually("the replacement's ADD (retried) succeeds", async () => {
    const r = await second.cni.add();
    return r.code === 0 ? r : undefined;
  }, 20_000);
  assert.deepEqual([addressOf(b.out, "eth0"), addressOf(b.out, "eth1")], addresses);
  await k.monitor!.idle();
  const ports = await stablePorts(k, "db-0");
  assert.deepEqual(
    ports.map((p) => [p.node, p.pod?.uid]),
    [["n2", second.obj.metadata.uid], ["n2", second.obj.metadata.uid]],
  );
});

Deno.test("stand-in API server: an address held for a StatefulSet pod that does not come back says why and until when in its Network's status, keeps that date across monitor restarts, and is released then", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: [],
    monitor: { stableRetentionSeconds: 6, reclaimIntervalSeconds: 1 },
  });
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "db", "10.70.0.0/24");
  // The pod and its stable port as an agent makes them.
  const pod: KubeObject = k.api.create("pods", {
    metadata: {
      name: "db-0",
      namespace: "acme",
      annotations: { "knitter.io/stable-address": "true" },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "StatefulSet", name: "db", uid: "x" }],
    },
    spec: { nodeName: "n1", containers: [] },
  });
  const put = await k.stack.api("PUT", "tenants/acme/networks/db/ports/stable:acme:db-0-eth1", {
    pod: { namespace: "acme", name: "db-0", uid: pod.metadata.uid },
    node: "n1",
    interface: "eth1",
  });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const ip = put.body.ip;

  // Scaled down: the pod goes, the address is held for its return.
  k.api.delete("pods", "acme", "db-0");
  const held = await eventually("held in the Network's status", () => {
    const h = k.api.get("networks", "acme", "db")?.status?.heldAddresses;
    return h?.length === 1 ? h[0] : undefined;
  });
  const [port] = await stablePorts(k, "db-0");
  assert.equal(port.pod, undefined, "unbound");
  assert.equal(held.address, ip);
  assert.equal(held.port, "stable:acme:db-0-eth1");
  assert.equal(held.pod, "acme/db-0");
  assert.equal(held.interface, "eth1");
  assert.equal(held.since, port.unboundAt);
  assert.equal(Date.parse(held.until) - Date.parse(held.since), 6000);
  assert.match(
    held.reason,
    /StatefulSet pod acme\/db-0 was deleted; its address 10\.70\.0\.\d+ \(eth1\) is kept for its return until .*Z, then released/,
  );

  // A monitor restart does not move the date.
  await k.stopMonitor();
  await k.startMonitor();
  await k.monitor!.idle();
  assert.equal(k.api.get("networks", "acme", "db")?.status?.heldAddresses?.[0]?.until, held.until);

  // Released at that date, not before.
  await eventually(
    "released",
    async () => (await stablePorts(k, "db-0")).length === 0 ? true : undefined,
    20_000,
  );
  assert.ok(Date.now() >= Date.parse(held.until), "not before its date");
  await eventually(
    "no longer held in the status",
    () =>
      (k.api.get("networks", "acme", "db")?.status?.heldAddresses ?? []).length === 0
        ? true
        : undefined,
  );
});
