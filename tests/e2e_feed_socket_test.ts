/**
 * Issue 32: an agent's view of the cluster (agent/dataplane/remote.ts RemoteView), and the monitor's
 * port index (monitor/port_index.ts), follow a real
 * manager's feed over a WebSocket (manager/feed_sockets.ts) where the manager serves one (on its
 * API port straight on Deno.serve, or on its feed socket port behind its guard), and by its NDJSON
 * stream where it refuses: an older manager refuses the parameter, the guarded API port answers 501
 * (tests/e2e_feed_stream_test.ts).
 */
import assert from "node:assert/strict";
import { createLogger, type FeedEvent, ManagerClient } from "@knitter/common";
import { startManager } from "../manager/mod.ts";
import { RemoteView } from "../agent/dataplane/remote.ts";
import { PortIndex } from "../monitor/port_index.ts";

const ADMIN = "socket-e2e-admin-token-0123456789";
const N1 = "socket-e2e-node-1-token-0123456789";

type Page = (page: { cursor: string; events: FeedEvent[] }) => void;

/** The agent's (or the monitor's) own client, counting how it follows the feed. */
class CountingClient extends ManagerClient {
  sockets = 0;
  streams = 0;
  polls = 0;
  override feedSocket(cursor: string, heartbeatS: number, page: Page, signal?: AbortSignal) {
    this.sockets++;
    return super.feedSocket(cursor, heartbeatS, page, signal);
  }
  override feedStream(cursor: string, heartbeatS: number, page: Page, signal?: AbortSignal) {
    this.streams++;
    return super.feedStream(cursor, heartbeatS, page, signal);
  }
  override feedSince(cursor: string, timeoutS: number, signal?: AbortSignal) {
    this.polls++;
    return super.feedSince(cursor, timeoutS, signal);
  }
}

/** A manager on loopback with the admin's and n1's tokens; `more`: its listen and limits. */
function managerIn(
  dir: string,
  more: { listen?: { port?: number; feedSocketPort?: number }; limits?: { headerTimeoutMs: 0 } },
) {
  return startManager({
    listen: { hostname: "127.0.0.1", port: 0, ...more.listen },
    store: { path: `${dir}/manager.kv` },
    tokens: [{ token: ADMIN, scope: "admin" }, { token: N1, scope: "node", node: "n1" }],
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    logLevel: "error",
    ...(more.limits ? { limits: more.limits } : {}),
  });
}

/** A manager that serves sockets on its API port: straight on Deno.serve (a proxy in front times headers). */
function directManager(dir: string) {
  return managerIn(dir, { limits: { headerTimeoutMs: 0 } });
}

/**
 * In front of `url`, a manager as one older than sockets answers: a WebSocket handshake for the
 * feed is a 400 on its `stream` parameter; everything else is passed on.
 */
function olderManager(url: string) {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const { pathname, search } = new URL(req.url);
    if (req.headers.get("upgrade") === "websocket") {
      return Response.json({
        error: {
          code: "invalid_request",
          message: 'Invalid option: expected one of "ndjson"',
          field: "query.stream",
        },
      }, { status: 400 });
    }
    return await fetch(`${url}${pathname}${search}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
  });
}

/** Two ports bound on n2 reach the view, each by its own page; the view never lists again. */
async function portsReach(
  admin: ManagerClient,
  view: RemoteView,
  changes: { next: Promise<void> },
): Promise<void> {
  for (const name of ["p1", "p2"]) {
    const port = await admin.request<{ id: string; ip: string }>(
      "PUT",
      `/api/v1/tenants/acme/networks/blue/ports/${name}`,
      { node: "n2" },
    );
    // A change may come before the port's (a node's, a heartbeat's): wait until it is seen.
    for (;;) {
      const seen = [...view.ports()].find((p) => p.id === port.id);
      if (seen) {
        assert.equal(seen.ip, port.ip);
        break;
      }
      await changes.next;
    }
  }
  assert.equal(view.feedHealth().lists, 1, "followed without listing again");
}

async function world(admin: ManagerClient) {
  await admin.request("POST", "/api/v1/tenants", { name: "acme" });
  await admin.request("POST", "/api/v1/tenants/acme/networks", {
    name: "blue",
    cidr: "10.1.0.0/24",
  });
  await admin.request("PUT", "/api/v1/nodes/n2", { underlayIp: "192.0.2.2" });
}

/** A view of `client` whose changes can be awaited one after the other. */
function viewOf(client: ManagerClient) {
  let wake = Promise.withResolvers<void>();
  const changes = {
    get next() {
      return wake.promise;
    },
  };
  const view = new RemoteView(client, "n1", () => {
    wake.resolve();
    wake = Promise.withResolvers<void>();
  }, createLogger("error"));
  return { view, changes };
}

/** What a test sees of an agent's view of the manager at `url` (viewFollowing). */
interface Following {
  admin: ManagerClient;
  client: CountingClient;
  view: RemoteView;
  changes: { next: Promise<void> };
}

/**
 * An agent's view of the manager at `url`, started once the world is made and followed until two
 * ports reached it; then `more` (its checks), then stopped.
 */
async function viewFollowing(url: string, more: (f: Following) => Promise<void> | void) {
  const admin = new ManagerClient(url, ADMIN);
  const client = new CountingClient(url, N1);
  const { view, changes } = viewOf(client);
  try {
    await world(admin);
    await view.start();
    await portsReach(admin, view, changes);
    await more({ admin, client, view, changes });
  } finally {
    await view.stop();
    client.close();
    admin.close();
  }
}

Deno.test("agent view follows the manager's feed over a WebSocket on its API port: a manager straight on Deno.serve", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-e2e-" });
  const m = await directManager(dir);
  try {
    await viewFollowing(m.url, ({ client, view }) => {
      assert.equal(client.sockets, 1, "one socket carried every page");
      assert.equal(client.streams, 0);
      assert.equal(view.nodeIp("n2"), "192.0.2.2");
    });
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agent view of a manager older than sockets: its refusal of the handshake turns the view to the NDJSON stream", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-e2e-" });
  const m = await directManager(dir);
  const older = olderManager(m.url);
  try {
    await viewFollowing(`http://127.0.0.1:${older.addr.port}`, ({ client }) => {
      assert.equal(client.sockets, 1, "the socket was refused once");
      assert.equal(client.streams, 1, "then one stream carried every page");
    });
  } finally {
    await older.shutdown();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

/** A port free now on loopback. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = l.addr as Deno.NetAddr;
  l.close();
  return port;
}

/**
 * A manager behind its connection guard (the default) on `port`, with the feed's socket listener
 * on `feedSocketPort` (manager/feed_listener.ts) unless it is 0.
 */
function guardedManager(dir: string, port: number, feedSocketPort: number) {
  return managerIn(dir, { listen: { port, feedSocketPort } });
}

Deno.test("agent view of a guarded manager follows on its feed socket port, and again after the manager restarts mid-follow", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-e2e-" });
  const [port, feedSocketPort] = [freePort(), freePort()];
  let m = await guardedManager(dir, port, feedSocketPort);
  try {
    await viewFollowing(m.url, async ({ admin, client, view, changes }) => {
      assert.equal(client.sockets, 1, "one socket on the feed socket port carried every page");
      assert.equal(client.streams, 0);
      await m.shutdown();
      m = await guardedManager(dir, port, feedSocketPort);
      const made = await admin.request<{ id: string }>(
        "PUT",
        "/api/v1/tenants/acme/networks/blue/ports/p3",
        { node: "n2" },
      );
      // The view reconnects (the restart expired its cursor: it lists again) and sees the new
      // port, by its list or its feed (a list tells no change: looked at every 50 ms too).
      while (![...view.ports()].some((p) => p.id === made.id)) {
        await Promise.race([changes.next, new Promise((r) => setTimeout(r, 50))]);
      }
      assert.ok(client.sockets >= 2, "followed by socket again");
      // The socket said the cursor expired: no stream was asked to learn it.
      assert.equal(client.streams, 0);
    });
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agent view of a guarded manager without a feed socket port: the NDJSON stream", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-e2e-" });
  const m = await guardedManager(dir, 0, 0);
  try {
    await viewFollowing(m.url, ({ client }) => {
      assert.equal(client.sockets, 1, "the socket was refused once (no port, the API's refuses)");
      assert.equal(client.streams, 1, "then one stream carried every page");
    });
  } finally {
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

/** The monitor's port index of a guarded manager, followed until two ports reached it. */
async function indexFollowing(feedSocketPort: number): Promise<CountingClient> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-socket-e2e-" });
  const m = await guardedManager(dir, 0, feedSocketPort);
  const admin = new ManagerClient(m.url, ADMIN);
  // The monitor's token, as the deploy manifests give it (an admin's).
  const client = new CountingClient(m.url, ADMIN);
  const heard = new Set<string>();
  let wake = () => {};
  const index = new PortIndex(
    client,
    (p) => {
      heard.add(p.id);
      wake();
    },
    createLogger("error"),
    { waitSeconds: 1, hangMs: 5000 },
  );
  try {
    await world(admin);
    index.start();
    await index.whenReady();
    for (const name of ["p1", "p2"]) {
      const made = await admin.request<{ id: string }>(
        "PUT",
        `/api/v1/tenants/acme/networks/blue/ports/${name}`,
        { node: "n2" },
      );
      while (!heard.has(made.id)) await new Promise<void>((r) => (wake = r));
    }
    return client;
  } finally {
    await index.stop();
    admin.close();
    client.close();
    await m.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("monitor port index follows a guarded manager's feed on its feed socket port, no long polls", async () => {
  const client = await indexFollowing(freePort());
  assert.equal(client.sockets, 1, "one socket carried every page");
  assert.equal(client.streams, 0);
  assert.equal(client.polls, 0);
});

Deno.test("monitor port index of a guarded manager without a feed socket port: the NDJSON stream, no long polls", async () => {
  const client = await indexFollowing(0);
  assert.equal(client.sockets, 1, "the socket was refused once");
  assert.equal(client.streams, 1, "then one stream carried every page");
  assert.equal(client.polls, 0);
});
