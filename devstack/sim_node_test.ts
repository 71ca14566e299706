import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { createPodInterface, hostIfName } from "../agent/interfaces/ip_links.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup, pidAlive, readPidfile } from "./cleanup.ts";
import {
  addPodNetns,
  connectUnderlay,
  joinUnderlay,
  type SimNode,
  startSimNode,
} from "./sim_node.ts";

const VNI = 7777;
const TUNNEL = 100;

async function ping(netns: string, ip: string): Promise<void> {
  await run(["ping", "-c", "1", "-W", "2", ip], { netns });
}

async function ovsPids(node: SimNode): Promise<number[]> {
  const pids = await Promise.all(
    ["ovsdb", "vswitchd"].map((name) => readPidfile(`${node.stateDir}/${name}.pid`)),
  );
  assert.ok(pids.every((pid) => pid !== undefined));
  return pids as number[];
}

/** A pod on the node's br-int whose traffic goes to/comes from the VXLAN tunnel to `remote`. */
async function podOverVxlan(node: SimNode, ip: string, mac: string, remote: string) {
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  await ovs.ensureVxlanPort("br-int", "vx0", TUNNEL);
  const netns = await addPodNetns(node, "pod");
  const host = hostIfName(`${node.name}-pod`, "eth0");
  await createPodInterface({
    netns,
    hostNetns: node.netnsPath,
    ifName: "eth0",
    hostIfName: host,
    mac,
    mtu: 1450,
    addresses: [`${ip}/24`],
    routes: [],
  });
  const ofport = (await ovs.addPorts("br-int", [{ name: host }])).get(host)!;
  await ovs.bundle("br-int", [
    `table=0,priority=10,in_port=${ofport},` +
    `actions=set_field:${VNI}->tun_id,set_field:${remote}->tun_dst,output:${TUNNEL}`,
    `table=0,priority=10,in_port=${TUNNEL},tun_id=${VNI},actions=output:${ofport}`,
  ], []);
  return netns;
}

Deno.test("two sim nodes: underlay, VXLAN between pods, and nothing left afterwards", async () => {
  const cleanup = new Cleanup();
  const pids: number[] = [];
  try {
    const [n1, n2] = await Promise.all([
      startSimNode({ name: "n1", cleanup }),
      startSimNode({ name: "n2", cleanup }),
    ]);
    pids.push(...await ovsPids(n1), ...await ovsPids(n2));
    assert.ok((await Promise.all(pids.map(pidAlive))).every(Boolean));

    const underlay = await connectUnderlay(n1, n2);
    assert.equal(n2.underlayIp, "192.0.2.2");
    await ping(n1.netns, n2.underlayIp);

    const pod1 = await podOverVxlan(n1, "10.1.0.1", "02:00:0a:01:00:01", n2.underlayIp);
    const pod2 = await podOverVxlan(n2, "10.1.0.2", "02:00:0a:01:00:02", n1.underlayIp);
    await ping(pod1, "10.1.0.2");
    await ping(pod2, "10.1.0.1");
    // Really encapsulated: the userspace datapath pushed a VXLAN header.
    const dp = await run(["ovs-appctl", "-t", `${n1.stateDir}/vswitchd.ctl`, "dpctl/dump-flows"]);
    assert.match(
      dp.stdout,
      /tnl_push\(tnl_port\(\d+\),header\(.*vxlan\(flags=0x8000000,vni=0x1e61\)/,
    );

    // A third node joins the same L2 underlay.
    const n3 = await startSimNode({ name: "n3", cleanup });
    pids.push(...await ovsPids(n3));
    await joinUnderlay(n3, underlay, "192.0.2.3");
    await ping(n3.netns, n1.underlayIp);
    await ping(n3.netns, n2.underlayIp);
  } finally {
    await cleanup.cleanup();
  }
  const left = (await run(["ip", "netns", "list"])).stdout;
  assert.ok(!left.includes(cleanup.prefix), `netns left behind:\n${left}`);
  assert.equal(pids.length, 6);
  for (const pid of pids) assert.equal(await pidAlive(pid), false, `pid ${pid} still runs`);
});

Deno.test("a sim node's stop() is idempotent and the Cleanup after it is harmless", async () => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "solo", cleanup });
  const pids = await ovsPids(node);
  await node.stop();
  await node.stop();
  for (const pid of pids) assert.equal(await pidAlive(pid), false);
  assert.ok(!(await run(["ip", "netns", "list"])).stdout.includes(node.netns));
});

Deno.test("startSimNode refuses a name that would not fit an interface name", async () => {
  await using cleanup = new Cleanup();
  await assert.rejects(startSimNode({ name: "much-too-long-name", cleanup }), /Bad sim node name/);
});

Deno.test("Cleanup undoes everything, also past a failing step, and then reports it", async () => {
  const cleanup = new Cleanup();
  assert.match(cleanup.prefix, /^kt-[0-9a-f]{4}$/);
  const dir = await cleanup.tempDir();
  const netns = cleanup.name("c");
  cleanup.netns(netns);
  await run(["ip", "netns", "add", netns]);
  const sleeper = new Deno.Command("sleep", { args: ["60"] }).spawn();
  cleanup.pid(sleeper.pid);
  const order: string[] = [];
  cleanup.defer(async () => {
    order.push("first added");
    await Promise.resolve();
  });
  cleanup.defer(() => Promise.reject(new Error("a step failed")));
  await assert.rejects(cleanup.cleanup(), /a step failed/);
  assert.deepEqual(order, ["first added"]);
  assert.equal((await sleeper.status).signal, "SIGTERM");
  assert.ok(!(await run(["ip", "netns", "list"])).stdout.includes(netns));
  await assert.rejects(Deno.stat(dir), Deno.errors.NotFound);
  await cleanup.cleanup(); // nothing left to do
});
