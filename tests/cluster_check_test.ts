/**
 * The monitor's and the agent's check of their manager token against their cluster
 * (common/cluster_check.ts, monitor/cluster_check.ts), against a real manager: a token of another
 * cluster, of no registered cluster, or an admin token while the manager serves several clusters
 * is refused before anything is watched or registered.
 */
import assert from "node:assert/strict";
import { checkTokenCluster, createLogger, ManagerClient } from "@knitter/common";
import { checkClusterToken, ClusterMismatchError } from "../monitor/cluster_check.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { startLoopbackManager } from "./support/loopback_manager.ts";

const TOKENS = {
  admin: `admin-${crypto.randomUUID()}`,
  east: `east-monitor-${crypto.randomUUID()}`,
  north: `north-monitor-${crypto.randomUUID()}`,
  eastNode: `east-n1-${crypto.randomUUID()}`,
};

Deno.test("monitor: it starts only with a token of its own cluster that reaches no other", async () => {
  await using cleanup = new Cleanup();
  const manager = await startLoopbackManager(cleanup, [
    { token: TOKENS.admin, scope: "admin" },
    { token: TOKENS.east, scope: "monitor", cluster: "east" },
    { token: TOKENS.north, scope: "monitor", cluster: "north" },
    { token: TOKENS.eastNode, scope: "node", node: "n1", cluster: "east" },
  ]);
  const log = createLogger("monitor", "error");
  const check = (token: string, cluster: string) => {
    const client = new ManagerClient(manager.url, token);
    cleanup.defer(() => Promise.resolve(client.close()));
    return checkClusterToken(client, cluster, log, new AbortController().signal);
  };
  // Only the default cluster: an admin token is what a single-cluster monitor has always had.
  await check(TOKENS.admin, "default");
  const admin = new ManagerClient(manager.url, TOKENS.admin);
  cleanup.defer(() => Promise.resolve(admin.close()));
  await admin.request("POST", "/api/v1/clusters", { name: "east", tenants: ["acme"] });

  await check(TOKENS.east, "east");
  const refused: [string, string, RegExp][] = [
    [
      TOKENS.east,
      "west",
      /Configured for cluster "west", but the manager token is of cluster "east"/,
    ],
    [
      TOKENS.admin,
      "default",
      /serves other clusters too \(east\).*a monitor token of cluster "default"/,
    ],
    [TOKENS.north, "north", /refused for cluster "north": Cluster "north" is not registered/],
  ];
  for (const [token, cluster, why] of refused) {
    await assert.rejects(check(token, cluster), (err: Error) => {
      assert.ok(err instanceof ClusterMismatchError, String(err));
      assert.match(err.message, why);
      return true;
    });
  }
});

Deno.test("agent: its node token must be its cluster's", async () => {
  await using cleanup = new Cleanup();
  const manager = await startLoopbackManager(cleanup, [
    { token: TOKENS.admin, scope: "admin" },
    { token: TOKENS.eastNode, scope: "node", node: "n1", cluster: "east" },
  ]);
  const client = (token: string) => {
    const c = new ManagerClient(manager.url, token);
    cleanup.defer(() => Promise.resolve(c.close()));
    return c;
  };
  await client(TOKENS.admin).request("POST", "/api/v1/clusters", { name: "east" });
  const node = client(TOKENS.eastNode);
  await checkTokenCluster(node, "east", "node");
  await assert.rejects(
    checkTokenCluster(node, "default", "node"),
    /Configured for cluster "default", but the manager token is of cluster "east": give it a node token of cluster "default"/,
  );
});
