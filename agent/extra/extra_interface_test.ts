/**
 * knitctl attach / detach through the in-memory fakes (seams_fake.ts): the same wiring and undo as
 * a CNI ADD, so a failure at any step leaves nothing, in the world or in the extra store.
 */
import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { ExtraInterfaceError, ExtraInterfaces } from "./extra_interface.ts";
import type { AttachBody } from "./extra_interface_request.ts";
import { ExtraInterfaceStore } from "./extra_interface_store.ts";
import { DUAL_STACK, type FakeStep, FakeWorld } from "../interfaces/seams_fake.ts";
import { Wiring } from "../interfaces/wiring.ts";

async function setup() {
  const world = new FakeWorld();
  const log = createLogger("extra test", "error");
  const store = await ExtraInterfaceStore.open(":memory:");
  const wiring = new Wiring({ nodeName: "n1", log, ...world.seams() });
  const extra = new ExtraInterfaces({
    nodeName: "n1",
    defaultTenant: "acme",
    store,
    state: world.state,
    wiring,
    links: world.links,
    bridges: world.bridges,
    log,
  });
  // A regular file stands for the netns: attach knows a netns by its path and identity.
  const netns = await Deno.makeTempFile({ prefix: "extra_test_netns" });
  // Another bridge of the switch, with a port that is not knitter's.
  world.switchPorts.set("br-ext", new Map([["uplink", { name: "uplink" }]]));
  return {
    world,
    store,
    extra,
    netns,
    async [Symbol.asyncDispose]() {
      store.close();
      await Deno.remove(netns);
    },
  };
}

function network(netns: string, extra: Partial<AttachBody> = {}): AttachBody {
  return { netns, ifName: "data0", network: "blue", routes: [], ...extra };
}

function plain(netns: string): AttachBody {
  return { netns, ifName: "br0", bridge: "br-ext", vlan: 10, ip: "192.168.5.2/24", routes: [] };
}

Deno.test("knitctl attach --network wires like a CNI ADD; detach takes all of it away, once", async () => {
  await using t = await setup();
  const before = t.world.snapshot();
  const { view, created } = await t.extra.attach(network(t.netns, { mtu: 1400 }));
  assert.equal(created, true);
  assert.equal(view.kind, "network");
  assert.equal(view.mtu, 1400);
  const port = [...t.world.managerPorts.values()][0];
  assert.equal(view.address, port.address);
  assert.equal(t.world.podEnds.get(`${t.netns}/data0`)!.mac, port.mac);
  const onBridge = t.world.switchPorts.get("br-int")!.get(view.hostIfName)!;
  assert.equal(onBridge.externalIds!["knitter-network"], "acme/blue");
  assert.equal(t.world.flowSyncs, 1);
  assert.equal((await t.extra.list()).length, 1);

  // The same request again is the same interface.
  assert.equal((await t.extra.attach(network(t.netns, { mtu: 1400 }))).created, false);

  const gone = await t.extra.detach({ netns: t.netns, ifName: "data0" });
  assert.equal(gone.removed, true);
  assert.deepEqual(t.world.snapshot(), before);
  assert.deepEqual(await t.store.list(), []);
  assert.equal((await t.extra.detach({ netns: t.netns, ifName: "data0" })).removed, false);
});

Deno.test("knitctl attach --network on a dual-stack network: both addresses on the interface and in the answer", async () => {
  await using t = await setup();
  const { view } = await t.extra.attach(network(t.netns, { network: DUAL_STACK }));
  const port = [...t.world.managerPorts.values()][0];
  assert.ok(port.address6, "the fake manager answers a dual-stack port");
  assert.equal(view.address, port.address);
  assert.equal(view.address6, port.address6);
  assert.deepEqual(t.world.podEnds.get(`${t.netns}/data0`)!.addresses, [
    port.address,
    port.address6,
  ]);
  assert.equal((await t.extra.detach({ netns: t.netns, ifName: "data0" })).removed, true);
});

const NETWORK_FAILURES: { step: FakeStep; status: number; code: string }[] = [
  { step: "manager.putPort", status: 409, code: "address_taken" },
  { step: "links.create", status: 500, code: "failed" },
  { step: "switch.add", status: 500, code: "failed" },
  { step: "flows.sync", status: 500, code: "failed" },
  { step: "state.put", status: 500, code: "failed" },
];

for (const c of NETWORK_FAILURES) {
  Deno.test(`knitctl attach --network failing at ${c.step}: ${c.status} ${c.code}, nothing left`, async () => {
    await using t = await setup();
    const before = t.world.snapshot();
    t.world.failAt(c.step);
    await assert.rejects(t.extra.attach(network(t.netns)), (err) => {
      assert.ok(err instanceof ExtraInterfaceError);
      assert.equal(err.status, c.status);
      assert.equal(err.code, c.code);
      return true;
    });
    assert.deepEqual(t.world.snapshot(), before);
    assert.deepEqual(await t.store.list(), []);
  });
}

Deno.test("knitctl attach --network: an MTU above the network's is refused, the port released", async () => {
  await using t = await setup();
  const before = t.world.snapshot();
  await assert.rejects(t.extra.attach(network(t.netns, { mtu: 9000 })), (err) => {
    assert.ok(err instanceof ExtraInterfaceError);
    assert.equal(err.code, "mtu_too_big");
    return true;
  });
  assert.deepEqual(t.world.snapshot(), before);
});

Deno.test("knitctl attach --network: a physnet the node does not map is 400 physnet_not_mapped", async () => {
  await using t = await setup();
  const put = t.world.manager.putPort;
  t.world.manager.putPort = async (...args) => ({
    ...(await put(...args)),
    type: "flat",
    physnet: "phys9",
  });
  const before = t.world.snapshot();
  await assert.rejects(t.extra.attach(network(t.netns)), (err) => {
    assert.ok(err instanceof ExtraInterfaceError);
    assert.equal(err.status, 400);
    assert.equal(err.code, "physnet_not_mapped");
    return true;
  });
  assert.deepEqual(t.world.snapshot(), before);
});

Deno.test("knitctl attach --bridge: a tagged port and a veth; detach removes both", async () => {
  await using t = await setup();
  const before = t.world.snapshot();
  const { view } = await t.extra.attach(plain(t.netns));
  assert.equal(t.world.switchPorts.get("br-ext")!.get(view.hostIfName)!.tag, 10);
  assert.deepEqual(t.world.podEnds.get(`${t.netns}/br0`)!.addresses, ["192.168.5.2/24"]);
  assert.deepEqual([...t.world.managerPorts.keys()], [], "no manager involved");
  await t.extra.detach({ netns: t.netns, ifName: "br0" });
  assert.deepEqual(t.world.snapshot(), before, "the bridge's own port stays");
});

for (const step of ["links.create", "bridges.addPorts"] as const) {
  Deno.test(`knitctl attach --bridge failing at ${step}: nothing left`, async () => {
    await using t = await setup();
    const before = t.world.snapshot();
    t.world.failAt(step);
    await assert.rejects(t.extra.attach(plain(t.netns)), ExtraInterfaceError);
    assert.deepEqual(t.world.snapshot(), before);
    assert.deepEqual(await t.store.list(), []);
  });
}

Deno.test("knitctl attach: an interface of that name already there is refused and left alone", async () => {
  await using t = await setup();
  t.world.addForeign(t.netns, "data0");
  const before = t.world.snapshot();
  await assert.rejects(t.extra.attach(network(t.netns)), (err) => {
    assert.ok(err instanceof ExtraInterfaceError);
    assert.equal(err.code, "interface_exists");
    return true;
  });
  assert.deepEqual(t.world.snapshot(), before);
});

Deno.test("knitctl attach --bridge: the integration bridge and unknown bridges are refused", async () => {
  await using t = await setup();
  const codes = [];
  for (const bridge of ["br-int", "br-nope"]) {
    const err = await t.extra.attach({ ...plain(t.netns), bridge }).catch((e) => e);
    assert.ok(err instanceof ExtraInterfaceError);
    codes.push(err.code);
  }
  assert.deepEqual(codes, ["bridge_managed", "no_such_bridge"]);
  assert.deepEqual(t.world.calls.filter((c) => c.startsWith("links")), []);
});

Deno.test("knitctl attach --network: its record failing to be marked ready undoes all of it", async () => {
  await using t = await setup();
  const before = t.world.snapshot();
  const put = t.store.put.bind(t.store);
  t.store.put = (x) => x.status === "ready" ? Promise.reject(new Error("disk full")) : put(x);
  await assert.rejects(t.extra.attach(network(t.netns)), /disk full/);
  assert.deepEqual(t.world.snapshot(), before);
  assert.deepEqual(await t.store.list(), []);
});

Deno.test("knitctl attach --pod goes into the pod's newest sandbox, not one an older sandbox's records still name", async () => {
  await using t = await setup();
  const older = await Deno.makeTempFile({ prefix: "extra_test_old_netns" });
  const sandbox = (containerId: string, netns: string, createdAt: string) =>
    t.world.state.putAttachment({
      containerId,
      ifName: "eth0",
      netns,
      tenant: "acme",
      pod: { namespace: "acme", name: "web", uid: "u1" },
      status: "ready",
      interfaces: [],
      createdAt,
    });
  await sandbox("c1", older, "2026-01-01T00:00:00Z");
  await sandbox("c2", t.netns, "2026-01-02T00:00:00Z");
  const { view } = await t.extra.attach({
    pod: "acme/web",
    ifName: "data0",
    network: "blue",
    routes: [],
  });
  assert.equal(view.netns, t.netns);
  assert.ok(t.world.podEnds.has(`${t.netns}/data0`));
  assert.ok(!t.world.podEnds.has(`${older}/data0`));
  await Deno.remove(older);
});
