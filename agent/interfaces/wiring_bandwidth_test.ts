/**
 * Bandwidth limits in the wiring (wiring.ts): applied as a step of its own once the veths are made
 * (alongside their switch ports), noted in the undo journal, undone on a failure at that step or
 * any later one, and by unwire (DEL: with the veth); which source wins per direction (limitsOf).
 * In-memory fakes (seams_fake.ts).
 */
import assert from "node:assert/strict";
import { createLogger, defaultBurst, type Port } from "@knitter/common";
import { FakeWorld } from "./seams_fake.ts";
import type { Attachment } from "../state.ts";
import {
  externalIds,
  limitsOf,
  type PortedInterface,
  UndoJournal,
  type WireRequest,
  Wiring,
} from "./wiring.ts";

const NETNS = "/var/run/netns/pod";

function setup(): { world: FakeWorld; wiring: Wiring } {
  const world = new FakeWorld();
  const wiring = new Wiring({
    nodeName: "n1",
    log: createLogger("test", "error"),
    ...world.seams(),
  });
  return { world, wiring };
}

/** Two interfaces; the first with runtimeConfig.bandwidth, as pod_request.ts gives it. */
function attachment(): Attachment {
  return {
    containerId: "c1",
    ifName: "eth0",
    netns: NETNS,
    tenant: "t",
    status: "adding",
    interfaces: ["eth0", "net1"].map((ifName, k) => ({
      ifName,
      hostIfName: `knhost${k}`,
      portId: `uid-c1-${ifName}`,
      tenant: "t",
      network: `net${k}`,
      cookie: k + 1,
      defaultRoute: k === 0,
      ...(k === 0 ? { bandwidth: { ingressRate: 20_000_000, egressRate: 10_000_000 } } : {}),
    })),
    createdAt: "2026-11-25T00:00:00.000Z",
  };
}

const request: WireRequest = {
  what: "ADD",
  portRequest: (i) => ({ node: "n1", interface: i.ifName }),
  shape: (i) => ({ mtu: i.port.mtu, routes: [] }),
  externalIds,
};

function undone(calls: string[]): string[] {
  return calls.filter((c) =>
    /^(shaper\.clear|links\.remove|switch\.remove|manager\.deletePort|state\.delete)/.test(c)
  );
}

Deno.test("wire limits the veth of an interface with limits, the others not; unwire takes them away first", async () => {
  const { world, wiring } = setup();
  const before = world.snapshot();
  await wiring.wire(attachment(), request);
  const expected = {
    ingress: { rate: 20_000_000, burst: defaultBurst(20_000_000), from: "runtimeConfig.bandwidth" },
    egress: { rate: 10_000_000, burst: defaultBurst(10_000_000), from: "runtimeConfig.bandwidth" },
  };
  assert.deepEqual(Object.fromEntries(world.limits), { knhost0: expected });
  const stored = (await world.state.getAttachment("c1", "eth0"))!;
  assert.deepEqual(stored.interfaces[0].limits, expected, "the record says what DEL undoes");
  assert.equal(stored.interfaces[1].limits, undefined);
  assert.ok(
    world.calls.indexOf("shaper.apply knhost0") > world.calls.indexOf("links.create knhost1"),
    "limited once the veths are made (alongside their switch ports)",
  );

  world.calls.length = 0;
  await wiring.unwire(stored, "DEL");
  assert.ok(!world.calls.includes("shaper.clear knhost0"), "deleting the veth takes its limits");
  assert.deepEqual(world.snapshot(), before);
});

for (const [step, nth] of [["shaper.apply", 1], ["switch.add", 1], ["state.put", 2]] as const) {
  Deno.test(`wire fails at ${step} #${nth}: the limits made (a host end's, of a half-done apply) go with everything else`, async () => {
    const { world, wiring } = setup();
    const before = world.snapshot();
    world.failAt(step, nth);
    await assert.rejects(wiring.wire(attachment(), request), /injected failure/);
    assert.deepEqual(undone(world.calls), [
      "switch.remove knhost0,knhost1",
      "links.remove knhost0",
      "links.remove knhost1",
      "manager.deletePort uid-c1-eth0",
      "manager.deletePort uid-c1-net1",
      "state.delete c1/eth0",
    ]);
    assert.deepEqual(world.snapshot(), before, "nothing made is left");
  });
}

Deno.test("wire fails before the limits: nothing to clear", async () => {
  const { world, wiring } = setup();
  world.failAt("links.create", 2);
  await assert.rejects(wiring.wire(attachment(), request));
  assert.ok(!world.calls.some((c) => c.startsWith("shaper.")), world.calls.join("\n"));
  assert.equal(world.limits.size, 0);
});

Deno.test("undoing limits on a veth that stays takes them away on their own", async () => {
  const { world, wiring } = setup();
  const a = attachment();
  await wiring.wire(a, request);
  const made = new UndoJournal();
  made.shaped.add("knhost0");
  world.calls.length = 0;
  await wiring.unwire(structuredClone(a), "test", { made });
  assert.deepEqual(world.calls, ["shaper.clear knhost0"]);
  assert.equal(world.limits.size, 0);
  assert.ok(world.hostEnds.has("knhost0"), "the veth stays");
});

Deno.test("limitsOf: the port's own limit, else runtimeConfig's, else the network's, per direction", () => {
  const port = { network: "data" } as Port;
  const i = (p: Partial<Port>, bandwidth?: PortedInterface["bandwidth"]) =>
    ({ port: { ...port, ...p }, ...(bandwidth ? { bandwidth } : {}) }) as PortedInterface;
  assert.equal(limitsOf(i({})), undefined, "nothing limits it");
  assert.deepEqual(
    limitsOf(i({ networkBandwidth: { ingressRate: 100_000_000, egressRate: 50_000_000 } }, {
      egressRate: 10_000_000,
      egressBurst: 400_000,
    })),
    {
      ingress: { rate: 100_000_000, burst: defaultBurst(100_000_000), from: 'network "data"' },
      egress: { rate: 10_000_000, burst: 400_000, from: "runtimeConfig.bandwidth" },
    },
  );
  assert.deepEqual(
    limitsOf(i({ bandwidth: { egressRate: 5_000_000 }, networkBandwidth: { egressRate: 1e8 } }, {
      egressRate: 10_000_000,
    })),
    { egress: { rate: 5_000_000, burst: defaultBurst(5_000_000), from: "the port" } },
  );
});
