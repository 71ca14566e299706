/**
 * Issue 32: an agent's view of the cluster (agent/dataplane/remote.ts RemoteView) follows a real
 * manager's feed by one streamed answer (manager/feed_streams.ts), through the manager's HTTP
 * server and connection guard on loopback, with the agent's own ManagerClient (which asks for a
 * WebSocket first: refused behind the guard, tests/e2e_feed_socket_test.ts).
 */
import assert from "node:assert/strict";
import { createLogger, ManagerClient } from "@knitter/common";
import { startManager } from "../manager/mod.ts";
import { RemoteView } from "../agent/dataplane/remote.ts";

const ADMIN = "stream-e2e-admin-token-0123456789";
const N1 = "stream-e2e-node-1-token-0123456789";

Deno.test("agent view streams the manager's feed: a port bound elsewhere reaches it on the open stream, which the manager counts as one request in progress", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-stream-e2e-" });
  const m = await startManager({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [{ token: ADMIN, scope: "admin" }, { token: N1, scope: "node", node: "n1" }],
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
  });
  const admin = new ManagerClient(m.url, ADMIN);
  const client = new ManagerClient(m.url, N1);
  let changed = Promise.withResolvers<void>();
  const view = new RemoteView(client, "n1", () => changed.resolve(), createLogger("error"));
  try {
    await admin.request("POST", "/api/v1/tenants", { name: "acme" });
    await admin.request("POST", "/api/v1/tenants/acme/networks", {
      name: "blue",
      cidr: "10.1.0.0/24",
    });
    await admin.request("PUT", "/api/v1/nodes/n2", { underlayIp: "192.0.2.2" });
    await view.start();
    await changed.promise;
    const metrics = async () => {
      const r = await fetch(`${m.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
      return await r.text();
    };
    const inFlight = async () =>
      Number((await metrics()).match(/in_flight_requests\{principal="node"\} (\d+)/)?.[1]);
    /** Feed requests answered (a stream is counted once its answer starts). */
    const feedRequests = async () =>
      [...(await metrics()).matchAll(
        /http_requests_total\{[^}]*route="\/api\/v1\/feed"[^}]*\} (\d+)/g,
      )]
        .reduce((sum, m) => sum + Number(m[1]), 0);
    // The stream is open: one request of n1's in progress, however long it stays.
    while ((await inFlight()) !== 1) await new Promise((r) => setTimeout(r, 20));

    for (const name of ["p1", "p2"]) {
      changed = Promise.withResolvers<void>();
      const port = await admin.request<{ id: string; ip: string }>(
        "PUT",
        `/api/v1/tenants/acme/networks/blue/ports/${name}`,
        { node: "n2" },
      );
      await changed.promise;
      const seen = [...view.ports()].find((p) => p.id === port.id);
      assert.equal(seen?.ip, port.ip);
    }
    assert.equal(view.nodeIp("n2"), "192.0.2.2");
    assert.equal(view.feedHealth().lists, 1, "followed without listing again");
    assert.equal(await inFlight(), 1, "still the one stream");
    // Behind the connection guard (the default) the agent's socket is refused (501) first.
    assert.equal(
      await feedRequests(),
      3,
      "a cursor, the refused socket and one stream: no request per page",
    );
  } finally {
    await view.stop();
    client.close();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
