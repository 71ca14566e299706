/**
 * The agent's client for stable StatefulSet ports (agent/kubernetes/kube_manager.ts) against a real
 * manager: a stable port still held by the pod's previous incarnation on this node is released and
 * made again; when it is a claim's port, it names the claim alone and gets the claim's address and
 * MAC (naming the old address beside the claim would be refused).
 */
import assert from "node:assert/strict";
import { ConfigSchema } from "../manager/config.ts";
import { startManager } from "../manager/mod.ts";
import { StablePortsClient } from "../agent/kubernetes/kube_manager.ts";
import { Cleanup } from "../devstack/cleanup.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const NODE = `node-${crypto.randomUUID()}`;

Deno.test("stable ports: a claim's stable port held by the pod's previous incarnation on this node is made again with the claim's address and MAC", async () => {
  await using cleanup = new Cleanup();
  const dir = await cleanup.tempDir();
  const manager = await startManager(ConfigSchema.parse({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [{ token: ADMIN, scope: "admin" }, { token: NODE, scope: "node", node: "n1" }],
    vniRanges: ["5000-5999"],
    logLevel: "error",
  }));
  cleanup.defer(() => manager.shutdown());
  const admin = new StablePortsClient(manager.url, ADMIN);
  await admin.request("POST", "/api/v1/tenants", { name: "acme" });
  await admin.request("POST", "/api/v1/tenants/acme/networks", {
    name: "blue",
    cidr: "10.1.0.0/24",
  });
  const claim = await admin.request<{ ip: string; mac: string }>(
    "POST",
    "/api/v1/tenants/acme/networks/blue/claims",
    { name: "vm1" },
  );
  const agent = new StablePortsClient(manager.url, NODE);
  const id = "stable:acme:vm-0-net1";
  const ask = (uid: string) => ({
    claim: "vm1",
    node: "n1",
    pod: { namespace: "acme", name: "vm-0", uid },
    interface: "net1",
  });
  const first = await agent.putPort("acme", "blue", id, ask("u1"));
  assert.deepEqual([first.ip, first.mac, first.node], [claim.ip, claim.mac, "n1"]);
  // The pod's next incarnation on the same node, before the monitor unbound the old one.
  const again = await agent.putPort("acme", "blue", id, ask("u2"));
  assert.deepEqual([again.ip, again.mac, again.claim, again.pod?.uid], [
    claim.ip,
    claim.mac,
    "vm1",
    "u2",
  ]);
});
