/**
 * IPAMClaims (issue 26) against the stand-in API server, with the real monitor and manager: an
 * IPAMClaim becomes a claim at the manager and its status says the address and the pod that has
 * it; its pods come and go (and migrate) while the address stays; a monitor restart changes
 * nothing; the claim is released once its last pod is gone after the resource was deleted.
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

const CLAIM = "vm-a.blue";
const MANAGER_CLAIM = `tenants/acme/networks/blue/claims/${CLAIM}`;

function ipamClaim(k: KubeCluster, spec: Record<string, unknown>): KubeObject {
  return k.api.create("ipamclaims", {
    metadata: {
      name: CLAIM,
      namespace: "acme",
      ownerReferences: [{
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachine",
        name: "vm-a",
        uid: "u",
      }],
    },
    spec,
  });
}

/** The IPAMClaim's status once it says `want` of ownerPod (and is Ready). */
function statusWith(k: KubeCluster, ownerPod: string): Promise<{ ips: string[] }> {
  return eventually(`IPAMClaim status with ownerPod "${ownerPod}"`, () => {
    const s = k.api.get("ipamclaims", "acme", CLAIM)?.status;
    const ready = s?.conditions?.[0]?.status === "True";
    return ready && s.ownerPod === ownerPod ? s : undefined;
  });
}

/** A port as the agent of `node` makes it for a pod naming the claim. */
async function podPort(k: KubeCluster, pod: string, node: string) {
  const r = await k.stack.api("PUT", `tenants/acme/networks/blue/ports/${pod}-net1`, {
    claim: CLAIM,
    pod: { namespace: "acme", name: pod },
    node,
    interface: "net1",
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

Deno.test("stand-in API server: an IPAMClaim holds its address across pods, nodes, a migration and a monitor restart, and is released after its last pod", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "blue", "10.80.0.0/24");

  ipamClaim(k, { network: "blue", interface: "net1" });
  const made = await statusWith(k, "");
  const claim = (await k.stack.api("GET", MANAGER_CLAIM)).body;
  assert.deepEqual(made.ips, [claim.address]);
  assert.ok(
    k.api.get("ipamclaims", "acme", CLAIM)!.metadata.finalizers.includes("knitter.io/manager"),
  );

  // The VM's pod on n1, then gone: the address stays the claim's.
  const first = await podPort(k, "virt-launcher-a", "n1");
  assert.deepEqual([first.ip, first.mac], [claim.ip, claim.mac]);
  await statusWith(k, "virt-launcher-a");
  assert.equal(
    (await k.stack.api("DELETE", "tenants/acme/networks/blue/ports/virt-launcher-a-net1")).status,
    204,
  );
  await statusWith(k, "");

  // Restarted on n2, then migrated to n1: the target gets the address, inactive until activated.
  const second = await podPort(k, "virt-launcher-b", "n2");
  assert.deepEqual([second.ip, second.mac, second.active], [claim.ip, claim.mac, undefined]);
  const target = await podPort(k, "virt-launcher-c", "n1");
  assert.deepEqual([target.ip, target.mac, target.active], [claim.ip, claim.mac, false]);
  await statusWith(k, "virt-launcher-b");
  const activated = await k.stack.api(
    "POST",
    "tenants/acme/networks/blue/ports/virt-launcher-c-net1/activate",
  );
  assert.equal(activated.status, 200, JSON.stringify(activated.body));
  await statusWith(k, "virt-launcher-c");

  // A monitor restart: the same claim, the same status, nothing made again.
  await k.stopMonitor();
  await k.startMonitor();
  await k.monitor!.idle();
  assert.deepEqual((await statusWith(k, "virt-launcher-c")).ips, [claim.address]);
  assert.equal((await k.stack.api("GET", "tenants/acme/claims")).body.items.length, 1);

  // The VM goes: the resource waits (its pods still have the address), then the claim goes.
  k.api.delete("ipamclaims", "acme", CLAIM);
  await eventually("the release refused while pods have the address", () => {
    const c = k.api.get("ipamclaims", "acme", CLAIM)?.status?.conditions?.[0];
    return c?.status === "False" && c.reason === "InUse" ? c : undefined;
  });
  for (const pod of ["virt-launcher-b", "virt-launcher-c"]) {
    const r = await k.stack.api("DELETE", `tenants/acme/networks/blue/ports/${pod}-net1`);
    assert.equal(r.status, 204);
  }
  await eventually(
    "the IPAMClaim gone",
    () => k.api.get("ipamclaims", "acme", CLAIM) === undefined ? true : undefined,
  );
  assert.equal((await k.stack.api("GET", MANAGER_CLAIM)).status, 404);
});

Deno.test("stand-in API server: an IPAMClaim asking for addresses, or on a network that does not exist, says why in its Ready condition", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  k.namespace("acme");
  ipamClaim(k, { network: "blue", interface: "net1", ipRequests: ["10.80.0.9/24"] });
  const refused = await eventually("refused", () => {
    const c = k.api.get("ipamclaims", "acme", CLAIM)?.status?.conditions?.[0];
    return c?.status === "False" ? c : undefined;
  });
  assert.equal(refused.reason, "IPRequestsNotSupported");
  k.api.update("ipamclaims", "acme", CLAIM, (o) => delete o.spec.ipRequests);
  const missing = await eventually("no network", () => {
    const c = k.api.get("ipamclaims", "acme", CLAIM)?.status?.conditions?.[0];
    return c?.reason === "NotFound" ? c : undefined;
  });
  assert.match(missing.message, /Network "blue" does not exist/);
  assert.deepEqual(k.api.get("ipamclaims", "acme", CLAIM)?.status?.ips, []);
  await networkReady(k, "blue", "10.80.0.0/24");
  await statusWith(k, "");
});
