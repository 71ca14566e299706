/**
 * Hot-plug, against the stand-in API server driven by the real clients, on two simulated nodes
 * with real Open vSwitch: a change of a running pod's `k8s.v1.cni.cncf.io/networks` adds an
 * interface to the pod (TCP with a payload over it to a pod on the other node), removes it (the
 * port released at the manager), and waits for a node agent that is down (the monitor says so in
 * an event) to do it once it is back; network-status follows each change.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import type { KubeObject } from "./support/kube_api.ts";
import {
  eventually,
  type KubeCluster,
  networkReady,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { leftovers } from "./support/leftovers.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";
import { tcpExchange } from "./support/traffic.ts";

const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const STATUS = "k8s.v1.cni.cncf.io/network-status";

function setNetworks(k: KubeCluster, name: string, value: string | undefined): void {
  k.api.update("pods", "acme", name, (o) => {
    o.metadata.annotations ??= {};
    if (value === undefined) delete o.metadata.annotations[NETWORKS];
    else o.metadata.annotations[NETWORKS] = value;
  });
}

/** The pod's network-status as the monitor wrote it, once it names exactly `ifNames`. */
function statusNaming(k: KubeCluster, name: string, ifNames: string[]) {
  return eventually(`network-status of ${name} naming ${ifNames}`, () => {
    const v = k.api.get("pods", "acme", name)?.metadata.annotations?.[STATUS];
    const status = v ? JSON.parse(v) as { interface: string; ips: string[] }[] : [];
    const named = status.map((s) => s.interface).sort();
    return JSON.stringify(named) === JSON.stringify([...ifNames].sort()) ? status : undefined;
  });
}

/** The IPv4 address of `ifName` in `netns`, once it is there. */
function addressIn(netns: string, ifName: string): Promise<string> {
  return eventually(`${ifName} in ${netns}`, async () => {
    const r = await run(["ip", "-n", netns, "-j", "-4", "addr", "show", "dev", ifName], {
      check: false,
    });
    if (r.code !== 0) return undefined;
    return JSON.parse(r.stdout)[0]?.addr_info?.[0]?.local as string | undefined;
  });
}

async function linkNames(netns: string): Promise<string[]> {
  const out = JSON.parse((await run(["ip", "-n", netns, "-j", "link", "show"])).stdout);
  return out.map((l: { ifname: string }) => l.ifname).sort();
}

function events(k: KubeCluster, name: string, reason: string): KubeObject[] {
  return k.api.list("events", "acme").filter((e) =>
    e.involvedObject.name === name && e.reason === reason
  );
}

async function portsOf(k: KubeCluster, name: string) {
  const items = (await k.stack.api("GET", `ports?pod=acme/${name}`)).body.items;
  return (items as { interface: string; network: string; ip: string }[])
    .map((p) => `${p.interface} ${p.network} ${p.ip}`).sort();
}

Deno.test("stand-in API server: hot-plug adds an interface to a running pod (TCP over it to another node), removes it (port released), and waits for a node agent that is down", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({
    cleanup,
    nodes: ["n1", "n2"],
    monitor: { hotplugPendingSeconds: 1 },
  });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "data", "10.61.0.0/24");

  // web starts with eth0 only; peer, on the other node, with net1 on data.
  const web = await k.pod(n1, { namespace: "acme", name: "web" });
  const peer = await k.pod(n2, {
    namespace: "acme",
    name: "peer",
    annotations: { [NETWORKS]: "data" },
  });
  const added = [];
  for (const p of [web, peer]) {
    const r = await p.cni.add();
    assert.equal(r.code, 0, `ADD ${p.cni.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    added.push(r);
  }
  const peerData = addressOf(added[1].out, "net1");
  const webNetns = ipNetnsName(web.cni.netns);
  const peerNetns = ipNetnsName(peer.cni.netns);
  await statusNaming(k, "web", ["eth0"]);

  // Added: net1 appears in the running pod, carries TCP to peer, and network-status names it.
  setNetworks(k, "web", "data");
  const webData = await addressIn(webNetns, "net1");
  assert.match(webData, /^10\.61\.0\.\d+$/);
  const tcp = await tcpExchange(cleanup, webNetns, peerNetns, peerData, 1 << 20);
  assert.ok(tcp.ok, `TCP over the hot-plugged net1: ${tcp.error}`);
  const status = await statusNaming(k, "web", ["eth0", "net1"]);
  assert.deepEqual(status.find((s) => s.interface === "net1")?.ips, [webData]);
  assert.ok(events(k, "web", "KnitterHotplugAttached").length >= 1, "an event says it was added");
  const withNet1 = await portsOf(k, "web");
  assert.ok(withNet1.includes(`net1 data ${webData}`), JSON.stringify(withNet1));

  // Removed: net1 goes from the pod, its port is released at the manager, the status follows.
  setNetworks(k, "web", undefined);
  await statusNaming(k, "web", ["eth0"]);
  await eventually(
    "net1 gone from web",
    async () => (await linkNames(webNetns)).includes("net1") ? undefined : true,
  );
  assert.deepEqual((await portsOf(k, "web")).filter((p) => p.startsWith("net1")), []);
  const port = await k.stack.api("GET", "tenants/acme/networks/data/ports");
  assert.ok(
    !port.body.items.some((p: { ip: string }) => p.ip === webData),
    "the address is no longer held by a port",
  );

  // The agent down: the monitor says the pod waits for it; once back, the agent does it.
  await n1.stopAgent();
  setNetworks(k, "web", "data@net5");
  const pending = await eventually(
    "the monitor's event on web",
    () => events(k, "web", "KnitterHotplugPending")[0],
  );
  assert.equal(pending.type, "Warning");
  assert.match(pending.message, /net5.*network data.*agent on node n1/);
  assert.ok(!(await linkNames(webNetns)).includes("net5"));
  await n1.startAgent();
  const again = await addressIn(webNetns, "net5");
  await statusNaming(k, "web", ["eth0", "net5"]);
  const tcpAgain = await tcpExchange(cleanup, webNetns, peerNetns, peerData, 64 << 10);
  assert.ok(tcpAgain.ok, `TCP over net5 (${again}) after the agent's return: ${tcpAgain.error}`);

  // Another namespace's private network is another tenant's: never found, nothing attached.
  k.namespace("rival");
  k.api.create("networks", {
    metadata: { name: "secret", namespace: "rival" },
    spec: { cidr: "10.63.0.0/24", gateway: "10.63.0.1" },
  });
  await eventually(
    "network rival/secret ready",
    () => k.api.get("networks", "rival", "secret")?.status?.conditions?.[0]?.status === "True",
  );
  setNetworks(k, "web", "data@net5,rival/secret@net9");
  const refused = await eventually(
    "the agent's refusal of rival/secret",
    () => events(k, "web", "KnitterHotplugFailed").find((e) => /net9/.test(e.message)),
  );
  assert.match(
    refused.message,
    /cannot add net9 on network secret: .*does not exist in tenant "acme"/,
  );
  assert.deepEqual(await linkNames(webNetns), ["eth0", "lo", "net5"]);
  const secret = await k.stack.api("GET", "tenants/rival/networks/secret/ports");
  assert.deepEqual(secret.body.items, [], "no port in the other tenant's network");

  // A network that does not exist yet: refused by the manager, nothing half-made, told in an
  // event, and retried until the network is there.
  setNetworks(k, "web", "data@net5,voice");
  const failed = await eventually(
    "the agent's event on web",
    () => events(k, "web", "KnitterHotplugFailed").find((e) => /voice/.test(e.message)),
  );
  assert.equal(failed.type, "Warning");
  assert.match(failed.message, /cannot add net1 on network voice: .*voice.*\(retried\)/);
  assert.deepEqual(await linkNames(webNetns), ["eth0", "lo", "net5"]);
  await networkReady(k, "voice", "10.62.0.0/24");
  assert.match(await addressIn(webNetns, "net1"), /^10\.62\.0\.\d+$/);
  await statusNaming(k, "web", ["eth0", "net1", "net5"]);

  // Edits in quick succession: the pod ends as the last one asks.
  setNetworks(k, "web", "data@net5");
  setNetworks(k, "web", "data@net5,voice@net7");
  setNetworks(k, "web", "voice@net7");
  await statusNaming(k, "web", ["eth0", "net7"]);
  await eventually("web as the last edit asks", async () => {
    const names = await linkNames(webNetns);
    return JSON.stringify(names) === JSON.stringify(["eth0", "lo", "net7"]) ? true : undefined;
  });
  assert.deepEqual(
    (await portsOf(k, "web")).map((p) => p.split(" ").slice(0, 2).join(" ")),
    ["eth0 pods", "net7 voice"],
  );

  // The pod deleted: its DEL and the agent leave nothing of it, hot-plugged interface included.
  assert.equal((await web.cni.del()).code, 0);
  k.api.delete("pods", "acme", "web");
  assert.equal((await peer.cni.del()).code, 0);
  k.api.delete("pods", "acme", "peer");
  for (const n of [n1, n2]) {
    await eventually(`nothing left on ${n.name}`, async () => {
      const left = await leftovers(n);
      return left.ovsPorts.length + left.veths.length + left.journal.length === 0
        ? true
        : undefined;
    });
  }
  assert.deepEqual(await portsOf(k, "web"), []);
});
