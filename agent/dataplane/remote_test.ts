import assert from "node:assert/strict";
import {
  createLogger,
  type FeedEvent,
  type ManagerClient,
  ManagerError,
  type MirrorInfo,
  type Port,
  type RouterInfo,
} from "@knitter/common";
import { RemoteView } from "./remote.ts";

const router: RouterInfo = {
  name: "r",
  tenant: "acme",
  networks: [{ name: "red", id: "nr", cidr: "10.1.0.0/24", gateway: "10.1.0.1" }],
  routes: [],
  createdAt: "2026-01-01T00:00:00Z",
};

/** A manager that answers lists and then holds the feed until the view stops. */
function manager(
  routers: () => Promise<RouterInfo[]>,
  events: FeedEvent[] = [],
  mirrors: () => Promise<MirrorInfo[]> = () => Promise.resolve([]),
  ports: Port[] = [],
) {
  let given = false;
  return {
    listPorts: () => Promise.resolve(ports),
    listNodes: () => Promise.resolve([]),
    listRouters: routers,
    listSecurityGroups: () => Promise.resolve([]),
    listMirrors: mirrors,
    listServices: () => Promise.resolve([]),
    feedCursor: () => Promise.resolve("e:0"),
    feedSince: (_c: string, _t: number, signal?: AbortSignal) => {
      if (!given) {
        given = true;
        return Promise.resolve({ cursor: "e:1", events });
      }
      return new Promise((resolve) =>
        signal?.addEventListener("abort", () => resolve({ cursor: "e:1", events: [] }))
      );
    },
  } as unknown as ManagerClient;
}

Deno.test("remote view: routers listed, then followed on the feed; a router change asks for a flow sync", async () => {
  const deleted: FeedEvent = { seq: 1, type: "router", op: "delete", router };
  const seen: number[] = [];
  // The list asks for a sync with the router; the feed's delete asks again, without it.
  const twice = Promise.withResolvers<void>();
  const view: RemoteView = new RemoteView(
    manager(() => Promise.resolve([router]), [deleted]),
    "n1",
    () => {
      seen.push([...view.routers()].length);
      if (seen.length === 2) twice.resolve();
    },
    createLogger("test", "error"),
  );
  await view.start();
  await twice.promise;
  await view.stop();
  assert.deepEqual(seen, [1, 0]);
});

Deno.test("remote view: a manager without routers (404, older than them) lists none instead of failing", async () => {
  const view = new RemoteView(
    manager(() => Promise.reject(new ManagerError(404, "not_found", "no such route"))),
    "n1",
    () => {},
    createLogger("test", "error"),
  );
  await view.start();
  await view.stop();
  assert.deepEqual([...view.routers()], []);
});

Deno.test("remote view: mirrors listed, then followed on the feed; a mirror change asks for a flow sync", async () => {
  const port = { network: "red", networkId: "nr", id: "p" };
  const m: MirrorInfo = {
    name: "m",
    tenant: "acme",
    sources: [port],
    direction: "both",
    collector: { ...port, id: "tap" },
    createdAt: "2026-01-01T00:00:00Z",
  };
  const seen: string[][] = [];
  const twice = Promise.withResolvers<void>();
  const view: RemoteView = new RemoteView(
    manager(
      () => Promise.resolve([]),
      [{ seq: 1, type: "mirror", op: "delete", mirror: m }],
      () => Promise.resolve([m]),
    ),
    "n1",
    () => {
      seen.push([...view.mirrors()].map((x) => x.name));
      if (seen.length === 2) twice.resolve();
    },
    createLogger("test", "error"),
  );
  await view.start();
  await twice.promise;
  await view.stop();
  assert.deepEqual(seen, [["m"], []]);
});

/** A port of tenant `tenant` on acme's public network "shared" (ID "ns"). */
function sharedPort(tenant: string, id: string, ip: string, node: string): Port {
  return {
    id,
    tenant,
    network: "shared",
    networkTenant: "acme",
    networkId: "ns",
    ip,
    address: `${ip}/24`,
    mac: `02:00:0a:02:00:${ip.split(".")[3].padStart(2, "0")}`,
    node,
  } as Port;
}

Deno.test("remote view: two tenants' ports with the same ID on a public network are both seen, each with its own address; deleting one keeps the other", async () => {
  // Port IDs are per tenant: acme's "web" and globex's "web" on acme's public network are two ports.
  const acme = sharedPort("acme", "web", "10.2.0.5", "n2");
  const globex = sharedPort("globex", "web", "10.2.0.6", "n3");
  const seen: string[][] = [];
  const twice = Promise.withResolvers<void>();
  const view: RemoteView = new RemoteView(
    manager(
      () => Promise.resolve([]),
      [{ seq: 1, type: "port", op: "delete", port: acme }],
      () => Promise.resolve([]),
      [acme, globex],
    ),
    "n1",
    () => {
      const listed = [...view.ports()].map((p) => `${p.tenant}:${p.ip}`).sort();
      const found = [acme, globex].map((p) => view.port(p)?.ip ?? "none");
      seen.push([...listed, ...found]);
      if (seen.length === 2) twice.resolve();
    },
    createLogger("test", "error"),
  );
  await view.start();
  await twice.promise;
  await view.stop();
  assert.deepEqual(seen, [
    ["acme:10.2.0.5", "globex:10.2.0.6", "10.2.0.5", "10.2.0.6"],
    ["globex:10.2.0.6", "none", "10.2.0.6"],
  ]);
});
