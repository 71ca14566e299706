import assert from "node:assert/strict";
import { createLogger, type Port } from "@knitter/common";
import { FakeClock } from "../common/clock_fake.ts";
import { HOTPLUG_PENDING, HotplugPending } from "./hotplug_pending.ts";

const REF = { namespace: "acme", name: "web", uid: "u1" };
const NETWORKS = "k8s.v1.cni.cncf.io/networks";

function port(iface: string, network: string): Port {
  return { interface: iface, network } as Port;
}

function setup() {
  const events: { reason: string; message: string }[] = [];
  const clock = new FakeClock();
  const pending = new HotplugPending(
    {
      podEvent: (_pod, _type, reason, message) => {
        events.push({ reason, message });
        return Promise.resolve();
      },
    },
    2000,
    createLogger("hotplug test", "error"),
    clock,
  );
  return { events, clock, pending };
}

Deno.test("hot-plug pending: an interface not attached after the wait is told once, naming it and the node", async () => {
  const { events, clock, pending } = setup();
  const ann = { [NETWORKS]: "data@net5,media" };
  const ports = [port("eth0", "pods")];
  assert.equal(await pending.check(REF, "n1", ann, ports), 2000);
  await clock.advance(1500);
  assert.equal(await pending.check(REF, "n1", ann, ports), 500);
  assert.equal(events.length, 0);
  await clock.advance(500);
  assert.equal(await pending.check(REF, "n1", ann, ports), undefined);
  assert.equal(events.length, 1);
  assert.equal(events[0].reason, HOTPLUG_PENDING);
  assert.match(
    events[0].message,
    /asks for net5 \(network data\), an interface on network media, not attached after 2 s: the Knitter agent on node n1/,
  );
  assert.equal(await pending.check(REF, "n1", ann, ports), undefined);
  assert.equal(events.length, 1, "told once while what is missing stays the same");
});

Deno.test("hot-plug pending: nothing is told when the ports are there, or the pod has none yet", async () => {
  const { events, clock, pending } = setup();
  const ann = { [NETWORKS]: "data@net5,media" };
  const all = [port("eth0", "pods"), port("net5", "data"), port("net1", "media")];
  assert.equal(await pending.check(REF, "n1", ann, all), undefined);
  // No port at all: the pod's ADD is under way or failed, which the agent tells itself.
  assert.equal(await pending.check(REF, "n1", ann, []), undefined);
  await clock.advance(5000);
  assert.equal(await pending.check(REF, "n1", ann, []), undefined);
  assert.deepEqual(events, []);
});

Deno.test("hot-plug pending: what the agent refuses in a running pod (its primary interface) is not pending", async () => {
  const { events, clock, pending } = setup();
  const ann = { [NETWORKS]: "data@eth0" };
  const ports = [port("eth0", "pods")];
  await clock.advance(5000);
  assert.equal(await pending.check(REF, "n1", ann, ports), undefined);
  assert.deepEqual(events, []);
});

Deno.test("hot-plug pending: a change of what is missing starts the wait again", async () => {
  const { events, clock, pending } = setup();
  const ports = [port("eth0", "pods")];
  await pending.check(REF, "n1", { [NETWORKS]: "data" }, ports);
  await clock.advance(1500);
  assert.equal(await pending.check(REF, "n1", { [NETWORKS]: "media" }, ports), 2000);
  assert.deepEqual(events, []);
});
