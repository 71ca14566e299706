/**
 * The router's slow path on a private Open vSwitch (userspace datapath): a pod's ping with TTL 1
 * through a `dec_ttl` flow gets "time to live exceeded" from the gateway, a flow that punts
 * unroutable packets gets "net unreachable"; the switch's rate limit is in OVSDB; the slow path
 * connects again after ovs-vswitchd is killed and answers again.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode, startVswitchd, stopVswitchd } from "../../devstack/sim_node.ts";
import { waitFor } from "../../devstack/stack.ts";
import { Ovs } from "../dataplane/ovs.ts";
import { ipBytes, macBytes } from "./frames.ts";
import { ensureSlowPathController, SWITCH_RATE_LIMIT } from "./punt_controller.ts";
import { RouterSlowPath } from "./router_slow_path.ts";

const GW_MAC = "0a:58:00:00:00:01";
const POD_MAC = "02:00:0a:09:00:02";
const silent = { debug() {}, info() {}, warn() {}, error() {} };

Deno.test("router slow path: time exceeded and unreachable answered through the switch, its rate limit in OVSDB, again after ovs-vswitchd is killed", async (t) => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "slow", cleanup });
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  // The pod: a netns with one end of a veth, the other end on the bridge as ofport 1.
  const pod = cleanup.name("pod");
  await run(["ip", "netns", "add", pod]);
  cleanup.netns(pod);
  const veth = `link add kslow type veth peer name eth0 netns ${pod}`;
  await run(["ip", "-n", node.netns, ...veth.split(" ")]);
  await run(["ip", "-n", node.netns, "link", "set", "kslow", "up"]);
  for (
    const cmd of [
      `link set eth0 address ${POD_MAC}`,
      "link set eth0 up",
      "addr add 10.9.0.2/24 dev eth0",
      "route add default via 10.9.0.1",
      `neigh add 10.9.0.1 lladdr ${GW_MAC} dev eth0`,
    ]
  ) await run(["ip", "-n", pod, ...cmd.split(" ")]);
  await ovs.vsctl([
    "add-port",
    "br-int",
    "kslow",
    "--",
    "set",
    "Interface",
    "kslow",
    "ofport_request=1",
  ]);
  // Network 7: its flows' cookie is 7 << 32. Routed IPv4 to 10.9.1.0/24 has its TTL decremented
  // (and goes nowhere); 10.9.2.0/24 has no route.
  const flows = () =>
    ovs.ofctl(
      ["add-flows", "br-int", "-"],
      [
        "cookie=0x700000000,table=0,priority=10,ip,in_port=1,nw_dst=10.9.1.0/24,actions=dec_ttl",
        "cookie=0x700000000,table=0,priority=10,ip,in_port=1,nw_dst=10.9.2.0/24,actions=set_field:1->reg5,controller",
      ].join("\n"),
    );
  await flows();
  const socket = await ensureSlowPathController(ovs, "br-int");
  const slow = new RouterSlowPath({
    socket,
    log: silent,
    retryMs: 50,
    port: (ofport) =>
      ofport === 1
        ? {
          mac: macBytes(POD_MAC),
          network: { gatewayMac: macBytes(GW_MAC), gateway4: ipBytes("10.9.0.1") },
        }
        : undefined,
  });
  cleanup.defer(() => slow.stop());
  slow.start();
  const ping = async (to: string, ttl: number) =>
    (await run([
      "ip",
      "netns",
      "exec",
      pod,
      "ping",
      "-n",
      "-c",
      "1",
      "-W",
      "2",
      "-t",
      String(ttl),
      to,
    ], { check: false })).stdout;

  await t.step("the controller row has the switch's rate limit", async () => {
    const row = await ovs.vsctl([
      "--columns=target,controller_rate_limit,controller_burst_limit,connection_mode",
      "list",
      "Controller",
    ]);
    assert.match(row, new RegExp(`target\\s*: "punix:${socket}"`));
    assert.match(row, new RegExp(`controller_rate_limit\\s*: ${SWITCH_RATE_LIMIT.rate}\\b`));
    assert.match(row, new RegExp(`controller_burst_limit\\s*: ${SWITCH_RATE_LIMIT.burst}\\b`));
    assert.match(row, /connection_mode\s*: out-of-band/);
    // Asked again, nothing changes (the connection stays).
    await waitFor("connected", () => Promise.resolve(slow.connected), 10_000);
    await ensureSlowPathController(ovs, "br-int");
    assert.equal(slow.counts.connects, 1);
  });

  await t.step("TTL 1 through dec_ttl: time to live exceeded from the gateway", async () => {
    await waitFor("connected", () => Promise.resolve(slow.connected), 10_000);
    const out = await ping("10.9.1.5", 1);
    assert.match(out, /From 10\.9\.0\.1 icmp_seq=1 Time to live exceeded/, out);
  });

  await t.step("no route: destination net unreachable", async () => {
    const out = await ping("10.9.2.5", 64);
    assert.match(out, /From 10\.9\.0\.1 icmp_seq=1 Destination Net Unreachable/, out);
  });

  await t.step("ovs-vswitchd killed and started again: the slow path answers again", async () => {
    await stopVswitchd(node, { kill: true });
    await waitFor("down", () => Promise.resolve(!slow.connected), 10_000);
    await startVswitchd(node);
    await waitFor("connected again", () => Promise.resolve(slow.connected), 10_000);
    assert.equal(slow.counts.connects, 2);
    // A new ovs-vswitchd has no flows (the agent's healer puts them back).
    await flows();
    const out = await ping("10.9.1.5", 1);
    assert.match(out, /Time to live exceeded/, out);
  });
});
