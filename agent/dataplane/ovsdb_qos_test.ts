/**
 * keepQdisc (ovs.ts) against a private Open vSwitch, userspace datapath: ovs-vswitchd replaces the
 * root qdisc of a port it adds or opens again after a restart, unless the port has a QoS of type
 * linux-noop; the agent's ports share one such row. What the bandwidth limits (shaper.ts) rely on.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode, startVswitchd, stopVswitchd } from "../../devstack/sim_node.ts";
import { Ovs } from "./ovs.ts";
import { PortPlugger } from "./port_plugger.ts";

Deno.test("keepQdisc: a tc qdisc on a port's device survives its add and an ovs-vswitchd restart; without, it does not", async () => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "qos", cleanup });
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  const names = ["kept0", "kept1", "plain0"];
  await run(["ip", "-n", node.netns, "-batch", "-"], {
    stdin: names.map((n) => `link add ${n} up type veth peer name ${n}-x\n`).join(""),
  });
  const qdisc = async (name: string) =>
    (await run(["tc", "qdisc", "show", "dev", name, "root"], { netns: node.netns })).stdout;
  for (const n of names) {
    await run(
      ["tc", "qdisc", "replace", "dev", n, "root", "tbf", "rate", "20mbit", "burst", "64kb"]
        .concat(["latency", "25ms"]),
      { netns: node.netns },
    );
  }
  const plugger = new PortPlugger(node.ovs.dbSock, "br-int");
  cleanup.defer(() => Promise.resolve(plugger.close()));
  await plugger.add([{ name: "kept0", ofportRequest: plugger.takeOfport(), keepQdisc: true }]);
  await plugger.add([
    { name: "kept1", ofportRequest: plugger.takeOfport(), keepQdisc: true },
    { name: "plain0", ofportRequest: plugger.takeOfport() },
  ]);

  const qos = JSON.parse(
    await ovs.vsctl(["--format=json", "--columns=_uuid,type,external_ids", "list", "QoS"]),
  );
  assert.equal(qos.data.length, 1, "one QoS row, shared");
  assert.equal(qos.data[0][1], "linux-noop");
  const uuid = qos.data[0][0][1];
  for (const n of ["kept0", "kept1"]) {
    assert.equal((await ovs.vsctl(["get", "Port", n, "qos"])).trim(), uuid);
  }
  assert.equal((await ovs.vsctl(["get", "Port", "plain0", "qos"])).trim(), "[]");

  for (const n of ["kept0", "kept1"]) {
    assert.match(await qdisc(n), /qdisc tbf/, `${n} after its add`);
  }
  assert.doesNotMatch(await qdisc("plain0"), /qdisc tbf/, "the add replaced plain0's tbf");

  // The same again on plain0, then a restart: it replaces plain0's, and leaves the others'.
  await run(
    ["tc", "qdisc", "replace", "dev", "plain0", "root", "tbf", "rate", "20mbit"]
      .concat(["burst", "64kb", "latency", "25ms"]),
    { netns: node.netns },
  );
  await stopVswitchd(node, { kill: true });
  await startVswitchd(node);
  await ovs.vsctl(["set", "Port", "plain0", "external_ids:seen=1"]); // waits for ovs-vswitchd
  assert.doesNotMatch(await qdisc("plain0"), /qdisc tbf/, "the restart replaced plain0's tbf");
  for (const n of ["kept0", "kept1"]) {
    assert.match(await qdisc(n), /qdisc tbf/, `${n} after the restart`);
  }

  // The row the client remembers goes (its ports removed, the row destroyed): the next add makes
  // another and succeeds.
  await plugger.remove(["kept0", "kept1"]);
  await ovs.vsctl(["destroy", "QoS", uuid]);
  await plugger.add([{ name: "kept0", ofportRequest: plugger.takeOfport(), keepQdisc: true }]);
  const again = (await ovs.vsctl(["get", "Port", "kept0", "qos"])).trim();
  assert.notEqual(again, uuid);
  assert.equal((await ovs.vsctl(["get", "QoS", again, "type"])).trim(), "linux-noop");
});
