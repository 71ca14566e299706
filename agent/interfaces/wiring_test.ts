import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { type FakeStep, FakeWorld, type PortFailure } from "./seams_fake.ts";
import type { Attachment } from "../state.ts";
import { externalIds, PhysnetNotMappedError, type WireRequest, Wiring } from "./wiring.ts";

const NETNS = "/var/run/netns/pod";

function setup(): { world: FakeWorld; wiring: Wiring } {
  const world = new FakeWorld();
  const log = createLogger("wiring test", "error");
  const wiring = new Wiring({ nodeName: "n1", log, ...world.seams() });
  return { world, wiring };
}

/** A pod's attachment of two interfaces, as a CNI ADD asks for it. */
function attachment(portIds = ["uid-c1-eth0", "uid-c1-net1"]): Attachment {
  const ifNames = ["eth0", "net1"];
  return {
    containerId: "c1",
    ifName: "eth0",
    netns: NETNS,
    tenant: "t",
    pod: { namespace: "t", name: "p" },
    status: "adding",
    interfaces: portIds.map((portId, k) => ({
      ifName: ifNames[k],
      hostIfName: `knhost${k}`,
      portId,
      tenant: "t",
      network: `net${k}`,
      cookie: k + 1,
      defaultRoute: k === 0,
    })),
    createdAt: "2026-11-25T00:00:00.000Z",
  };
}

function request(extra: Partial<WireRequest> = {}): WireRequest {
  return {
    what: "ADD",
    portRequest: (i) => ({ node: "n1", pod: { namespace: "t", name: "p" }, interface: i.ifName }),
    shape: (i) => ({ mtu: i.port.mtu, routes: [] }),
    externalIds,
    ...extra,
  };
}

/** The undo calls among `calls`: what a rollback touched. */
function undone(calls: string[]): string[] {
  return calls.filter((c) =>
    /^(links\.remove|switch\.remove|bridges\.delPorts|manager\.(deletePort|unbindPort)|state\.delete)/
      .test(c)
  );
}

interface Case {
  name: string;
  step: FakeStep;
  nth?: number;
  how?: PortFailure;
  /** Exactly the undo calls expected, in order. */
  undo: string[];
}

const ALL_LINKS = ["links.remove knhost0", "links.remove knhost1"];
const BOTH_PORTS = ["manager.deletePort uid-c1-eth0", "manager.deletePort uid-c1-net1"];
const EVERYTHING = [
  "switch.remove knhost0,knhost1",
  ...ALL_LINKS,
  ...BOTH_PORTS,
  "state.delete c1/eth0",
];
/**
 * The first interface's veth, sent to `ip` while the ports are asked for, and its switch port,
 * plugged as soon as `ip` has made it (early_plug.ts).
 */
const FIRST_LINK = ["switch.remove knhost0", "links.remove knhost0"];
const CASES: Case[] = [
  { name: "the first record write: nothing made", step: "state.put", undo: [] },
  {
    name: "the first port refused: the first veth and its switch port (made meanwhile), the record",
    step: "manager.putPort",
    undo: [...FIRST_LINK, "state.delete c1/eth0"],
  },
  {
    name: "the second port refused: the first veth, the first port",
    step: "manager.putPort",
    nth: 2,
    undo: [...FIRST_LINK, "manager.deletePort uid-c1-eth0", "state.delete c1/eth0"],
  },
  {
    name: "the second port's request never sent: the first veth, the first port",
    step: "manager.putPort",
    nth: 2,
    how: "not sent",
    undo: [...FIRST_LINK, "manager.deletePort uid-c1-eth0", "state.delete c1/eth0"],
  },
  {
    name:
      "the second port's answer lost: the first veth, both ports (the manager may have made it)",
    step: "manager.putPort",
    nth: 2,
    how: "answer lost",
    undo: [...FIRST_LINK, ...BOTH_PORTS, "state.delete c1/eth0"],
  },
  {
    name: "the first veth (ip says so at its end): the ports, no switch port",
    step: "links.create",
    undo: ["links.remove knhost0", ...BOTH_PORTS, "state.delete c1/eth0"],
  },
  {
    name: "the first veth's setup (which deletes it): its switch port, the ports",
    step: "links.configure",
    undo: [...FIRST_LINK, ...BOTH_PORTS, "state.delete c1/eth0"],
  },
  {
    name: "the second veth: the first veth and the ports",
    step: "links.create",
    nth: 2,
    undo: [...FIRST_LINK, ...BOTH_PORTS, "state.delete c1/eth0"],
  },
  { name: "the switch (its rows stay): everything", step: "switch.add", undo: EVERYTHING },
  { name: "the flow sync: everything", step: "flows.sync", undo: EVERYTHING },
  {
    name: "the record write with the ofports: everything",
    step: "state.put",
    nth: 2,
    undo: EVERYTHING,
  },
];

for (const c of CASES) {
  Deno.test(`wire fails at ${c.step} #${c.nth ?? 1} (${c.name}) and undoes exactly that`, async () => {
    const { world, wiring } = setup();
    // Not knitter's: another plugin's interface in another netns, another node's port.
    world.addForeign("/var/run/netns/other", "eth0");
    await world.manager.putPort("t", "net0", "someone-else", { node: "n2" });
    world.calls.length = 0;
    const before = world.snapshot();
    world.failAt(c.step, c.nth, c.how);
    await assert.rejects(wiring.wire(attachment(), request()));
    assert.deepEqual(undone(world.calls), c.undo);
    assert.deepEqual(world.snapshot(), before, "nothing made is left, nothing else changed");
  });
}

Deno.test("wire answers with everything made when the ready write after it fails: the record stays building, with its result, for the next start", async () => {
  const { world, wiring } = setup();
  world.failAt("state.put", 3);
  await wiring.wire(attachment(), request({ complete: (a) => a.result = { done: true } }));
  assert.deepEqual(undone(world.calls), [], "nothing undone: the pod was answered");
  const stored = (await world.state.getAttachment("c1", "eth0"))!;
  assert.equal(stored.status, "building");
  assert.deepEqual(stored.result, { done: true });
  assert.deepEqual(stored.interfaces.map((i) => i.ofport), [1000, 1001]);
  assert.deepEqual([...world.switchPorts.get("br-int")!.keys()], ["knhost0", "knhost1"]);
  assert.ok(world.podEnds.has(`${NETNS}/eth0`) && world.podEnds.has(`${NETNS}/net1`));
});

Deno.test("wire makes the record, veths, switch ports and flows; unwire takes all of it away", async () => {
  const { world, wiring } = setup();
  world.softwareChecksums = true;
  const before = world.snapshot();
  const a = attachment();
  await wiring.wire(a, request({ complete: (a) => a.result = { done: true } }));
  const stored = (await world.state.getAttachment("c1", "eth0"))!;
  assert.equal(stored.status, "ready");
  assert.deepEqual(stored.result, { done: true });
  assert.deepEqual(stored.interfaces.map((i) => i.ofport), [1000, 1001]);
  const eth0 = world.podEnds.get(`${NETNS}/eth0`)!;
  assert.equal(eth0.mac, stored.interfaces[0].port!.mac);
  assert.equal(eth0.softwareChecksums, true, "the datapath's checksum setting reaches every veth");
  assert.deepEqual(eth0.addresses, [stored.interfaces[0].port!.address]);
  assert.deepEqual(
    [...world.switchPorts.get("br-int")!.values()].map((p) => [p.name, p.ofportRequest]),
    [["knhost0", 1000], ["knhost1", 1001]],
  );
  assert.equal(world.switchPorts.get("br-int")!.get("knhost0")!.externalIds!["knitter-pod"], "t/p");
  assert.equal(world.flowSyncs, 1);

  await wiring.unwire(stored, "DEL");
  assert.equal(world.flowSyncs, 2, "the flows of the gone ports go");
  assert.deepEqual(world.snapshot(), before);
});

Deno.test("unwire takes the flows away first: a burst's flow syncs never wait behind the switch's port removals", async () => {
  const { world, wiring } = setup();
  await wiring.wire(attachment(), request());
  world.calls.length = 0;
  await wiring.unwire((await world.state.getAttachment("c1", "eth0"))!, "DEL");
  const order = world.calls.map((c) => c.split(" ")[0]);
  assert.deepEqual(order.slice(0, 3), ["state.put", "flows.sync", "switch.remove"]);
  assert.ok(order.indexOf("links.remove") > order.indexOf("flows.sync"));
});

Deno.test("unwire is idempotent: a second undo of the same record finds nothing and fails not", async () => {
  const { world, wiring } = setup();
  const before = world.snapshot();
  await wiring.wire(attachment(), request());
  const stored = (await world.state.getAttachment("c1", "eth0"))!;
  await wiring.unwire(structuredClone(stored), "DEL");
  await wiring.unwire(structuredClone(stored), "DEL again");
  assert.deepEqual(world.snapshot(), before);
});

Deno.test("a rollback unbinds a stable port bound to its pod instead of releasing it", async () => {
  const { world, wiring } = setup();
  world.failAt("links.create");
  await assert.rejects(wiring.wire(attachment(["stable:t:p-eth0"]), request()));
  assert.deepEqual(undone(world.calls), [
    "links.remove knhost0",
    "manager.unbindPort stable:t:p-eth0",
    "state.delete c1/eth0",
  ]);
  const kept = world.managerPorts.get("t/net0/stable:t:p-eth0")!;
  assert.equal(kept.pod, undefined, "unbound: the address stays, the pod no longer names it");
});

Deno.test("a rollback unbinds a stable port whose PUT answer was lost, never releases it", async () => {
  const { world, wiring } = setup();
  world.failAt("manager.putPort", 1, "answer lost");
  await assert.rejects(wiring.wire(attachment(["stable:t:p-eth0"]), request()));
  assert.deepEqual(undone(world.calls), [
    ...FIRST_LINK,
    "manager.unbindPort stable:t:p-eth0",
    "state.delete c1/eth0",
  ]);
  const kept = world.managerPorts.get("t/net0/stable:t:p-eth0");
  assert.ok(kept, "the stable address stays");
  assert.equal(kept.pod, undefined, "unbound");
});

Deno.test("unwire leaves a port another attachment on this node holds", async () => {
  const { world, wiring } = setup();
  const held = attachment(["stable:t:p-eth0"]);
  await wiring.wire(held, request());
  const other = { ...attachment(["stable:t:p-eth0"]), containerId: "c0" };
  other.interfaces[0].hostIfName = "knold0";
  await world.state.putAttachment(other);
  world.calls.length = 0;
  await wiring.unwire((await world.state.getAttachment("c1", "eth0"))!, "DEL");
  assert.ok(world.managerPorts.has("t/net0/stable:t:p-eth0"), "the older sandbox's port stays");
  assert.deepEqual(undone(world.calls).filter((c) => c.startsWith("manager")), []);
});

Deno.test("unwire releases its port though another tenant's attachment here has a port of the same ID", async () => {
  const { world, wiring } = setup();
  await wiring.wire(attachment(["stable:t:p-eth0"]), request());
  // Port IDs are per tenant: globex's port of that ID (on a public network) is another port.
  const theirs = { ...attachment(["stable:t:p-eth0"]), containerId: "c0", tenant: "globex" };
  theirs.interfaces[0] = { ...theirs.interfaces[0], tenant: "globex", hostIfName: "knold0" };
  await world.state.putAttachment(theirs);
  world.calls.length = 0;
  await wiring.unwire((await world.state.getAttachment("c1", "eth0"))!, "DEL");
  assert.deepEqual(undone(world.calls).filter((c) => c.startsWith("manager")), [
    "manager.deletePort stable:t:p-eth0",
  ]);
});

Deno.test("an interface of that name another plugin made is refused and left alone", async () => {
  const { world, wiring } = setup();
  world.addForeign(NETNS, "net1");
  const before = world.snapshot();
  await assert.rejects(wiring.wire(attachment(), request()), /already exists/);
  assert.deepEqual(world.snapshot(), before, "the other plugin's net1 is still there");
  assert.deepEqual(undone(world.calls).filter((c) => c.startsWith("links")), [
    "links.remove knhost0",
  ]);
});

Deno.test("a port on a physnet this node does not map is refused and released", async () => {
  const { world, wiring } = setup();
  // The fake's ports are vxlan: this network is a VLAN on physnet phys9.
  const put = world.manager.putPort;
  world.manager.putPort = async (...args) => ({
    ...(await put(...args)),
    type: "vlan",
    physnet: "phys9",
  });
  const before = world.snapshot();
  await assert.rejects(wiring.wire(attachment(["uid-c1-eth0"]), request()), PhysnetNotMappedError);
  assert.deepEqual(undone(world.calls), [
    ...FIRST_LINK,
    "manager.deletePort uid-c1-eth0",
    "state.delete c1/eth0",
  ]);
  assert.deepEqual(world.snapshot(), before);
  world.physnets.set("phys9", 7);
  await wiring.wire(attachment(["uid-c1-eth0"]), request());
  assert.equal((await world.state.getAttachment("c1", "eth0"))!.status, "ready");
});

Deno.test("an accept hook's refusal releases the port", async () => {
  const { world, wiring } = setup();
  const before = world.snapshot();
  const refuse = () => {
    throw new Error("MTU too big");
  };
  await assert.rejects(wiring.wire(attachment(), request({ accept: refuse })), /MTU too big/);
  assert.deepEqual(undone(world.calls), [
    ...FIRST_LINK,
    "manager.deletePort uid-c1-eth0",
    "state.delete c1/eth0",
  ]);
  assert.deepEqual(world.snapshot(), before);
});

const PLAIN = {
  netns: NETNS,
  ifName: "br0",
  hostIfName: "knplain",
  mac: "02:00:00:00:01:01",
  mtu: 1500,
  addresses: ["192.168.5.2/24"],
  routes: [],
  bridge: "br-ext",
  vlan: 10,
  externalIds: { "knitter-extra": "x1" },
};

for (
  const c of [
    { step: "links.create" as const, undo: [] },
    {
      step: "bridges.addPorts" as const,
      undo: ["bridges.delPorts br-ext knplain", "links.remove knplain"],
    },
  ]
) {
  Deno.test(`wirePlain fails at ${c.step} and undoes exactly that`, async () => {
    const { world, wiring } = setup();
    world.switchPorts.set("br-ext", new Map([["someone", { name: "someone" }]]));
    const before = world.snapshot();
    world.failAt(c.step);
    await assert.rejects(wiring.wirePlain(PLAIN));
    assert.deepEqual(undone(world.calls), c.undo);
    assert.deepEqual(world.snapshot(), before);
  });
}

Deno.test("wirePlain tags the port; unwirePlain removes it and the veth", async () => {
  const { world, wiring } = setup();
  const before = world.snapshot();
  await wiring.wirePlain(PLAIN);
  assert.equal(world.switchPorts.get("br-ext")!.get("knplain")!.tag, 10);
  assert.deepEqual(world.podEnds.get(`${NETNS}/br0`)!.addresses, ["192.168.5.2/24"]);
  await wiring.unwirePlain(PLAIN);
  assert.deepEqual(world.snapshot(), before);
});

Deno.test("wire answers without waiting for the ready write: it lands after, and the record says ready", async () => {
  const { world, wiring } = setup();
  const put = world.state.putAttachment;
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  let writes = 0;
  world.state.putAttachment = (a) => ++writes === 3 ? held.then(() => put(a)) : put(a);
  await wiring.wire(attachment(), request());
  assert.equal(writes, 3, "the ready write was made");
  assert.equal((await world.state.getAttachment("c1", "eth0"))?.status, "building");
  release();
  await held;
  await Promise.resolve();
  assert.equal((await world.state.getAttachment("c1", "eth0"))?.status, "ready");
});

Deno.test("a port refused while ip may still be making the first veth: the rollback ends ip first, and leaves nothing", async () => {
  const { world, wiring } = setup();
  const before = world.snapshot();
  world.failAt("manager.putPort");
  await assert.rejects(wiring.wire(attachment(), request()), /address taken/);
  // The fake's ip makes what it was sent when it ends: an undo before that would miss the veth.
  const order = world.calls.filter((c) => /^(batch\.|links\.remove)/.test(c));
  assert.deepEqual(order, ["batch.abandon", "links.remove knhost0"]);
  assert.deepEqual(world.snapshot(), before, "no veth made after the rollback is left");
});

Deno.test("a pair is made with the MTU its network's interfaces got last; setup corrects one the manager contradicts", async () => {
  const { world, wiring } = setup();
  const made: number[] = [];
  const completed: [number, number][] = [];
  const { sendPair, complete } = world.links;
  world.links.sendPair = (spec, batch) => (made.push(spec.mtu), sendPair(spec, batch));
  world.links.complete = (spec, madeMtu, batch) => (
    completed.push([madeMtu, spec.mtu]), complete(spec, madeMtu, batch)
  );
  await wiring.wire(attachment(["uid-c1-eth0"]), request());
  const next = { ...attachment(["uid-c2-eth0"]), containerId: "c2", netns: "/var/run/netns/pod2" };
  next.interfaces[0].hostIfName = "knnext0";
  await wiring.wire(next, request());
  assert.deepEqual(made, [1500, 1450], "the network's MTU once one of its interfaces had it");
  assert.deepEqual(completed, [[1500, 1450], [1450, 1450]]);
  assert.equal(world.podEnds.get(`${NETNS}/eth0`)?.mtu, 1450);
});

/**
 * Runs `wire` of each attachment at once, with the manager's answers held until `check` has
 * looked at the world.
 */
async function wireWithPutsHeld(
  world: FakeWorld,
  wiring: Wiring,
  attachments: Attachment[],
  check: () => void,
) {
  const put = world.manager.putPort;
  let answer = () => {};
  const held = new Promise<void>((resolve) => answer = resolve);
  let puts = 0;
  world.manager.putPort = (...args) => (puts++, held.then(() => put(...args)));
  const wired = Promise.all(attachments.map((a) => wiring.wire(a, request())));
  while (puts < attachments.length) await new Promise((r) => setTimeout(r, 0));
  await new Promise((r) => setTimeout(r, 0));
  try {
    check();
  } finally {
    answer();
    await wired;
  }
}

Deno.test("the first interface's switch port is plugged while the manager is asked, with the ofport its record names", async () => {
  const { world, wiring } = setup();
  await wireWithPutsHeld(world, wiring, [attachment(["uid-c1-eth0"])], () => {
    const port = world.switchPorts.get("br-int")?.get("knhost0");
    assert.ok(port, "on the bridge before the manager has answered");
    assert.equal(port.ofportRequest, 1000);
    assert.equal(world.records.get("c1/eth0")?.interfaces[0].ofport, 1000, "the record names it");
    assert.equal(world.records.get("c1/eth0")?.status, "adding");
  });
  const ports = world.switchPorts.get("br-int")!;
  assert.deepEqual([...ports.keys()], ["knhost0"]);
  assert.equal(ports.get("knhost0")!.externalIds!["knitter-network"], "t/net0");
  assert.ok(!world.calls.some((c) => c.startsWith("switch.label")), "no IDs to correct");
});

Deno.test("a port on another tenant's public network: the early switch port's external IDs are corrected once the manager names the owner", async () => {
  const { world, wiring } = setup();
  const put = world.manager.putPort;
  world.manager.putPort = async (...args) => ({ ...(await put(...args)), networkTenant: "owner" });
  await wiring.wire(attachment(), request());
  const ids = world.switchPorts.get("br-int")!.get("knhost0")!.externalIds!;
  assert.equal(ids["knitter-network"], "owner/net0");
  assert.equal(ids["knitter-container"], "c1");
  assert.ok(world.calls.includes("switch.label knhost0"));
});

Deno.test("beside another ADD, the switch ports are plugged after the manager's answers, together", async () => {
  const { world, wiring } = setup();
  const other = { ...attachment(["uid-c2-eth0"]), containerId: "c2", netns: "/var/run/netns/pod2" };
  other.interfaces[0].hostIfName = "knother0";
  await wireWithPutsHeld(world, wiring, [attachment(["uid-c1-eth0"]), other], () => {
    assert.equal(world.switchPorts.get("br-int")?.size ?? 0, 0, "nothing plugged early");
  });
  assert.deepEqual([...world.switchPorts.get("br-int")!.keys()].sort(), ["knhost0", "knother0"]);
  const stored = (await world.state.getAttachment("c2", "eth0"))!;
  assert.equal(stored.status, "ready");
});
