/**
 * What self-healing hears from a private Open vSwitch: the OpenFlow watch sees ovs-vswitchd go and
 * come back; the OVSDB monitor sees a bridge deleted, flow-restore-wait set and cleared, and
 * ovsdb-server restarted (the connection made again by itself).
 */
import assert from "node:assert/strict";
import { Cleanup } from "../../devstack/cleanup.ts";
import {
  restartOvsdb,
  startSimNode,
  startVswitchd,
  stopVswitchd,
} from "../../devstack/sim_node.ts";
import { waitFor } from "../../devstack/stack.ts";
import { Ovs } from "./ovs.ts";
import { OfWatch, type OfWatchEvent } from "./ofwatch.ts";
import { OvsdbClient, type OvsdbEvent } from "./ovsdb.ts";

Deno.test("self-healing inputs: the OpenFlow watch and the OVSDB monitor see Open vSwitch restarts and changes", async (t) => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "heal", cleanup });
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  const held = (what: string, probe: () => boolean) =>
    waitFor(what, () => Promise.resolve(probe()), 10_000);

  await t.step(
    "OfWatch: up at start, down when ovs-vswitchd dies, up when it is back",
    async () => {
      const events: OfWatchEvent[] = [];
      const watch = new OfWatch(OfWatch.socketOf("br-int", node.ovs.rundir), (e) => events.push(e));
      cleanup.defer(() => watch.stop());
      watch.start();
      await held("up", () => events.length === 1);
      assert.deepEqual(events[0], { kind: "up", first: true });
      await stopVswitchd(node, { kill: true });
      await held("down", () => events.length === 2);
      assert.equal(events[1].kind, "down");
      const back = await startVswitchd(node);
      await held("up again", () => events.length === 3);
      assert.deepEqual(events[2], { kind: "up", first: false });
      assert.ok(performance.now() - back < 1000, "noticed within a second");
      await watch.stop();
    },
  );

  await t.step("OvsdbClient.watch: bridges, flow-restore-wait, reconnects", async () => {
    const db = new OvsdbClient(node.ovs.dbSock!);
    cleanup.defer(() => Promise.resolve(db.close()));
    const events: OvsdbEvent[] = [];
    db.watch((e) => events.push(e));
    await held("connected", () => events.some((e) => e.kind === "connected"));
    assert.deepEqual([...db.view.bridges.values()], ["br-int"]);

    await ovs.vsctl([
      "--no-wait",
      "set",
      "Open_vSwitch",
      ".",
      "other_config:flow-restore-wait=true",
    ]);
    await held("flow-restore-wait seen", () => db.flowRestoreWait);
    await db.clearFlowRestoreWait();
    await held("flow-restore-wait cleared", () => !db.flowRestoreWait);
    const left = await ovs.vsctl(["get", "Open_vSwitch", ".", "other_config"]);
    assert.doesNotMatch(left, /flow-restore-wait/);

    await ovs.vsctl(["del-br", "br-int"]);
    await held(
      "the deletion",
      () => events.some((e) => e.kind === "changed" && e.deletedBridges.includes("br-int")),
    );
    assert.deepEqual([...db.view.bridges.values()], []);

    const before = events.length;
    await restartOvsdb(node);
    await held(
      "lost, then connected again",
      () => events.slice(before).some((e) => e.kind === "connected" && !e.first),
    );
    assert.ok(events.slice(before).some((e) => e.kind === "lost"));
    await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
    await held("the new bridge", () => [...db.view.bridges.values()].includes("br-int"));
  });
});
