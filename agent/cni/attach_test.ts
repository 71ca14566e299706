/**
 * The CNI operations through the in-memory fakes (seams_fake.ts): what ADD, DEL, CHECK, GC and the
 * reaper make and undo, without root. The real-namespace behaviour is the e2e tests' (tests/).
 */
import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { CNI_CODE, CniError, type CniResult } from "@knitter/plugin/contract";
import { Attacher } from "./attach.ts";
import { settleAnswered } from "./settle.ts";
import type { PodNetns } from "../interfaces/netns.ts";
import type { CniRequest } from "./pod_request.ts";
import type { Namespaces } from "../interfaces/seams.ts";
import { type FakeStep, FakeWorld } from "../interfaces/seams_fake.ts";
import { EXTRA_CONTAINER_PREFIX } from "../state.ts";
import { Wiring } from "../interfaces/wiring.ts";

const NETNS = "/var/run/netns/pod";

/** Namespaces by path: their identity, or absent (gone). */
class FakeNamespaces implements Namespaces {
  readonly ids = new Map<string, string>([[NETNS, "4:100"]]);

  pod(path: string): Promise<PodNetns> {
    const id = this.ids.get(path);
    if (!id) return Promise.reject(new CniError(CNI_CODE.invalidEnvironment, `${path} is gone`));
    return Promise.resolve({ path, id });
  }

  idNow(path: string): Promise<string | "missing"> {
    return Promise.resolve(this.ids.get(path) ?? "missing");
  }
}

function setup() {
  const world = new FakeWorld();
  const namespaces = new FakeNamespaces();
  const log = createLogger("attach test", "error");
  const attacher = new Attacher({
    nodeName: "n1",
    defaults: { tenant: "acme", network: "blue" },
    state: world.state,
    wiring: new Wiring({ nodeName: "n1", log, ...world.seams() }),
    links: world.links,
    namespaces,
    log,
  });
  return { world, namespaces, attacher };
}

function req(command: CniRequest["command"], extra: Partial<CniRequest> = {}): CniRequest {
  return {
    command,
    containerId: "c1",
    netns: NETNS,
    ifName: "eth0",
    args: { KNITTER_NETWORKS: "blue,red" },
    path: "",
    config: { cniVersion: "1.1.0", name: "k", type: "knitter" },
    ...extra,
  };
}

function cniCode(code: number) {
  return (err: unknown) => {
    assert.ok(err instanceof CniError, String(err));
    assert.equal(err.code, code, err.message);
    return true;
  };
}

function checkFailed(message: RegExp) {
  return (err: unknown) =>
    cniCode(CNI_CODE.checkFailed)(err) && message.test((err as Error).message);
}

Deno.test("ADD makes one interface per network; the same ADD again answers the same; DEL undoes all", async () => {
  const { world, attacher } = setup();
  const before = world.snapshot();
  const result = await attacher.add(req("ADD"));
  assert.deepEqual(result.interfaces!.filter((i) => i.sandbox).map((i) => i.name), [
    "eth0",
    "net1",
  ]);
  assert.equal(result.ips!.length, 2);
  assert.equal(world.podEnds.size, 2);
  const calls = world.calls.length;
  assert.deepEqual(await attacher.add(req("ADD")), result);
  assert.equal(world.calls.length, calls, "nothing asked or made again");
  await attacher.check(req("CHECK", { config: { ...req("ADD").config, prevResult: result } }));

  await attacher.del(req("DEL"));
  assert.deepEqual(world.snapshot(), before);
  await attacher.del(req("DEL"));
});

const FAILURES: { step: FakeStep; nth?: number; code: number }[] = [
  { step: "manager.putPort", nth: 2, code: CNI_CODE.invalidConfig },
  { step: "links.create", nth: 2, code: CNI_CODE.internal },
  { step: "switch.add", code: CNI_CODE.internal },
  { step: "flows.sync", code: CNI_CODE.internal },
];

for (const c of FAILURES) {
  Deno.test(`ADD failing at ${c.step} #${c.nth ?? 1}: CNI error ${c.code}, nothing left`, async () => {
    const { world, attacher } = setup();
    const before = world.snapshot();
    world.failAt(c.step, c.nth);
    await assert.rejects(attacher.add(req("ADD")), cniCode(c.code));
    assert.deepEqual(world.snapshot(), before);
  });
}

Deno.test("ADD again in a recreated sandbox (another netns at the path) undoes the old and makes anew", async () => {
  const { world, namespaces, attacher } = setup();
  const first = await attacher.add(req("ADD"));
  namespaces.ids.set(NETNS, "4:200");
  // The runtime's new sandbox has none of the old interfaces.
  world.podEnds.clear();
  const second = await attacher.add(req("ADD"));
  assert.equal(world.podEnds.size, 2);
  assert.equal(world.switchPorts.get("br-int")!.size, 2, "the old switch ports went");
  assert.equal(world.managerPorts.size, 2, "the old ports were released, two asked anew");
  assert.deepEqual(
    second.ips!.map((i) => i.address),
    [...world.managerPorts.values()].map((p) => p.address),
  );
  assert.equal(first.ips!.length, 2);
  assert.equal((await world.state.getAttachment("c1", "eth0"))!.netnsId, "4:200");
});

Deno.test("CHECK fails (its code) on a MAC changed after ADD, or on another netns at the path", async () => {
  const { world, namespaces, attacher } = setup();
  const result: CniResult = await attacher.add(req("ADD"));
  const check = req("CHECK", { config: { ...req("ADD").config, prevResult: result } });
  world.podEnds.get(`${NETNS}/net1`)!.mac = "02:aa:bb:cc:dd:ee";
  await assert.rejects(attacher.check(check), checkFailed(/MAC was changed after ADD/));
  namespaces.ids.set(NETNS, "4:300");
  await assert.rejects(
    attacher.check(check),
    checkFailed(/not the network namespace ADD made eth0 in/),
  );
});

Deno.test("CHECK fails when a limit ADD set on the veth was taken away or changed, and passes while it holds", async () => {
  const { world, attacher } = setup();
  const bandwidth = { ingressRate: 20_000_000, ingressBurst: 400_000, egressRate: 10_000_000 };
  const config = { ...req("ADD").config, runtimeConfig: { bandwidth } };
  const result: CniResult = await attacher.add(req("ADD", { config }));
  const check = req("CHECK", { config: { ...config, prevResult: result } });
  await attacher.check(check);
  const [host, limits] = [...world.limits][0];
  // The pod drops its own egress qdisc (it has CAP_NET_ADMIN).
  world.limits.set(host, { ingress: limits.ingress });
  await assert.rejects(
    attacher.check(check),
    checkFailed(/the egress limit of 10000000 bit\/s on eth0 in \S+ is gone/),
  );
  // Someone on the node makes the host end's faster.
  world.limits.set(host, { ...limits, ingress: { ...limits.ingress!, rate: 50_000_000 } });
  await assert.rejects(
    attacher.check(check),
    checkFailed(/the ingress limit of 20000000 bit\/s on \S+ is 50000000 bit\/s/),
  );
});

Deno.test("GC removes what the runtime no longer lists, keeps what it lists and knitctl's interfaces", async () => {
  const { world, namespaces, attacher } = setup();
  namespaces.ids.set("/var/run/netns/pod2", "4:101");
  await attacher.add(req("ADD"));
  await attacher.add(req("ADD", { containerId: "c2", netns: "/var/run/netns/pod2", args: {} }));
  await world.state.putAttachment({
    containerId: `${EXTRA_CONTAINER_PREFIX}x1`,
    ifName: "data0",
    netns: NETNS,
    tenant: "acme",
    status: "ready",
    interfaces: [],
    createdAt: "2026-11-25T00:00:00.000Z",
  });
  await attacher.gc(req("GC", {
    containerId: "",
    ifName: "",
    config: {
      ...req("ADD").config,
      "cni.dev/valid-attachments": [{ containerID: "c2", ifname: "eth0" }],
    },
  }));
  assert.deepEqual(
    (await world.state.listAttachments()).map((a) => a.containerId).sort(),
    ["c2", `${EXTRA_CONTAINER_PREFIX}x1`],
  );
  assert.equal(world.podEnds.size, 1, "c1's two interfaces went, c2's stays");
});

Deno.test("reap undoes an attachment whose netns is gone, never one whose netns is there", async () => {
  const { world, namespaces, attacher } = setup();
  const before = world.snapshot();
  await attacher.add(req("ADD"));
  const listed = (await world.state.getAttachment("c1", "eth0"))!;
  assert.equal(await attacher.reap(listed, "test"), false);
  namespaces.ids.delete(NETNS);
  assert.equal(await attacher.reap(listed, "test"), true);
  assert.deepEqual(world.snapshot(), before);
});

Deno.test("a port another attachment on this node holds is error 11, and is not touched", async () => {
  const { world, attacher } = setup();
  await attacher.add(req("ADD"));
  const mine = (await world.state.getAttachment("c1", "eth0"))!;
  await attacher.del(req("DEL"));
  // Another sandbox of the pod holds the port (as a stable address's older sandbox does).
  await world.state.putAttachment({ ...mine, containerId: "c0" });
  const before = world.snapshot();
  world.calls.length = 0;
  await assert.rejects(attacher.add(req("ADD")), cniCode(CNI_CODE.tryAgainLater));
  assert.deepEqual(world.snapshot(), before);
  assert.deepEqual(world.calls.filter((c) => !c.startsWith("state")), [], "nothing asked or made");
});

/**
 * An ADD answered while its "ready" write never lands (a crash after the answer: the record stays
 * "building" in the store), then the agent's start (settle.ts) with one part of the pod changed.
 */
async function answeredThenStarted(change: (w: Started) => void) {
  const s = setup();
  s.world.failAt("state.put", 3);
  const result = await s.attacher.add(req("ADD"));
  const a = (await s.world.state.getAttachment("c1", "eth0"))!;
  assert.equal(a.status, "building");
  // The flows a sync installed: one line per interface, its cookie the port's number.
  const hex = (n: number) => n.toString(16).padStart(8, "0");
  const flows = new Set(
    a.interfaces.map((i) => `cookie=0x${hex(1)}${hex(i.cookie)},table=0,actions=drop`),
  );
  change({ ...s, flows });
  const completed = await settleAnswered({
    state: s.world.state,
    attacher: s.attacher,
    links: s.world.links,
    switchPorts: () =>
      Promise.resolve(
        new Map([...s.world.switchPorts.get("br-int")!.values()].map((p) => [
          p.name,
          p.ofportRequest!,
        ])),
      ),
    netnsId: (path) => s.namespaces.idNow(path),
    flows: () => flows,
    log: createLogger("settle test", "error"),
  });
  return { ...s, result, completed };
}

Deno.test("start: an ADD answered before its ready write landed is completed as ready when whole: CHECK passes, the same ADD answers the same", async () => {
  const { world, attacher, result, completed } = await answeredThenStarted(() => {});
  assert.equal(completed, 1);
  assert.equal((await world.state.getAttachment("c1", "eth0"))?.status, "ready");
  await attacher.check(req("CHECK", { config: { ...req("ADD").config, prevResult: result } }));
  const calls = world.calls.length;
  assert.deepEqual(await attacher.add(req("ADD")), result);
  assert.equal(world.calls.length, calls, "nothing made again");
});

type Started = ReturnType<typeof setup> & { flows: Set<string> };

const NOT_WHOLE: [string, (w: Started) => void][] = [
  ["its flows gone", ({ flows }) => flows.delete([...flows][0])],
  ["a veth gone", ({ world }) => world.podEnds.delete(`${NETNS}/net1`)],
  ["a MAC changed", ({ world }) => (world.podEnds.get(`${NETNS}/eth0`)!.mac = "02:00:00:00:00:99")],
  ["a switch port gone", ({ world }) => {
    const ports = world.switchPorts.get("br-int")!;
    ports.delete([...ports.keys()][1]);
  }],
  ["the netns gone", ({ namespaces }) => namespaces.ids.delete(NETNS)],
];

for (const [what, change] of NOT_WHOLE) {
  Deno.test(`start: a building record with ${what} is not completed; CHECK fails it, DEL undoes all of it`, async () => {
    const before = setup().world.snapshot();
    const { world, attacher, completed } = await answeredThenStarted(change);
    assert.equal(completed, 0);
    assert.equal((await world.state.getAttachment("c1", "eth0"))?.status, "building");
    await assert.rejects(attacher.check(req("CHECK")), cniCode(CNI_CODE.checkFailed));
    await attacher.del(req("DEL"));
    assert.equal(world.records.size, 0);
    assert.equal(world.managerPorts.size, 0, "the manager's ports released");
    assert.deepEqual(world.snapshot().switchPorts, before.switchPorts);
  });
}
