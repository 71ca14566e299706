import assert from "node:assert/strict";
import { createLogger, STATUS_WRITER, statusMark } from "@knitter/common";
import type { Attachment } from "../state.ts";
import type { ExtraInterface } from "../extra/extra_interface_store.ts";
import type { AttachBody } from "../extra/extra_interface_request.ts";
import { Hotplug, HOTPLUG_FAILED } from "./hotplug.ts";
import type { NodePod } from "./kube_pods.ts";

const NETWORKS = "k8s.v1.cni.cncf.io/networks";

function attachment(containerId: string, netns: string, netnsId: string): Attachment {
  return {
    containerId,
    ifName: "eth0",
    netns,
    netnsId,
    tenant: "acme",
    pod: { namespace: "acme", name: "web", uid: "u1" },
    status: "ready",
    interfaces: [{
      ifName: "eth0",
      hostIfName: `kn${containerId}`,
      portId: `u1-${containerId}-eth0`,
      tenant: "acme",
      network: "pods",
      cookie: 1,
      defaultRoute: true,
    }],
    createdAt: "2026-01-01T00:00:00Z",
  };
}

function record(id: string, ifName: string, netns: string, netnsId: string): ExtraInterface {
  return {
    id,
    netns,
    netnsId,
    ifName,
    pod: "acme/web",
    hotplug: { uid: "u1" },
    kind: "network",
    status: "ready",
    hostIfName: `kn${id}`,
    bridge: "br-int",
    network: "data",
    mac: "02:00:00:00:00:01",
    mtu: 1450,
    routes: [],
    request: { ifName, network: "data", tenant: "acme", routes: [] },
    createdAt: "2026-01-01T00:00:00Z",
  };
}

/** The agent's records and extra interfaces in memory; what hot-plug asked of them, in order. */
function setup(attachments: Attachment[], records: ExtraInterface[], failAttach?: string) {
  const calls: string[] = [];
  const events: { type: string; reason: string; message: string }[] = [];
  const hotplug = new Hotplug({
    nodeName: "n1",
    defaultNetwork: "pods",
    extra: {
      attach: (body: AttachBody) => {
        calls.push(`attach ${body.ifName} ${body.network} tenant ${body.tenant}`);
        if (failAttach) return Promise.reject(new Error(failAttach));
        return Promise.resolve({
          view: { ifName: body.ifName, mac: "02:00:00:00:00:02" } as never,
          created: true,
        });
      },
      detachRecord: (id: string) => {
        calls.push(`detach ${id}`);
        records.splice(records.findIndex((x) => x.id === id), 1);
        return Promise.resolve(true);
      },
      records: () => Promise.resolve(structuredClone(records)),
    },
    attachments: () => attachments,
    pods: {
      event: (_pod, type, reason, message) => {
        events.push({ type, reason, message });
        return Promise.resolve();
      },
    },
    log: createLogger("hotplug test", "error"),
  });
  return { hotplug, calls, events };
}

function web(annotation: string | undefined): NodePod {
  return {
    namespace: "acme",
    name: "web",
    uid: "u1",
    annotations: annotation === undefined ? {} : { [NETWORKS]: annotation },
    deleting: false,
  };
}

Deno.test("hot-plug: a pod's sandbox made anew takes the annotation's interfaces at its ADD; the old netns's hot-plugged one goes, its port with it", async () => {
  // The runtime recreated the sandbox: its new ADD made net1 on data from the annotation.
  const fresh = attachment("c2", "/var/run/netns/new", "1:2");
  fresh.interfaces.push({ ...fresh.interfaces[0], ifName: "net1", network: "data", cookie: 2 });
  const { hotplug, calls } = setup([fresh], [record("x1", "net1", "/var/run/netns/old", "1:1")]);
  hotplug.changed(web("data"), "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, ["detach x1"]);
  await hotplug.stop();
});

Deno.test("hot-plug: a failure is one Warning event and is retried", async () => {
  const { hotplug, calls, events } = setup(
    [attachment("c1", "/var/run/netns/p", "1:1")],
    [],
    "the manager refused: no such network",
  );
  hotplug.changed(web("data"), "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, ["attach net1 data tenant acme"]);
  assert.deepEqual(events.map((e) => `${e.type} ${e.reason}`), [`Warning ${HOTPLUG_FAILED}`]);
  assert.match(events[0].message, /cannot add net1 on network data: .*no such network \(retried\)/);
  assert.equal(hotplug.queue.failed, 1, "the queue retries it");
  await hotplug.stop();
});

Deno.test("hot-plug: a pod deleted loses its hot-plugged interfaces", async () => {
  const { hotplug, calls } = setup(
    [attachment("c1", "/var/run/netns/p", "1:1")],
    [record("x1", "net1", "/var/run/netns/p", "1:1")],
  );
  hotplug.changed(web("data"), "DELETED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, ["detach x1"]);
  await hotplug.stop();
});

Deno.test("hot-plug: a pod whose sandbox went (its DEL ran: it completed) loses its hot-plugged interfaces", async () => {
  const { hotplug, calls } = setup([], [record("x1", "net1", "/var/run/netns/p", "1:1")]);
  hotplug.changed(web("data"), "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, ["detach x1"]);
  await hotplug.stop();
});

Deno.test("hot-plug: while the pod's ADD is under way nothing is changed; it is looked at again", async () => {
  const adding = attachment("c1", "/var/run/netns/p", "1:1");
  adding.status = "adding";
  const { hotplug, calls } = setup([adding], [record("x1", "net1", "/var/run/netns/p", "1:1")]);
  hotplug.changed(web(undefined), "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, []);
  assert.equal(hotplug.queue.failed, 0, "a requeue, not a failure");
  await hotplug.stop();
});

Deno.test("hot-plug: a pod whose network-status Multus writes is left to Multus", async () => {
  const { hotplug, calls } = setup([attachment("c1", "/var/run/netns/p", "1:1")], []);
  const pod = web("data");
  pod.annotations["k8s.v1.cni.cncf.io/network-status"] = "[]";
  hotplug.changed(pod, "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, []);
  // The monitor's own status (its mark matches the text) is no reason to hold back.
  pod.annotations[STATUS_WRITER] = statusMark("[]");
  hotplug.changed(pod, "MODIFIED");
  await hotplug.queue.idle();
  assert.deepEqual(calls, ["attach net1 data tenant acme"]);
  await hotplug.stop();
});
