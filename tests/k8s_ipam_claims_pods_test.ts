/**
 * IPAMClaims with real pods (issue 26): two simulated nodes with their agents in Kubernetes mode,
 * the stand-in API server, the real monitor and manager on a Deno KV file. A VM's pod names the
 * claim in its network selection (`ipam-claim-reference`); the pod is deleted and a new one comes
 * on the other node, and gets the same address and MAC through the real CNI plugin, also after a
 * monitor restart; the interface in the pod has them.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { eventually, networkReady, startKubeCluster } from "./support/kube_cluster.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";

const CLAIM = "vm-a.blue";
const ANNOTATIONS = {
  "k8s.v1.cni.cncf.io/networks": JSON.stringify([
    { name: "blue", interface: "net1", "ipam-claim-reference": CLAIM },
  ]),
};

/** The MAC of `ifName` in the CNI result. */
// deno-lint-ignore no-explicit-any
function macOf(result: any, ifName: string): string {
  return result.interfaces.find((i: { name: string; sandbox?: string }) =>
    i.name === ifName && i.sandbox
  ).mac;
}

/** The address and MAC the pod's interface has, as `ip` reports them in its netns. */
async function inPod(netns: string, ifName: string): Promise<[string, string]> {
  const out = (await run(["ip", "-j", "addr", "show", ifName], { netns: ipNetnsName(netns) }))
    .stdout;
  const [link] = JSON.parse(out);
  const v4 = link.addr_info.find((a: { family: string }) => a.family === "inet");
  return [v4.local, link.address];
}

Deno.test("stand-in API server and two nodes: a pod naming an IPAMClaim gets its address and MAC; after the pod's deletion and a monitor restart, a pod on the other node gets them again", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "blue", "10.90.0.0/24");
  k.api.create("ipamclaims", {
    metadata: { name: CLAIM, namespace: "acme" },
    spec: { network: "blue", interface: "net1" },
  });
  const ips = await eventually("the IPAMClaim's address", () => {
    const s = k.api.get("ipamclaims", "acme", CLAIM)?.status;
    return s?.ips?.length === 1 ? s.ips : undefined;
  });
  const claim = (await k.stack.api("GET", `tenants/acme/networks/blue/claims/${CLAIM}`)).body;
  assert.deepEqual(ips, [claim.address]);

  // The VM's pod on n1.
  const first = await k.pod(n1, {
    namespace: "acme",
    name: "virt-launcher-a",
    annotations: ANNOTATIONS,
  });
  const a = await first.cni.add();
  assert.equal(a.code, 0, JSON.stringify(a.out));
  assert.deepEqual([addressOf(a.out, "net1"), macOf(a.out, "net1")], [claim.ip, claim.mac]);
  assert.deepEqual(await inPod(first.cni.netns, "net1"), [claim.ip, claim.mac]);
  await eventually(
    "ownerPod",
    () =>
      k.api.get("ipamclaims", "acme", CLAIM)?.status?.ownerPod === "virt-launcher-a"
        ? true
        : undefined,
  );

  // The pod goes (DEL, then the object); the monitor restarts meanwhile.
  assert.equal((await first.cni.del()).code, 0);
  k.api.delete("pods", "acme", "virt-launcher-a");
  await k.stopMonitor();
  await k.startMonitor();
  const held = (await k.stack.api("GET", `tenants/acme/networks/blue/claims/${CLAIM}`)).body;
  assert.deepEqual([held.ip, held.mac, held.ports], [claim.ip, claim.mac, []]);

  // The VM starts again on n2: the same address and MAC.
  const second = await k.pod(n2, {
    namespace: "acme",
    name: "virt-launcher-b",
    annotations: ANNOTATIONS,
  });
  const b = await second.cni.add();
  assert.equal(b.code, 0, JSON.stringify(b.out));
  assert.deepEqual([addressOf(b.out, "net1"), macOf(b.out, "net1")], [claim.ip, claim.mac]);
  assert.deepEqual(await inPod(second.cni.netns, "net1"), [claim.ip, claim.mac]);
  await eventually(
    "ownerPod on n2",
    () =>
      k.api.get("ipamclaims", "acme", CLAIM)?.status?.ownerPod === "virt-launcher-b"
        ? true
        : undefined,
  );
  assert.equal((await second.cni.del()).code, 0);
});
