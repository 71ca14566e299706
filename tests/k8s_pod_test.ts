/**
 * Pods under Kubernetes, end to end: the stand-in API server holds the pod objects, agents in
 * Kubernetes mode on simulated nodes read them with their node's credentials, the plugin attaches
 * them as kubelet would, the monitor writes their network-status and releases what they leave.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import {
  eventually,
  KUBE_CONFLIST,
  type KubeCluster,
  networkReady,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { leftovers } from "./support/leftovers.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";
import { addPodNetns } from "../devstack/sim_node.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";

function statusOf(k: KubeCluster, name: string, count: number) {
  return eventually(`network-status of ${name}`, () => {
    const v = k.api.get("pods", "acme", name)?.metadata.annotations?.[STATUS];
    return v && JSON.parse(v).length === count ? JSON.parse(v) : undefined;
  });
}

function events(k: KubeCluster, name: string, reason: string): KubeObject[] {
  return k.api.list("events", "acme").filter((e) =>
    e.involvedObject.name === name && e.reason === reason
  );
}

async function portsOf(k: KubeCluster, name: string): Promise<{ id: string; ip: string }[]> {
  return (await k.stack.api("GET", `ports?pod=acme/${name}`)).body.items;
}

Deno.test("stand-in API server: a pod's annotations give it its interfaces and its network-status; deleted, everything is released", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "data", "10.50.0.0/24");

  // Multus format: eth0 on the default network, net1 on the namespace's "data" with a fixed IP.
  const web = await k.pod(n1, {
    namespace: "acme",
    name: "web",
    annotations: {
      "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "data", ips: ["10.50.0.50/24"] }]),
    },
  });
  const added = await web.cni.add();
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  assert.match(addressOf(added.out, "eth0"), /^10\.244\.0\.\d+$/);
  assert.equal(addressOf(added.out, "net1"), "10.50.0.50");
  const links = await run(["ip", "-n", ipNetnsName(web.cni.netns), "-o", "link", "show"]);
  assert.match(links.stdout, /: net1@/);
  assert.ok(
    k.api.requests.some((r) =>
      r.user === "system:node:n1" && r.method === "GET" &&
      r.path === "/api/v1/namespaces/acme/pods/web"
    ),
    "the agent read the pod with its node's credentials",
  );

  const status = await statusOf(k, "web", 2);
  assert.deepEqual(
    status.map((
      s: { name: string; interface: string; default: boolean },
    ) => [s.name, s.interface, s.default]),
    [["admin/pods", "eth0", true], ["acme/data", "net1", false]],
  );
  assert.deepEqual(status[1].ips, ["10.50.0.50"]);

  // The same fixed address asked again: refused, with a clear event on the pod.
  const twin = await k.pod(n1, {
    namespace: "acme",
    name: "twin",
    annotations: { "k8s.v1.cni.cncf.io/networks": "data" },
  });
  k.api.update("pods", "acme", "twin", (o) => {
    o.metadata.annotations["k8s.v1.cni.cncf.io/networks"] = JSON.stringify([{
      name: "data",
      ips: ["10.50.0.50"],
    }]);
  });
  const refused = await twin.cni.add();
  assert.notEqual(refused.code, 0);
  assert.match(JSON.stringify(refused.out), /10\.50\.0\.50 of network \\"data\\" is/);
  const warned = await eventually(
    "an event on twin",
    () => events(k, "twin", "KnitterAttachFailed")[0],
  );
  assert.match(warned.message, /10\.50\.0\.50/);
  assert.equal((await portsOf(k, "twin")).length, 0, "nothing left allocated for twin");

  // A malformed annotation: the monitor says so in an event, the agent allocates nothing.
  const bad = await k.pod(n1, {
    namespace: "acme",
    name: "bad",
    annotations: { networks: '{"ports": [{"attach_to_network": "Data"}]}' },
  });
  const badEvent = await eventually(
    "an event on bad",
    () => events(k, "bad", "InvalidNetworkAnnotation")[0],
  );
  assert.match(
    badEvent.message,
    /Annotation "networks", ports\[0\]: network name "Data" is not a lowercase DNS label.*No network was attached/,
  );
  const badAdd = await bad.cni.add();
  assert.notEqual(badAdd.code, 0);
  assert.match(JSON.stringify(badAdd.out), /Pod acme\/bad: Annotation \\"networks\\"/);
  assert.equal((await portsOf(k, "bad")).length, 0);

  // kubelet deletes web: DEL, then the object goes. Nothing is left on the node or the manager.
  const del = await web.cni.del();
  assert.equal(del.code, 0, JSON.stringify(del.out));
  k.api.delete("pods", "acme", "web");
  assert.equal((await portsOf(k, "web")).length, 0);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });

  // A pod whose node never ran DEL (a lost node): the monitor releases its ports.
  const lost = await k.pod(n1, { namespace: "acme", name: "lost" });
  assert.equal((await lost.cni.add()).code, 0);
  assert.equal((await portsOf(k, "lost")).length, 1);
  k.api.delete("pods", "acme", "lost");
  await eventually(
    "lost's port released",
    async () => (await portsOf(k, "lost")).length === 0 ? true : undefined,
  );
});

Deno.test("stand-in API server: a StatefulSet pod recreated on another node keeps its addresses, from an IP group too", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "db", "10.60.0.0/24");
  k.api.create("ipgroups", {
    metadata: { name: "dbs", namespace: "acme" },
    spec: { network: "db", size: 3 },
  });
  await eventually(
    "IP group ready",
    () => k.api.get("ipgroups", "acme", "dbs")?.status?.size === 3 ? true : undefined,
  );
  const annotations = {
    "knitter.io/stable-address": "true",
    networks: JSON.stringify({
      ports: [
        { attach_to_network: "pods", attributes: { nic_name: "eth0" } },
        { attach_to_network: "db", attributes: { nic_name: "eth1", ip_group_name: "dbs" } },
      ],
    }),
  };

  const first = await k.pod(n1, {
    namespace: "acme",
    name: "db-0",
    owner: "StatefulSet",
    annotations,
  });
  const a = await first.cni.add();
  assert.equal(a.code, 0, JSON.stringify(a.out));
  const eth0 = addressOf(a.out, "eth0");
  const eth1 = addressOf(a.out, "eth1");

  // kubelet recreates the sandbox before the old one's DEL: the stable addresses stay the old
  // sandbox's until then, so the new one is told to retry (11), and nothing of the old one goes.
  const sandbox = {
    ...first.cni.attachment(),
    containerId: crypto.randomUUID().replaceAll("-", ""),
    netns: await addPodNetns(n1.sim, "db-0-new"),
  };
  const early = await first.cni.runtime.add(KUBE_CONFLIST, sandbox);
  assert.equal(early.out?.code, 11, JSON.stringify(early.out));
  assert.match(early.out.msg, new RegExp(`held by container ${first.cni.containerId}`));
  assert.deepEqual((await portsOf(k, "db-0")).map((p) => p.ip).sort(), [eth0, eth1].sort());
  const still = await run([
    "ip",
    "-n",
    ipNetnsName(first.cni.netns),
    "-br",
    "addr",
    "show",
    "eth1",
  ]);
  assert.match(still.stdout, new RegExp(eth1.replaceAll(".", "\\.")), "the old sandbox keeps eth1");
  // Once the old sandbox is deleted, the new one gets the same addresses.
  assert.equal((await first.cni.del()).code, 0);
  const late = await first.cni.runtime.add(KUBE_CONFLIST, sandbox);
  assert.equal(late.code, 0, JSON.stringify(late.out));
  assert.deepEqual([addressOf(late.out, "eth0"), addressOf(late.out, "eth1")], [eth0, eth1]);
  assert.equal((await first.cni.runtime.del(KUBE_CONFLIST, sandbox)).code, 0);

  // Deleted as kubelet does: DEL leaves the stable ports, the monitor unbinds them from the pod.
  assert.equal((await first.cni.del()).code, 0);
  k.api.delete("pods", "acme", "db-0");
  const held = await eventually("stable ports unbound, addresses kept", async () => {
    const all = (await k.stack.api("GET", "ports?tenant=acme")).body.items.filter((
      p: { id: string },
    ) => p.id.startsWith("stable:acme:db-0-"));
    return all.length === 2 && all.every((p: { pod?: unknown; node?: string }) => !p.pod && !p.node)
      ? all
      : undefined;
  });
  assert.deepEqual(held.map((p: { ip: string }) => p.ip).sort(), [eth0, eth1].sort());

  const second = await k.pod(n2, {
    namespace: "acme",
    name: "db-0",
    owner: "StatefulSet",
    annotations,
  });
  assert.notEqual(second.obj.metadata.uid, first.obj.metadata.uid);
  const b = await second.cni.add();
  assert.equal(b.code, 0, JSON.stringify(b.out));
  assert.equal(addressOf(b.out, "eth0"), eth0);
  assert.equal(addressOf(b.out, "eth1"), eth1);
  const status = await statusOf(k, "db-0", 2);
  assert.deepEqual(status.map((s: { ips: string[] }) => s.ips[0]), [eth0, eth1]);
  await k.monitor!.idle();
  const ports = (await k.stack.api("GET", "ports?pod=acme/db-0")).body.items;
  assert.deepEqual(
    ports.map((p: { node: string; pod: { uid: string } }) => [p.node, p.pod.uid]),
    [["n2", second.obj.metadata.uid], ["n2", second.obj.metadata.uid]],
  );
});
