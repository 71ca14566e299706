/**
 * Knitter as the IPAM of the reference plugins (macvlan and host-device from Debian's
 * containernetworking-plugins): pods on two simulated nodes have eth0 on Knitter's switch and net1
 * made by the other plugin on a shared underlay (a Linux bridge, each node's link to it as the
 * master), addressed by the manager through the node's agent. ipvlan is not here: this machine's
 * kernel has no ipvlan (nor 8021q, so the VLAN the network documents is not tagged on the bridge).
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { createUnderlay } from "../devstack/sim_node.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import type { CniCall, ConfList } from "./support/cni_runtime.ts";
import { journal, leftovers } from "./support/leftovers.ts";
import { addressOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const DATA_IF = "net1";

/** A conflist of one reference plugin with the knitter IPAM on network `network`. */
function delegated(
  plugin: Record<string, unknown>,
  ipam: Record<string, unknown> = { network: "data" },
): ConfList {
  return {
    cniVersion: "1.0.0",
    name: "data",
    plugins: [{ ...plugin, ipam: { type: "knitter", ...ipam } }],
  };
}

async function create(stack: Stack, path: string, body: unknown) {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

interface DataPort {
  id: string;
  address: string;
  node?: string;
  interface?: string;
  networkDataPlane?: string;
}

async function dataPorts(stack: Stack, tenant = "acme", network = "data"): Promise<DataPort[]> {
  const r = await stack.api("GET", `tenants/${tenant}/networks/${network}/ports`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return Array.isArray(r.body) ? r.body : r.body.items;
}

/** The addresses of `ifName` inside the pod's netns, with prefix; none when it is missing. */
async function podAddresses(pod: Pod, ifName = DATA_IF): Promise<string[]> {
  const r = await run(["ip", "-n", ipNetnsName(pod.netns), "-j", "addr", "show", "dev", ifName], {
    check: false,
  });
  if (r.code !== 0) return [];
  const links = JSON.parse(r.stdout) as { addr_info: { local: string; prefixlen: number }[] }[];
  return links.flatMap((l) => l.addr_info).filter((a) => !a.local.startsWith("fe80"))
    .map((a) => `${a.local}/${a.prefixlen}`);
}

async function hasLink(pod: Pod, ifName = DATA_IF): Promise<boolean> {
  const r = await run(["ip", "-n", ipNetnsName(pod.netns), "link", "show", "dev", ifName], {
    check: false,
  });
  return r.code === 0;
}

/** The data plane's underlay: a bridge, one veth to each node (`data0` there), `hd0` for host-device. */
async function dataUnderlay(cleanup: Cleanup, nodes: StackNode[]) {
  const wire = await createUnderlay(cleanup, { name: "dp" });
  for (const node of nodes) {
    const at = node.sim.netnsPath;
    await run(["ip", "-n", wire.netns, "-batch", "-"], {
      stdin: `link add d-${node.name} type veth peer name data0 netns ${at}\n` +
        `link set d-${node.name} master ${wire.bridge} up\n` +
        `link add h-${node.name} type veth peer name hd0 netns ${at}\n` +
        `link set h-${node.name} master ${wire.bridge} up\n`,
    });
    await run(["ip", "-n", node.sim.netns, "link", "set", "data0", "up"]);
  }
  return wire;
}

/** A pod with eth0 on `control` (knitter) and net1 through `list` (the other plugin). */
async function podOn(node: StackNode, name: string, list: ConfList) {
  const pod = await makePod(node, name, "acme", knitterList(["control"]));
  const att = () => ({ ...pod.attachment(), ifName: DATA_IF });
  const conf = { ...list.plugins[0], cniVersion: list.cniVersion, name: list.name };
  return {
    pod,
    /** The IPAM's DEL as the main plugin passes it on (host-device fails a DEL of its own again). */
    delIpam: () => pod.runtime.exec("DEL", att(), conf, {}, "knitter"),
    addData: () => pod.runtime.add(list, att()),
    delData: () => pod.runtime.del(list, att()),
    checkData: () => pod.runtime.check(list, att()),
    exec: (command: string, conf: Record<string, unknown>) =>
      pod.runtime.exec(command, att(), conf, {}, "knitter"),
  };
}

function ok(r: CniCall, what: string): void {
  assert.equal(r.code, 0, `${what}: ${JSON.stringify(r.out)} ${r.stderr}`);
}

/** The address (no prefix) an IPAM-carrying result gives the data interface. */
// deno-lint-ignore no-explicit-any
function dataAddress(result: any): string {
  return addressOf(result, DATA_IF);
}

Deno.test("e2e IPAM: macvlan and host-device pods on two nodes take net1's address from knitter, exchange TCP and UDP, eth0 on Knitter's switch; DEL and GC leave nothing", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await create(stack, "physnets", { name: "fabric", vlanRanges: [{ start: 300, end: 309 }] });
  await create(stack, "tenants", { name: "acme" });
  await create(stack, "tenants/acme/networks", {
    name: "control",
    cidr: "10.10.0.0/24",
    gateway: "10.10.0.1",
  });
  const data = await create(stack, "tenants/acme/networks", {
    name: "data",
    type: "vlan",
    physnet: "fabric",
    dataPlane: "external",
    cidr: "10.30.0.0/24",
    gateway: "10.30.0.1",
    routes: [{ dst: "10.31.0.0/16", via: "10.30.0.254" }],
  });
  assert.equal(data.dataPlane, "external");
  assert.ok(data.segmentId >= 300 && data.segmentId <= 309, "the manager owns its VLAN ID");
  // On a real fabric the master would be the VLAN sub-interface of segmentId (eth1.300).
  await dataUnderlay(cleanup, stack.nodes);

  const plugins: [string, () => Record<string, unknown>][] = [
    ["macvlan", () => ({ type: "macvlan", master: "data0", mode: "bridge" })],
    ["host-device", () => ({ type: "host-device", device: "hd0" })],
  ];
  for (const [kind, plugin] of plugins) {
    await t.step(`${kind}: addresses from the manager, TCP and UDP across nodes, DEL`, async () => {
      const a = await podOn(n1, `${kind.slice(0, 4)}a`, delegated(plugin()));
      const b = await podOn(n2, `${kind.slice(0, 4)}b`, delegated(plugin()));
      const ips: string[] = [];
      for (const p of [a, b]) {
        ok(await p.pod.add(), `ADD eth0 of ${p.pod.name}`);
        const r = await p.addData();
        ok(r, `ADD ${kind} net1 of ${p.pod.name}`);
        ips.push(dataAddress(r.out));
        // The route and gateway the network has, as the plugin configured them from our result.
        assert.deepEqual(
          r.out.routes,
          [{ dst: "10.31.0.0/16", gw: "10.30.0.254" }],
          "the network's route, and no default route through net1: eth0 keeps it",
        );
      }
      // The manager's ports are what the pods have, bound to their nodes and interfaces.
      const ports = await dataPorts(stack);
      for (const [k, p] of [a, b].entries()) {
        const port = ports.find((x) => x.address.startsWith(`${ips[k]}/`));
        assert.ok(port, `the manager has a port for ${ips[k]}: ${JSON.stringify(ports)}`);
        assert.equal(port.node, p.pod.node.name);
        assert.equal(port.interface, DATA_IF);
        assert.equal(port.networkDataPlane, "external");
        assert.deepEqual(await podAddresses(p.pod), [port.address]);
      }
      assert.equal(ports.length, 2);
      // No switch port and no flows for net1: only eth0's veth is Knitter's.
      for (const node of [n1, n2]) {
        assert.equal((await leftovers(node)).ovsPorts.length, 1, `one OVS port on ${node.name}`);
      }

      const [na, nb] = [ipNetnsName(a.pod.netns), ipNetnsName(b.pod.netns)];
      const tcp = await tcpExchange(cleanup, na, nb, ips[1], 256 * 1024);
      assert.ok(tcp.ok, `TCP over ${kind}: ${JSON.stringify(tcp)}`);
      const udp = await udpExchange(cleanup, nb, na, ips[0], [1, 512, 1400]);
      assert.ok(udp.ok, `UDP over ${kind}: ${JSON.stringify(udp)}`);

      ok(await a.checkData(), `CHECK ${kind}`);
      for (const p of [a, b]) {
        ok(await p.delData(), `DEL net1 of ${p.pod.name}`);
        ok(await p.delIpam(), `the IPAM's DEL of ${p.pod.name} again`);
        assert.deepEqual(await podAddresses(p.pod), [], "net1 is gone from the pod");
        ok(await p.pod.del(), `DEL eth0 of ${p.pod.name}`);
      }
      assert.deepEqual(await dataPorts(stack), [], "no port left at the manager");
      for (const node of [n1, n2]) {
        assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
      }
    });
  }

  await t.step(
    "GC: knitter's own GC keeps the IPAM's addresses; the IPAM's GC takes the unlisted",
    async () => {
      const conf = (valid: { containerID: string; ifname: string }[]) => ({
        cniVersion: "1.1.0",
        name: "data",
        type: "macvlan",
        master: "data0",
        ipam: { type: "knitter", network: "data" },
        "cni.dev/valid-attachments": valid,
      });
      const a = await podOn(n1, "gca", delegated({ type: "macvlan", master: "data0" }));
      ok(await a.pod.add(), "ADD eth0");
      ok(await a.addData(), "ADD net1");
      const eth0 = { containerID: a.pod.containerId, ifname: "eth0" };
      const net1 = { containerID: a.pod.containerId, ifname: DATA_IF };
      // The runtime's GC of knitter's own network lists eth0 only: net1 is another network's.
      const own = { cniVersion: "1.1.0", name: "knitter", type: "knitter" };
      ok(
        await a.pod.runtime.exec("GC", {}, { ...own, "cni.dev/valid-attachments": [eth0] }),
        "GC of knitter's network",
      );
      assert.equal((await dataPorts(stack)).length, 1, "the IPAM's port stays");
      ok(await a.exec("GC", conf([net1])), "GC listing net1");
      assert.equal((await dataPorts(stack)).length, 1, "a listed attachment stays");
      ok(await a.exec("GC", conf([])), "GC listing nothing");
      assert.deepEqual(await dataPorts(stack), [], "GC released the unlisted address");
      assert.deepEqual((await journal(n1)).map((x) => x.ifName), ["eth0"], "eth0 untouched");
      ok(await a.delData(), "DEL net1 after GC");
      ok(await a.pod.del(), "DEL eth0");
      assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
    },
  );
});

Deno.test("e2e IPAM attacks: another tenant's network, an OVS network, an exhausted pool, the manager down, a retried ADD, a DEL racing an ADD and a pod gone without DEL leave nothing behind", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1"],
    agent: { staleAttachments: { graceSeconds: 1, intervalSeconds: 0.25 } },
  });
  const [n1] = stack.nodes;
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  const external = { dataPlane: "external", type: "vxlan" };
  await create(stack, "tenants/acme/networks", { name: "control", cidr: "10.10.0.0/24" });
  await create(stack, "tenants/acme/networks", { name: "data", cidr: "10.30.0.0/24", ...external });
  // One address: .1 is the gateway, .2 the only one to hand out.
  await create(stack, "tenants/acme/networks", {
    name: "tiny",
    cidr: "10.50.0.0/30",
    gateway: "10.50.0.1",
    ...external,
  });
  await create(stack, "tenants/globex/networks", {
    name: "secret",
    cidr: "10.60.0.0/24",
    ...external,
  });
  await dataUnderlay(cleanup, stack.nodes);
  const macvlan = { type: "macvlan", master: "data0" };
  let n = 0;
  const pod = (network: string) => podOn(n1, `atk${n++}`, delegated(macvlan, { network }));
  /**
   * After a failed ADD: knitter kept nothing (no record; the ports are asserted by each step), and
   * the runtime's DEL (as CRI runtimes send after a failed ADD) takes what macvlan itself left: its
   * net1 stays when its IPAM fails (the reference plugin's own leak, not knitter's).
   */
  const nothingLeft = async (p: Awaited<ReturnType<typeof podOn>>, why: string) => {
    assert.deepEqual(await journal(n1), [], `${why}: no record on the node`);
    ok(await p.delData(), `${why}: the runtime's DEL after the failed ADD`);
    assert.equal(await hasLink(p.pod), false, `${why}: no net1 in the pod`);
  };

  await t.step(
    "another tenant's private network is refused, clearly, and globex keeps it all",
    async () => {
      const p = await pod("secret");
      const r = await p.addData();
      assert.equal(r.code, 1);
      assert.equal(r.out.code, 7, JSON.stringify(r.out));
      assert.match(JSON.stringify(r.out), /secret/);
      await nothingLeft(p, "refused");
      assert.deepEqual(await dataPorts(stack, "globex", "secret"), []);
    },
  );

  await t.step(
    "an Open vSwitch network gives no IPAM address; an external one no knitter veth",
    async () => {
      const p = await pod("control");
      const r = await p.addData();
      assert.equal(r.out.code, 7, JSON.stringify(r.out));
      assert.match(r.out.msg, /Open vSwitch data plane/);
      await nothingLeft(p, "OVS network");
      assert.deepEqual(await dataPorts(stack, "acme", "control"), [], "the port was released");
      const own = await makePod(n1, "ownveth", "acme", knitterList(["data"]));
      const o = await own.add();
      assert.equal(o.out.code, 7, JSON.stringify(o.out));
      assert.match(o.out.msg, /external data plane/);
      assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
      assert.deepEqual(await dataPorts(stack), []);
    },
  );

  await t.step(
    "an exhausted pool is code 11, saying so; the first pod keeps its address",
    async () => {
      const first = await pod("tiny");
      const got = await first.addData();
      ok(got, "ADD of the pool's one address");
      assert.equal(dataAddress(got.out), "10.50.0.2");
      const second = await pod("tiny");
      const r = await second.addData();
      assert.equal(r.out.code, 11, JSON.stringify(r.out));
      assert.match(r.out.msg, /tiny/);
      assert.equal((await journal(n1)).length, 1, "only the first pod's record");
      ok(await second.delData(), "the runtime's DEL after the failed ADD");
      assert.equal(await hasLink(second.pod), false, "no net1 in the second pod");
      ok(await first.delData(), "DEL the first");
    },
  );

  await t.step("a retried ADD answers the same address; the manager has one port", async () => {
    const p = await pod("data");
    const a = await p.exec("ADD", delegatedConf("data"));
    ok(a, "ADD");
    const b = await p.exec("ADD", delegatedConf("data"));
    ok(b, "ADD again");
    assert.deepEqual(b.out, a.out);
    assert.equal((await dataPorts(stack)).length, 1);
    ok(await p.exec("DEL", delegatedConf("data")), "DEL");
    assert.deepEqual(await dataPorts(stack), []);
  });

  await t.step(
    "a DEL racing an ADD leaves the record and the port together, and DEL takes both",
    async () => {
      for (let round = 0; round < 5; round++) {
        const p = await pod("data");
        const [added, deleted] = await Promise.all([
          p.exec("ADD", delegatedConf("data")),
          p.exec("DEL", delegatedConf("data")),
        ]);
        ok(added, "ADD");
        ok(deleted, "DEL");
        const records = (await journal(n1)).length;
        assert.equal((await dataPorts(stack)).length, records, "a port for each record, no more");
        ok(await p.exec("DEL", delegatedConf("data")), "the runtime's DEL");
        assert.deepEqual(await dataPorts(stack), []);
        assert.deepEqual(await journal(n1), []);
      }
    },
  );

  await t.step("a pod gone without DEL: the reaper releases its IPAM address", async () => {
    const p = await pod("data");
    ok(await p.addData(), "ADD");
    assert.equal((await dataPorts(stack)).length, 1);
    await run(["ip", "netns", "delete", ipNetnsName(p.pod.netns)]);
    await waitFor("the lost pod's address released", async () => {
      return (await dataPorts(stack)).length === 0 && (await journal(n1)).length === 0;
    }, 15_000);
  });

  await t.step(
    "the manager down is code 11, nothing made; back up, the same ADD works",
    async () => {
      const p = await pod("data");
      await stack.stopManager();
      try {
        const r = await p.addData();
        assert.equal(r.out.code, 11, JSON.stringify(r.out));
        assert.deepEqual(await journal(n1), [], "no record on the node");
      } finally {
        await stack.startManager();
      }
      await nothingLeft(p, "manager down");
      ok(await p.addData(), "ADD with the manager back");
      ok(await p.delData(), "DEL");
      assert.deepEqual(await dataPorts(stack), []);
    },
  );
});

/** The config a main plugin passes its IPAM (the whole of its own), for calls made directly. */
function delegatedConf(network: string): Record<string, unknown> {
  return {
    cniVersion: "1.0.0",
    name: "data",
    type: "macvlan",
    master: "data0",
    ipam: { type: "knitter", network },
  };
}
