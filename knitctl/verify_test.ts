import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import type { AgentVerifyView } from "./agent_client.ts";
import { compare } from "./verify.ts";

function port(id: string, network: string): Port {
  return { id, network, tenant: "acme", ip: "10.0.0.9", node: "n1" } as Port;
}

function agent(over: Partial<AgentVerifyView> = {}): AgentVerifyView {
  return {
    node: "n1",
    bridge: "br-int",
    flows: { bridge: "br-int", computed: 3, installed: 3, missing: [], extra: [] },
    missingPorts: [],
    extraPorts: [],
    state: [
      {
        portId: "p1",
        tenant: "acme",
        network: "blue",
        containerId: "c1",
        ifName: "eth0",
        hostIfName: "kn1",
        ofport: 1000,
      },
    ],
    ...over,
  };
}

Deno.test("verify: a node whose agent and manager agree has no differences", () => {
  const r = compare(agent(), [port("p1", "blue")]);
  assert.equal(r.differences, 0);
  assert.deepEqual(r.manager, { stateOnly: [], managerOnly: [] });
});

Deno.test("verify: every kind of difference is listed and counted", () => {
  const r = compare(
    agent({
      flows: { bridge: "br-int", computed: 3, installed: 3, missing: ["a"], extra: ["b"] },
      missingPorts: [{ hostIfName: "kn1", portId: "p1", ofport: 1000 }],
      extraPorts: [{ name: "stray", ofport: 7 }],
    }),
    // p1 is on another network at the manager (so not this state entry); p2 has no state.
    [port("p1", "red"), port("p2", "blue")],
  );
  assert.deepEqual(r.flows.missing, ["a"]);
  assert.deepEqual(r.flows.extra, ["b"]);
  assert.deepEqual(r.manager.stateOnly, [
    { portId: "p1", tenant: "acme", network: "blue", hostIfName: "kn1" },
  ]);
  assert.deepEqual(r.manager.managerOnly.map((p) => `${p.network}/${p.id}`), [
    "red/p1",
    "blue/p2",
  ]);
  assert.equal(r.differences, 2 + 1 + 1 + 1 + 2);
});
