/**
 * The agent's capture route in-process (app.request) against a real manager on loopback and the
 * agent's state in memory: what it refuses before any tcpdump runs, each with a message that says
 * why (no token, a malformed request, another tenant's token, a port of another node, a port this
 * agent holds no veth of, an external data plane's port, another tenant's mirror, a mirror this
 * node sends no copies of, the manager away).
 */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { createLogger, ManagerClient, type Port } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { AgentState } from "../agent/state.ts";
import { mountCaptureRoutes } from "../agent/server/capture_routes.ts";
import { startLoopbackManager } from "./support/loopback_manager.ts";

const TOKENS = {
  admin: `admin-${crypto.randomUUID()}`,
  acme: `acme-${crypto.randomUUID()}`,
  globex: `globex-${crypto.randomUUID()}`,
  n1: `n1-${crypto.randomUUID()}`,
  n2: `n2-${crypto.randomUUID()}`,
};

/** The manager with acme/data, ports bound to n1 and n2, and n1's agent holding two of them. */
async function setUp(cleanup: Cleanup): Promise<{ app: Hono; ports: Record<string, Port> }> {
  const manager = await startLoopbackManager(cleanup, [
    { token: TOKENS.admin, scope: "admin" },
    { token: TOKENS.acme, scope: "tenant", tenant: "acme" },
    { token: TOKENS.globex, scope: "tenant", tenant: "globex" },
    { token: TOKENS.n1, scope: "node", node: "n1" },
    { token: TOKENS.n2, scope: "node", node: "n2" },
  ]);
  const client = (token: string) => {
    const c = new ManagerClient(manager.url, token);
    cleanup.defer(() => Promise.resolve(c.close()));
    return c;
  };
  const admin = client(TOKENS.admin);
  for (const name of ["acme", "globex"]) await admin.request("POST", "/api/v1/tenants", { name });
  await admin.request("POST", "/api/v1/tenants/acme/networks", {
    name: "data",
    cidr: "10.70.0.0/24",
    gateway: "10.70.0.1",
  });
  // A public network of acme's, where globex has a port of the same ID as acme's (IDs are per tenant).
  await admin.request("POST", "/api/v1/tenants/acme/networks", {
    name: "pub",
    cidr: "10.71.0.0/24",
    gateway: "10.71.0.1",
    public: true,
  });
  const ports: Record<string, Port> = {};
  for (const [id, node] of [["here", "n1"], ["ext", "n1"], ["gone", "n1"], ["there", "n2"]]) {
    const c = client(node === "n1" ? TOKENS.n1 : TOKENS.n2);
    await c.registerNode(node, node === "n1" ? "192.0.2.1" : "192.0.2.2");
    ports[id] = await c.putPort("acme", "data", id, { node });
  }
  // A mirror to a remote collector whose only source is on n2: n1 sends none of its copies.
  await admin.request("POST", "/api/v1/tenants/acme/mirrors", {
    name: "far",
    sources: [{ network: "data", port: "there" }],
    collector: { remote: { ip: "192.0.2.250", protocol: "vxlan", vni: 9 } },
  });
  // And one with a source here: its tunnel may carry another tenant's copies to the same address.
  await admin.request("POST", "/api/v1/tenants/acme/mirrors", {
    name: "near",
    sources: [{ network: "data", port: "here" }],
    collector: { remote: { ip: "192.0.2.250", protocol: "vxlan", vni: 9 } },
  });
  const n1 = client(TOKENS.n1);
  for (const tenant of ["acme", "globex"]) {
    ports[`${tenant}-shared`] = await n1.putPort(tenant, "pub", "shared", { node: "n1" });
  }
  const state = await AgentState.open(":memory:");
  cleanup.defer(() => Promise.resolve(state.close()));
  for (const [id, hostIfName] of [["here", "knhere"], ["ext", ""]]) {
    await state.putAttachment({
      containerId: `c-${id}`,
      ifName: "eth0",
      netns: `/var/run/netns/${id}`,
      tenant: "acme",
      status: "ready",
      createdAt: new Date().toISOString(),
      interfaces: [{
        ifName: "eth0",
        hostIfName,
        portId: id,
        tenant: "acme",
        network: "data",
        port: ports[id],
        cookie: 1,
        defaultRoute: true,
      }],
    });
  }
  // Only acme's port of the two on the public network is on this node.
  await state.putAttachment({
    containerId: "c-acme-shared",
    ifName: "eth0",
    netns: "/var/run/netns/acme-shared",
    tenant: "acme",
    status: "ready",
    createdAt: new Date().toISOString(),
    interfaces: [{
      ifName: "eth0",
      hostIfName: "knshared",
      portId: "shared",
      tenant: "acme",
      network: "pub",
      port: ports["acme-shared"],
      cookie: 2,
      defaultRoute: true,
    }],
  });
  const app = new Hono();
  mountCaptureRoutes(app, {
    nodeName: "n1",
    state,
    managerAs: (token) => new ManagerClient(manager.url, token),
    log: createLogger("agent", "error"),
  });
  return { app, ports };
}

async function ask(
  app: Hono,
  body: unknown,
  token?: string,
): Promise<{ status: number; message: string }> {
  const res = await app.request("/v1/capture", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const answer = await res.json();
  return { status: res.status, message: answer.error?.message ?? JSON.stringify(answer) };
}

const port = (id: string) => ({ tenant: "acme", network: "data", port: id });

Deno.test("capture route: every refusal before tcpdump says why, with the status that fits", async () => {
  await using cleanup = new Cleanup();
  const { app } = await setUp(cleanup);
  const cases: [string, unknown, string | undefined, number, RegExp][] = [
    ["no token", port("here"), undefined, 401, /needs the caller's manager token/],
    ["not JSON", "{", TOKENS.acme, 400, /The body is not JSON/],
    ["no port", { tenant: "acme", network: "data" }, TOKENS.acme, 400, /capture request: port:/],
    ["0 packets", { ...port("here"), packets: 0 }, TOKENS.acme, 400, /packets:/],
    ["10001 packets", { ...port("here"), packets: 10_001 }, TOKENS.acme, 400, /packets:/],
    ["301 seconds", { ...port("here"), seconds: 301 }, TOKENS.acme, 400, /seconds:/],
    [
      "a 1025-byte filter",
      { ...port("here"), filter: "x".repeat(1025) },
      TOKENS.acme,
      400,
      /filter:/,
    ],
    [
      "a newline in the filter",
      { ...port("here"), filter: "tcp\nudp" },
      TOKENS.acme,
      400,
      /no control characters/,
    ],
    ["an unknown field", { ...port("here"), snaplen: 1 }, TOKENS.acme, 400, /Unrecognized key/],
    [
      "another tenant's token",
      port("here"),
      TOKENS.globex,
      403,
      /refused: the manager does not show this port to your token \((403|404)/,
    ],
    [
      "a port the manager does not have",
      port("nope"),
      TOKENS.acme,
      403,
      /does not show this port to your token \(404/,
    ],
    [
      "a port of another node",
      port("there"),
      TOKENS.acme,
      403,
      /bound to node n2, not to n1; run knitctl capture against that node's agent/,
    ],
    [
      "a port without an interface here",
      port("gone"),
      TOKENS.admin,
      403,
      /no interface of this node's agent holds it/,
    ],
    [
      "an external data plane's port",
      port("ext"),
      TOKENS.acme,
      400,
      /external data plane .* capture inside the pod instead/,
    ],
    [
      "a port and a mirror",
      { ...port("here"), mirror: "far" },
      TOKENS.acme,
      400,
      /capture request: port: name a port .* or a mirror \(mirror alone\)/,
    ],
    [
      "a mirror with a direction",
      { tenant: "acme", mirror: "far", direction: "in" },
      TOKENS.acme,
      400,
      /or a mirror \(mirror alone\)/,
    ],
    [
      "another tenant's token, a mirror",
      { tenant: "acme", mirror: "far" },
      TOKENS.globex,
      403,
      /Capture of mirror acme\/far refused: the manager does not show this mirror to your token/,
    ],
    [
      "a mirror the manager does not have",
      { tenant: "acme", mirror: "nope" },
      TOKENS.acme,
      403,
      /does not show this mirror to your token \(404/,
    ],
    [
      "a remote mirror with no source here",
      { tenant: "acme", mirror: "far" },
      TOKENS.acme,
      403,
      /no source port of it is on n1, so this node sends it no copies/,
    ],
    [
      "attack: a tenant's token, its remote mirror's tunnel (shared with other tenants' copies)",
      { tenant: "acme", mirror: "near", seconds: 1 },
      TOKENS.acme,
      403,
      /Capture of mirror acme\/near refused: .*remote collector.* an admin token/,
    ],
  ];
  for (const [what, body, token, status, message] of cases) {
    const r = await ask(app, body, token);
    assert.equal(r.status, status, `${what}: ${r.message}`);
    assert.match(r.message, message, what);
  }
});

Deno.test("capture route, attack: globex's own port of an ID is not acme's port of that ID on a public network", async () => {
  await using cleanup = new Cleanup();
  const { app, ports } = await setUp(cleanup);
  assert.equal(ports["globex-shared"].tenant, "globex");
  // The manager answers globex's token with globex's own port "shared"; the agent holds acme's.
  const r = await ask(app, { tenant: "acme", network: "pub", port: "shared" }, TOKENS.globex);
  assert.equal(r.status, 403, r.message);
  assert.match(r.message, /no interface of this node's agent holds it/);
});

Deno.test("capture route: the manager away is a 503 that says so", async () => {
  const state = await AgentState.open(":memory:");
  const app = new Hono();
  mountCaptureRoutes(app, {
    nodeName: "n1",
    state,
    // A port nobody listens on: the call is refused at connect.
    managerAs: (token) => new ManagerClient("http://127.0.0.1:1", token),
    log: createLogger("agent", "error"),
  });
  const r = await ask(app, port("here"), TOKENS.acme);
  state.close();
  assert.equal(r.status, 503);
  assert.match(r.message, /Cannot capture: The manager at .* is not reachable/);
});
