/**
 * The trace and verify routes in-process (app.request), with the agent's state in memory and the
 * switch faked: malformed requests and unknown ports are 400s that say what is wrong, verify
 * compares the bridge's ports with the state.
 */
import assert from "node:assert/strict";
import { Hono } from "hono";
import type { Port } from "@knitter/common";
import { MALFORMED_IPS, MALFORMED_MACS } from "../../common/address_cases.ts";
import type { RemoteView } from "../dataplane/remote.ts";
import { AgentState, type AttachedInterface, type Attachment } from "../state.ts";
import { mountTraceRoutes } from "./trace_routes.ts";

/** `traced`: the flows the switch was asked to trace (it has none to answer with). */
async function app(traced: string[] = []): Promise<{ app: Hono; state: AgentState }> {
  const state = await AgentState.open(":memory:");
  await state.putAttachment({
    containerId: "c1",
    ifName: "eth0",
    netns: "/var/run/netns/x",
    tenant: "acme",
    status: "ready",
    createdAt: new Date().toISOString(),
    interfaces: [{
      ifName: "eth0",
      hostIfName: "kn1",
      portId: "p1",
      tenant: "acme",
      network: "blue",
      port: { networkId: "nb", ip: "10.0.0.2", mac: "02:00:00:00:00:02" } as Port,
      ofport: 1000,
      cookie: 1,
      defaultRoute: true,
    }, {
      ifName: "net1",
      hostIfName: "kn2",
      portId: "p2",
      tenant: "acme",
      network: "blue",
      ofport: 1001,
      cookie: 2,
      defaultRoute: false,
    }],
  });
  const a = new Hono();
  mountTraceRoutes(a, {
    nodeName: "n1",
    bridge: "br-int",
    tunnelOfport: 100,
    state,
    remote: {
      ports: () => [],
      port: () => undefined,
      nodeIp: () => undefined,
    } as unknown as RemoteView,
    physnetPort: () => undefined,
    preparedPorts: () => ["vxlan0"],
    ofprotoTrace: (_bridge: string, flow: string) => {
      traced.push(flow);
      return Promise.reject(new Error("no switch here"));
    },
    listPorts: () =>
      Promise.resolve([
        { name: "vxlan0", ofport: 100, externalIds: {} },
        { name: "kn1", ofport: 1000, externalIds: {} },
        { name: "stray", ofport: 7, externalIds: {} },
      ]),
    flowDiff: () =>
      Promise.resolve({ bridge: "br-int", computed: 9, installed: 9, missing: [], extra: [] }),
  });
  return { app: a, state };
}

/** A ready attachment of one interface, in its own netns. */
function oneInterface(containerId: string, i: AttachedInterface): Attachment {
  return {
    containerId,
    ifName: i.ifName,
    netns: `/var/run/netns/${containerId}`,
    tenant: i.tenant,
    status: "ready",
    createdAt: new Date().toISOString(),
    interfaces: [i],
  };
}

const packet = {
  proto: "icmp",
  dlSrc: "02:00:00:00:00:02",
  dlDst: "02:00:00:00:00:03",
  ipSrc: "10.0.0.2",
  ipDst: "10.0.0.3",
};

async function post(a: Hono, body: string) {
  const r = await a.request("/v1/trace", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  return { status: r.status, body: await r.json() };
}

Deno.test("POST /v1/trace refuses what it cannot trace, saying why", async () => {
  const { app: a, state } = await app();
  try {
    const notJson = await post(a, "{");
    assert.equal(notJson.status, 400);
    assert.equal(notJson.body.error.message, "The body is not JSON");
    const badMac = await post(
      a,
      JSON.stringify({ from: { kind: "port", portId: "p1" }, packet: { ...packet, dlSrc: "x" } }),
    );
    assert.equal(badMac.status, 400);
    assert.match(badMac.body.error.message, /^Malformed trace request: packet\.dlSrc: /);
    const unknown = await post(
      a,
      JSON.stringify({ from: { kind: "port", portId: "nope" }, packet }),
    );
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.error.message, /Port "nope" is not plugged on node n1/);
    const physnet = await post(
      a,
      JSON.stringify({ from: { kind: "physnet", physnet: "phys9" }, packet }),
    );
    assert.equal(physnet.status, 400);
    assert.match(physnet.body.error.message, /has no bridge for physnet "phys9"/);
  } finally {
    state.close();
  }
});

Deno.test("POST /v1/trace refuses every malformed MAC and IPv4 address of the shared table", async () => {
  const { app: a, state } = await app();
  try {
    const cases = [
      ...MALFORMED_MACS.map((v) => ["dlSrc", v]),
      ...[...MALFORMED_IPS, "fd00::1"].map((v) => ["ipDst", v]),
    ];
    for (const [field, value] of cases) {
      const r = await post(
        a,
        JSON.stringify({
          from: { kind: "port", portId: "p1" },
          packet: { ...packet, [field]: value },
        }),
      );
      assert.equal(r.status, 400, `${field} ${JSON.stringify(value)}`);
      assert.match(
        r.body.error.message,
        new RegExp(`^Malformed trace request: packet\\.${field}: `),
      );
    }
  } finally {
    state.close();
  }
});

Deno.test("GET /v1/verify: state ports missing from the bridge, bridge ports not in the state", async () => {
  const { app: a, state } = await app();
  try {
    const r = await a.request("/v1/verify");
    assert.equal(r.status, 200);
    const v = await r.json();
    assert.deepEqual(v.missingPorts, [{ hostIfName: "kn2", portId: "p2", ofport: 1001 }]);
    assert.deepEqual(v.extraPorts, [{ name: "stray", ofport: 7 }]);
    assert.deepEqual(v.state.map((s: { portId: string }) => s.portId), ["p1", "p2"]);
    assert.equal(v.flows.computed, 9);
  } finally {
    state.close();
  }
});

Deno.test("an IPAM port (another plugin's interface): verify lists it as external, not missing; trace says why it has nothing to trace", async () => {
  const { app: a, state } = await app();
  try {
    await state.putAttachment({
      ...oneInterface("c2", {
        ifName: "net1",
        hostIfName: "",
        portId: "m1",
        tenant: "acme",
        network: "data",
        port: { networkId: "nd", ip: "10.9.0.2", mac: "02:00:00:00:09:02" } as Port,
        cookie: 0,
        defaultRoute: false,
      }),
      ipam: { cniNetwork: "data" },
    });
    const v = await (await a.request("/v1/verify")).json();
    assert.deepEqual(v.missingPorts.map((p: { portId: string }) => p.portId), ["p2"]);
    const m1 = v.state.find((s: { portId: string }) => s.portId === "m1");
    assert.equal(m1.dataPlane, "external");
    const traced = await post(a, JSON.stringify({ from: { kind: "port", portId: "m1" }, packet }));
    assert.equal(traced.status, 400);
    assert.match(
      traced.body.error.message,
      /Port "m1" is another plugin's interface \(knitter is its IPAM\).*no Open vSwitch flows/,
    );
  } finally {
    state.close();
  }
});

Deno.test("POST /v1/trace from a port ID two tenants have here: refused unless the tenant is named, then that tenant's port", async () => {
  const traced: string[] = [];
  const { app: a, state } = await app(traced);
  try {
    // globex's "p1" on a public network: port IDs are per tenant.
    await state.putAttachment(oneInterface("c3", {
      ifName: "eth0",
      hostIfName: "kn3",
      portId: "p1",
      tenant: "globex",
      network: "blue",
      port: { networkId: "nb", ip: "10.0.0.4", mac: "02:00:00:00:00:04" } as Port,
      ofport: 1002,
      cookie: 3,
      defaultRoute: true,
    }));
    const either = await post(a, JSON.stringify({ from: { kind: "port", portId: "p1" }, packet }));
    assert.equal(either.status, 400);
    assert.match(
      either.body.error.message,
      /Port "p1" on node n1 is one of tenants acme, globex: name the tenant/,
    );
    assert.deepEqual(traced, [], "nothing traced");
    const theirs = await post(
      a,
      JSON.stringify({ from: { kind: "port", portId: "p1", tenant: "globex" }, packet }),
    );
    assert.equal(theirs.status, 500, "the switch here cannot answer");
    assert.equal(traced.length, 1);
    assert.match(traced[0], /in_port=1002,/, "globex's port, not acme's");
    const none = await post(
      a,
      JSON.stringify({ from: { kind: "port", portId: "p1", tenant: "initech" }, packet }),
    );
    assert.equal(none.status, 400);
    assert.match(none.body.error.message, /Port "p1" of tenant initech is not plugged on node n1/);
  } finally {
    state.close();
  }
});
