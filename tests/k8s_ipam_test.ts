/**
 * Knitter as the IPAM of a Multus NetworkAttachmentDefinition, against the stand-in API server: a
 * Network resource with `dataPlane: external` makes the network, Multus runs the NAD's macvlan
 * for the pod's net1, macvlan runs knitter as its IPAM, the agent reads the pod (tenant: its
 * namespace) and the manager's port is bound to it; the monitor's network-status names net1 with
 * that address; DEL leaves nothing.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { eventually, networkReady, startKubeCluster } from "./support/kube_cluster.ts";
import { leftovers } from "./support/leftovers.ts";
import { addressOf } from "./support/pods.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";

Deno.test("stand-in API server: a NAD's macvlan with the knitter IPAM gets the address of the pod's port in its namespace's external network, and network-status names it", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "data", "10.53.0.0/24", { dataPlane: "external" });
  const made = await k.stack.api("GET", "tenants/acme/networks/data");
  assert.equal(made.body.dataPlane, "external", "the resource's dataPlane reached the manager");
  await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
    stdin: "link add data0 type veth peer name data0p\nlink set data0p up\nlink set data0 up\n",
  });
  const pod = await k.pod(n1, {
    namespace: "acme",
    name: "mv",
    annotations: { "k8s.v1.cni.cncf.io/networks": "data" },
  });
  // Multus' delegate call for the NAD "data": its config is macvlan's, with knitter as the IPAM.
  const nad = {
    cniVersion: "1.0.0",
    name: "data",
    plugins: [{
      type: "macvlan",
      master: "data0",
      mode: "bridge",
      ipam: { type: "knitter", network: "data" },
    }],
  };
  const att = { ...pod.cni.attachment(), ifName: "net1" };
  const added = await pod.cni.runtime.add(nad, att);
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const ip = addressOf(added.out, "net1");
  const ports = (await k.stack.api("GET", "ports?pod=acme/mv")).body.items;
  assert.deepEqual(
    ports.map((p: { tenant: string; interface: string; ip: string }) => [
      p.tenant,
      p.interface,
      p.ip,
    ]),
    [["acme", "net1", ip]],
    "one port, in the pod's namespace's tenant, bound to the pod's net1",
  );
  const status = await eventually("the pod's network-status", () => {
    const text = k.api.get("pods", "acme", "mv")?.metadata.annotations?.[STATUS];
    return text ? JSON.parse(text) as { interface: string; ips: string[] }[] : undefined;
  });
  assert.deepEqual(status.map((s) => [s.interface, s.ips]), [["net1", [ip]]]);

  const deleted = await pod.cni.runtime.del(nad, att);
  assert.equal(deleted.code, 0, `DEL: ${JSON.stringify(deleted.out)} ${deleted.stderr}`);
  assert.equal((await k.stack.api("GET", "ports?pod=acme/mv")).body.items.length, 0);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
});

Deno.test("stand-in API server: a NAD naming another tenant (knitter's own config or the knitter IPAM's) never reaches that tenant's private network", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  for (const tenant of ["acme", "globex"]) {
    assert.ok([201, 409].includes((await k.stack.api("POST", "tenants", { name: tenant })).status));
  }
  const globex = [["secret", "ovs", "10.54.0.0/24"], ["vault", "external", "10.55.0.0/24"]];
  for (const [name, dataPlane, cidr] of globex) {
    const r = await k.stack.api("POST", "tenants/globex/networks", { name, cidr, dataPlane });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
    stdin: "link add data0 type veth peer name data0p\nlink set data0p up\nlink set data0 up\n",
  });
  const pod = await k.pod(n1, { namespace: "acme", name: "spy" });
  const nads = [
    { type: "knitter", tenant: "globex", network: "secret" },
    {
      type: "macvlan",
      master: "data0",
      ipam: { type: "knitter", tenant: "globex", network: "vault" },
    },
    {
      type: "macvlan",
      master: "data0",
      tenant: "globex",
      ipam: { type: "knitter", network: "vault" },
    },
  ];
  for (const plugin of nads) {
    const nad = { cniVersion: "1.0.0", name: "steal", plugins: [plugin] };
    const att = { ...pod.cni.attachment(), ifName: "net1" };
    const r = await pod.cni.runtime.add(nad, att);
    assert.equal(r.code, 1, `refused: ${JSON.stringify(plugin)}: ${JSON.stringify(r.out)}`);
    assert.equal(r.out.code, 7, JSON.stringify(r.out));
    // The manager refuses: a node's token binds a port of tenant T only to a pod of namespace T.
    assert.match(r.out.msg, /tenant "globex" only to a pod of namespace "globex".*not "acme"/);
    await pod.cni.runtime.del(nad, att);
  }
  for (const name of ["secret", "vault"]) {
    assert.deepEqual(
      (await k.stack.api("GET", `tenants/globex/networks/${name}/ports`)).body.items,
      [],
    );
  }
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
});
