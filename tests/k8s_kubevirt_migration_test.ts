/**
 * KubeVirt's live migration object into the manager's activation (monitor/kubevirt_migrations.ts):
 * two simulated nodes with their agents in Kubernetes mode, the stand-in API server, the real
 * monitor and manager. A VM's pod on n1 and its migration's target pod on n2 name one IPAMClaim;
 * the target's port is inactive until the VirtualMachineInstanceMigration says the target runs the
 * VM, then the monitor activates it (the guest here sends nothing the agent would activate it by).
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { eventually, networkReady, startKubeCluster } from "./support/kube_cluster.ts";
import { runningTarget } from "../monitor/kubevirt_migrations.ts";

const CLAIM = "vm-a.blue";
const ANNOTATIONS = {
  "k8s.v1.cni.cncf.io/networks": JSON.stringify([
    { name: "blue", interface: "net1", "ipam-claim-reference": CLAIM },
  ]),
};

Deno.test("stand-in API server and two nodes: a VirtualMachineInstanceMigration whose target runs the VM activates the target pod's claim port", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: ["n1", "n2"],
    monitor: { kubevirtMigrations: true },
  });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "blue", "10.91.0.0/24");
  k.api.create("ipamclaims", {
    metadata: { name: CLAIM, namespace: "acme" },
    spec: { network: "blue", interface: "net1" },
  });
  await eventually("the IPAMClaim's address", () => {
    const s = k.api.get("ipamclaims", "acme", CLAIM)?.status;
    return s?.ips?.length === 1 ? true : undefined;
  });
  const ports = async () => {
    const c = (await k.stack.api("GET", `tenants/acme/networks/blue/claims/${CLAIM}`)).body;
    return c.ports
      .map((p: { pod?: { name: string }; active: boolean }) => `${p.pod?.name}:${p.active}`)
      .sort();
  };

  for (const [node, name] of [[n1, "virt-launcher-a"], [n2, "virt-launcher-b"]] as const) {
    const pod = await k.pod(node, { namespace: "acme", name, annotations: ANNOTATIONS });
    const r = await pod.cni.add();
    assert.equal(r.code, 0, JSON.stringify(r.out));
  }
  assert.deepEqual(await ports(), ["virt-launcher-a:true", "virt-launcher-b:false"]);

  // Under way: the target pod is there, the VM not yet running in it.
  k.api.create("virtualmachineinstancemigrations", {
    metadata: { name: "mig-1", namespace: "acme" },
    spec: { vmiName: "vm-a" },
    status: {
      phase: "Running",
      migrationState: { targetPod: "virt-launcher-b", targetNode: "n2", sourceNode: "n1" },
    },
  });
  // The target runs the VM (KubeVirt saw the domain start on n2).
  k.api.update("virtualmachineinstancemigrations", "acme", "mig-1", (o) => {
    o.status.migrationState.targetNodeDomainDetected = true;
  });
  await eventually("the target's port active", async () => {
    const now = await ports();
    return now.join() === "virt-launcher-a:false,virt-launcher-b:true" ? true : undefined;
  });
});

Deno.test("kubevirt migrations: only a migration whose target runs the VM names a pod to activate", () => {
  const m = (status: Record<string, unknown>) => ({
    metadata: { name: "m", namespace: "acme" },
    status,
  });
  const state = { targetPod: "virt-launcher-b", targetNode: "n2" };
  assert.equal(runningTarget(m({ phase: "Scheduling" })), undefined);
  assert.equal(runningTarget(m({ phase: "Running", migrationState: state })), undefined);
  assert.equal(
    runningTarget(
      m({ phase: "Running", migrationState: { ...state, targetNodeDomainDetected: true } }),
    ),
    "virt-launcher-b",
  );
  assert.equal(
    runningTarget(m({ phase: "Succeeded", migrationState: { ...state, completed: true } })),
    "virt-launcher-b",
  );
  assert.equal(
    runningTarget(
      m({ phase: "Failed", migrationState: { ...state, completed: true, failed: true } }),
    ),
    undefined,
    "a failed migration activates nothing: the source keeps the traffic",
  );
});
