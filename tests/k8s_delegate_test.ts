/**
 * Delegated interfaces from a pod's annotation, against the stand-in API server: a Network
 * resource with `dataPlane: external` and a delegate (macvlan on master data0); a pod whose
 * annotation names it gets eth0 on Knitter's switch and net1 from the reference macvlan plugin,
 * which the agent runs with the knitter IPAM, from kubelet's one CNI call to knitter. Two such pods
 * on two simulated nodes exchange TCP and UDP over the macvlans on a shared underlay bridge; DEL
 * leaves nothing; a delegate naming a master the node does not have fails the ADD saying so, and
 * leaves nothing either. A host-device delegate moves a node's device into the pod and back. (No
 * ipvlan: this machine's kernel has none.)
 */
import assert from "node:assert/strict";
import { type NetworkDelegate, run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { createUnderlay } from "../devstack/sim_node.ts";
import type { StackNode } from "../devstack/stack.ts";
import {
  eventually,
  type KubeCluster,
  networkReady,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { leftovers } from "./support/leftovers.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const ANNOTATION = "k8s.v1.cni.cncf.io/networks";
const STATUS = "k8s.v1.cni.cncf.io/network-status";

/** The data plane's underlay: a bridge, and one veth to each node, `data0` there. */
async function dataUnderlay(cleanup: Cleanup, nodes: StackNode[]): Promise<void> {
  const wire = await createUnderlay(cleanup, { name: "dg" });
  for (const node of nodes) {
    await run(["ip", "-n", wire.netns, "-batch", "-"], {
      stdin: `link add g-${node.name} type veth peer name data0 netns ${node.sim.netnsPath}\n` +
        `link set g-${node.name} master ${wire.bridge} up\n`,
    });
    await run(["ip", "-n", node.sim.netns, "link", "set", "data0", "up"]);
  }
}

/** A cluster of `nodes` whose namespace acme (trusted with delegates) has these external networks. */
async function clusterWith(
  cleanup: Cleanup,
  nodes: string[],
  networks: [name: string, cidr: string, delegate: NetworkDelegate][],
): Promise<KubeCluster> {
  const k = await startKubeCluster({ cleanup, nodes, monitor: { nodeReachNamespaces: ["acme"] } });
  await k.startMonitor();
  k.namespace("acme");
  for (const [name, cidr, delegate] of networks) {
    await networkReady(k, name, cidr, { dataPlane: "external", delegate });
  }
  return k;
}

async function portsOf(k: KubeCluster, pod: string): Promise<{ interface: string; ip: string }[]> {
  return (await k.stack.api("GET", `ports?pod=acme/${pod}`)).body.items;
}

async function links(netns: string): Promise<string> {
  return (await run(["ip", "-n", ipNetnsName(netns), "-o", "link", "show"])).stdout;
}

Deno.test("stand-in API server: pods on two nodes get eth0 on Knitter's switch and net1 through their network's delegated macvlan, exchange TCP and UDP over it; DEL leaves nothing", async () => {
  await using cleanup = new Cleanup();
  const k = await clusterWith(cleanup, ["n1", "n2"], [
    ["data", "10.54.0.0/24", { plugin: "macvlan", master: "data0", mode: "bridge" }],
  ]);
  const [n1, n2] = k.stack.nodes;
  await dataUnderlay(cleanup, k.stack.nodes);

  const pods = [];
  for (const [name, node] of [["a", n1], ["b", n2]] as const) {
    const pod = await k.pod(node, {
      namespace: "acme",
      name,
      annotations: { [ANNOTATION]: "data" },
    });
    const added = await pod.cni.add();
    assert.equal(added.code, 0, `ADD ${name}: ${JSON.stringify(added.out)} ${added.stderr}`);
    const ports = await portsOf(k, name);
    const net1 = ports.find((p) => p.interface === "net1");
    assert.ok(net1, `a port for net1 of ${name}: ${JSON.stringify(ports)}`);
    assert.equal(addressOf(added.out, "net1"), net1.ip, "the result's net1 is the manager's port");
    assert.match(addressOf(added.out, "eth0"), /^10\.244\.0\.\d+$/);
    const net1Link = await run(
      ["ip", "-n", ipNetnsName(pod.cni.netns), "-d", "-o", "link", "show", "dev", "net1"],
    );
    assert.match(net1Link.stdout, /macvlan mode bridge/, "net1 is the delegate's macvlan");
    pods.push({ pod, ip: net1.ip });
  }
  // The monitor's network-status names both, net1 with the manager's address.
  const status = await eventually("a's network-status", () => {
    const text = k.api.get("pods", "acme", "a")?.metadata.annotations?.[STATUS];
    const list = text ? JSON.parse(text) as { interface: string; ips: string[] }[] : [];
    return list.length === 2 ? list : undefined;
  });
  assert.deepEqual(status.map((s) => s.interface), ["eth0", "net1"]);
  assert.deepEqual(status[1].ips, [pods[0].ip]);
  // kubelet retrying the ADD gets the same answer; nothing more is made.
  const again = await pods[0].pod.cni.add();
  assert.equal(again.code, 0, JSON.stringify(again.out));
  assert.equal(addressOf(again.out, "net1"), pods[0].ip);
  assert.equal((await portsOf(k, "a")).length, 2, "eth0's port and net1's, once each");
  // Only eth0 is Knitter's on the switch: net1 is the macvlan's.
  for (const node of [n1, n2]) {
    assert.equal((await leftovers(node)).ovsPorts.length, 1, `one OVS port on ${node.name}`);
  }
  const [na, nb] = pods.map((p) => ipNetnsName(p.pod.cni.netns));
  const tcp = await tcpExchange(cleanup, na, nb, pods[1].ip, 256 * 1024);
  assert.ok(tcp.ok, `TCP over the delegated macvlan: ${JSON.stringify(tcp)}`);
  const udp = await udpExchange(cleanup, nb, na, pods[0].ip, [1, 512, 1400]);
  assert.ok(udp.ok, `UDP over the delegated macvlan: ${JSON.stringify(udp)}`);

  const checked = await pods[0].pod.cni.check();
  assert.equal(checked.code, 0, `CHECK: ${JSON.stringify(checked.out)}`);

  for (const { pod } of pods) {
    const del = await pod.cni.del();
    assert.equal(del.code, 0, `DEL: ${JSON.stringify(del.out)} ${del.stderr}`);
    assert.equal((await portsOf(k, pod.obj.metadata.name)).length, 0, "no port left");
    assert.doesNotMatch(await links(pod.cni.netns), /net1|eth0/, "no interface left in the pod");
  }
  for (const node of [n1, n2]) {
    assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
  }
});

Deno.test("stand-in API server: a delegate naming a master the node does not have fails the pod's ADD saying so, and leaves nothing, not even the delegate made before it", async () => {
  await using cleanup = new Cleanup();
  // net1's delegate works (its master is there), net2's does not: net1 must go again.
  const k = await clusterWith(cleanup, ["n1"], [
    ["data", "10.55.0.0/24", { plugin: "macvlan", master: "nope0", mode: "bridge" }],
    ["good", "10.56.0.0/24", { plugin: "macvlan", master: "data0", mode: "bridge" }],
  ]);
  const [n1] = k.stack.nodes;
  await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
    stdin: "link add data0 type veth peer name data0p\nlink set data0p up\nlink set data0 up\n",
  });
  const pod = await k.pod(n1, {
    namespace: "acme",
    name: "a",
    annotations: { [ANNOTATION]: "good,data" },
  });
  const added = await pod.cni.add();
  assert.notEqual(added.code, 0, "the ADD fails");
  assert.match(
    added.out.msg,
    /Network "data": ADD of net2 by its delegate, the macvlan plugin on master "nope0", failed on node n1/,
  );
  assert.match(added.out.details, /check that node n1 has it/);
  assert.equal((await portsOf(k, "a")).length, 0, "no port left, eth0's neither");
  assert.doesNotMatch(await links(pod.cni.netns), /net1|net2|eth0/, "no interface left in the pod");
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
  // kubelet's DEL after a failed ADD succeeds.
  const del = await pod.cni.del();
  assert.equal(del.code, 0, JSON.stringify(del.out));
});

Deno.test("stand-in API server: a host-device delegate moves the node's device into the pod as net1 with the manager's address, and DEL gives it back", async () => {
  await using cleanup = new Cleanup();
  const k = await clusterWith(cleanup, ["n1"], [
    ["dev", "10.57.0.0/24", { plugin: "host-device", device: "hd0" }],
  ]);
  const [n1] = k.stack.nodes;
  await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
    stdin: "link add hd0 type veth peer name hd0p\n",
  });
  const pod = await k.pod(n1, {
    namespace: "acme",
    name: "a",
    annotations: { [ANNOTATION]: "dev" },
  });
  const added = await pod.cni.add();
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const net1 = (await portsOf(k, "a")).find((p) => p.interface === "net1");
  assert.ok(net1, "a port for net1");
  assert.equal(addressOf(added.out, "net1"), net1.ip);
  const inPod = await run(["ip", "-n", ipNetnsName(pod.cni.netns), "-o", "addr", "show", "net1"]);
  assert.match(inPod.stdout, new RegExp(`inet ${net1.ip.replaceAll(".", "\\.")}/24`));
  const onNode = await run(["ip", "-n", n1.sim.netns, "link", "show", "hd0"], { check: false });
  assert.notEqual(onNode.code, 0, "hd0 left the node for the pod");

  const del = await pod.cni.del();
  assert.equal(del.code, 0, `DEL: ${JSON.stringify(del.out)} ${del.stderr}`);
  assert.equal((await portsOf(k, "a")).length, 0, "no port left");
  await run(["ip", "-n", n1.sim.netns, "link", "show", "hd0"]);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
});
