/**
 * One manager, two Kubernetes clusters (issue 18), end to end: each cluster has its own stand-in
 * API server, monitor (with its cluster's monitor token) and two simulated nodes with real Open
 * vSwitch, whose agents hold node tokens of their cluster. Pods of the same name in both; one
 * tenant network spans both clusters over VXLAN, another tenant's stays apart.
 */
import assert from "node:assert/strict";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack } from "../devstack/stack.ts";
import { eventually, type KubeCluster, startKubeCluster } from "./support/kube_cluster.ts";
import { addressOf } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const NETS = "k8s.v1.cni.cncf.io/networks";
/** acme's network in both clusters, and globex's in east only, on the same addresses. */
const onRed = (ip: string) => JSON.stringify([{ name: "red", ips: [`${ip}/24`] }]);
const BLUE = { name: "blue", cidr: "10.60.0.0/24", gateway: "10.60.0.1" };
const RED = { name: "red", cidr: "10.60.0.0/24", gateway: "10.60.0.1" };

async function managerCall(
  url: string,
  token: string,
  method: string,
  path: string,
): Promise<{ status: number; body: { error?: { message: string } } }> {
  const r = await fetch(`${url}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}` },
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : {} };
}

/** The manager's ports of pod acme/web of one cluster, as an admin names them. */
async function webPorts(k: KubeCluster, cluster: string): Promise<{ id: string; ip: string }[]> {
  return (await k.stack.api("GET", `ports?pod=acme@${cluster}/web`)).body.items;
}

Deno.test("e2e multicluster: one manager, two clusters; a tenant network spans them, tenants and clusters stay apart", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["a1", "a2", "b1", "b2"],
    clusters: [
      { name: "east", nodes: ["a1", "a2"], tenants: ["acme", "globex"], networks: ["admin/pods"] },
      { name: "west", nodes: ["b1", "b2"], tenants: ["acme"], networks: ["admin/pods"] },
    ],
  });
  const east = await startKubeCluster({
    cleanup,
    nodes: ["a1", "a2"],
    of: { stack, cluster: "east" },
  });
  const west = await startKubeCluster({
    cleanup,
    nodes: ["b1", "b2"],
    of: { stack, cluster: "west" },
  });
  const [a1, a2, b1, b2] = stack.nodes;
  await east.startMonitor();
  await west.startMonitor();
  for (const k of [east, west]) k.namespace("acme");
  east.namespace("globex");
  for (const [tenant, net] of [["acme", BLUE], ["globex", RED]] as const) {
    await eventually(
      `tenant ${tenant}`,
      async () => (await stack.api("GET", `tenants/${tenant}`)).status === 200 ? true : undefined,
    );
    const r = await stack.api("POST", `tenants/${tenant}/networks`, net);
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }

  // acme/web in each cluster (the same name), on blue; globex/spy in east, on red.
  const eastWeb = await east.pod(a1, {
    namespace: "acme",
    name: "web",
    annotations: { [NETS]: "blue" },
  });
  const westWeb = await west.pod(b1, {
    namespace: "acme",
    name: "web",
    annotations: { [NETS]: "blue" },
  });
  const spy = await east.pod(a2, {
    namespace: "globex",
    name: "spy",
    annotations: { [NETS]: onRed("10.60.0.200") },
  });
  const peer = await east.pod(a1, {
    namespace: "globex",
    name: "peer",
    annotations: { [NETS]: onRed("10.60.0.201") },
  });
  const ip: Record<string, string> = {};
  const pods = [["east", eastWeb], ["west", westWeb], ["spy", spy], ["peer", peer]] as const;
  for (const [label, pod] of pods) {
    const r = await pod.cni.add();
    assert.equal(r.code, 0, `ADD ${label}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ip[label] = addressOf(r.out, "net1");
  }
  assert.notEqual(ip.east, ip.west, "the two pods named acme/web hold two addresses of blue");

  await t.step("pods named alike in two clusters are two pods at the manager", async () => {
    const [e] = await webPorts(east, "east").then((ps) => ps.filter((p) => p.ip === ip.east));
    const [w] = await webPorts(west, "west").then((ps) => ps.filter((p) => p.ip === ip.west));
    assert.ok(e && w, "each cluster's acme/web has its blue port");
  });

  await t.step("blue spans the clusters: TCP and UDP between the two webs", async () => {
    // Through the tunnel between the two clusters' nodes, as the feed told each agent.
    for (const [from, to] of [[a1, b1], [b1, a1]]) {
      const flows = await new Ovs(from.sim.ovs).dumpFlows("br-int");
      assert.ok(
        flows.some((f) => f.includes(`${to.sim.underlayIp}->tun_dst`)),
        `${from.name} tunnels to ${to.name} (${to.sim.underlayIp}), of the other cluster`,
      );
    }
    const ok = (x: { ok: boolean; error?: string }, what: string) =>
      assert.ok(x.ok, `${what}: ${x.error}`);
    ok(
      await tcpExchange(cleanup, eastWeb.cni.netns, westWeb.cni.netns, ip.west, 64 * 1024),
      "TCP east -> west",
    );
    ok(
      await tcpExchange(cleanup, westWeb.cni.netns, eastWeb.cni.netns, ip.east, 64 * 1024),
      "TCP west -> east",
    );
    ok(
      await udpExchange(cleanup, westWeb.cni.netns, eastWeb.cni.netns, ip.east, [1, 512, 1400]),
      "UDP west -> east",
    );
  });

  await t.step("globex's red, on the same addresses, reaches neither web", async () => {
    assert.equal(ip.spy, "10.60.0.200");
    const own = await tcpExchange(cleanup, spy.cni.netns, peer.cni.netns, ip.peer, 4096);
    assert.ok(own.ok, `spy reaches its own network's peer: ${own.error}`);
    for (
      const [label, to, addr] of [["east", eastWeb, ip.east], ["west", westWeb, ip.west]] as const
    ) {
      const x = await tcpExchange(cleanup, spy.cni.netns, to.cni.netns, addr, 1024, { seconds: 4 });
      assert.ok(!x.ok, `spy must not reach ${label}'s web (${addr}) over red`);
    }
  });

  await t.step(
    "east's monitor token cannot release west's web (refused, the port stays)",
    async () => {
      const [port] = (await webPorts(west, "west")).filter((p) => p.ip === ip.west);
      const path = `tenants/acme/networks/blue/ports`;
      const token = stack.monitorTokens.east;
      const bare = port.id.replace(/@west$/, "");
      const asEast = await managerCall(stack.managerUrl, token, "DELETE", `${path}/${bare}`);
      assert.equal(asEast.status, 404, JSON.stringify(asEast.body));
      const named = await managerCall(stack.managerUrl, token, "DELETE", `${path}/${port.id}`);
      assert.equal(named.status, 403, JSON.stringify(named.body));
      assert.match(named.body.error!.message, /own cluster/);
      assert.ok(
        (await webPorts(west, "west")).some((p) => p.ip === ip.west),
        "west's port is there",
      );
      const x = await tcpExchange(cleanup, eastWeb.cni.netns, westWeb.cni.netns, ip.west, 4096);
      assert.ok(x.ok, `still reachable: ${x.error}`);
    },
  );

  await t.step("west's web goes in west only: east's web keeps its address", async () => {
    // A pod of the same name deleted in the other cluster is no business of east's monitor.
    const eastBefore = await webPorts(east, "east");
    west.api.delete("pods", "acme", "web");
    await eventually(
      "west's web released by west's monitor",
      async () => (await webPorts(west, "west")).length === 0 ? true : undefined,
    );
    assert.deepEqual(await webPorts(east, "east"), eastBefore);
    assert.equal((await westWeb.cni.del()).code, 0);
  });

  await t.step(
    "a cluster with ports cannot be deleted; without, it goes with its nodes",
    async () => {
      // A new acme/web on b2 holds a port of the default network.
      const held = await west.pod(b2, { namespace: "acme", name: "web" });
      assert.equal((await held.cni.add()).code, 0);
      const refused = await stack.api("DELETE", "clusters/west");
      assert.equal(refused.status, 409, JSON.stringify(refused.body));
      assert.match(refused.body.error.message, /still has 1 port/);
      assert.equal((await held.cni.del()).code, 0);
      west.api.delete("pods", "acme", "web");
      await west.stopMonitor();
      const gone = await stack.api("DELETE", "clusters/west");
      assert.equal(gone.status, 204, JSON.stringify(gone.body));
      const nodes = (await stack.api("GET", "nodes")).body.items.map((n: { name: string }) =>
        n.name
      );
      assert.deepEqual(nodes.sort(), ["a1@east", "a2@east"]);
      const cut = await managerCall(stack.managerUrl, stack.monitorTokens.west, "GET", "ports");
      assert.equal(cut.status, 403, "west's tokens reach nothing once it is gone");
      assert.equal((await eastWeb.cni.del()).code, 0);
      for (const pod of [spy, peer]) assert.equal((await pod.cni.del()).code, 0);
    },
  );
});
