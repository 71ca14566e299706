import assert from "node:assert/strict";
import {
  createLogger,
  type FeedEvent,
  type ManagerClient,
  ManagerError,
  type MirrorInfo,
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
) {
  let given = false;
  return {
    listPorts: () => Promise.resolve([]),
    listNodes: () => Promise.resolve([]),
    listRouters: routers,
    listSecurityGroups: () => Promise.resolve([]),
    listMirrors: mirrors,
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
