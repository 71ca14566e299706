/**
 * An ADD makes the pod's veth pair while the manager is still asked for the port (agent
 * interfaces/wiring.ts), and plugs it into the switch as soon as it exists (early_plug.ts): both
 * exist before anything else of the pod does. An agent that dies in that window must leave nothing
 * that the runtime's DEL, or the start-up reaper when the netns is gone too, does not remove: no
 * veth, no switch port, no record, no port at the manager.
 *
 * The window is made exact: the manager is stopped (SIGSTOP) so that the PUT hangs, the agent is
 * killed once the pod's veth exists, and the manager goes on (SIGCONT) after, taking the PUT
 * already sent. One pod at a time, each with an agent restart of its own.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, startStack, waitFor } from "../devstack/stack.ts";
import { hostIfName } from "../agent/interfaces/ip_links.ts";
import { journal, leftovers, usage } from "./support/leftovers.ts";
import type { CniCall } from "./support/cni_runtime.ts";
import {
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  type Pod,
} from "./support/pods.ts";

/** What the agent is killed after: the pod's veth, or its switch port (plugged after the veth). */
type Made = "veth" | "switch port";

/**
 * Starts `pod`'s ADD with the manager stopped, kills the agent once the pod's veth (or its switch
 * port) exists, made while the PUT hangs, and lets the manager go on; answers the ADD's failed call.
 */
async function killedInTheWindow(stack: Stack, pod: Pod, after: Made): Promise<CniCall> {
  const end = hostIfName(pod.containerId, "eth0");
  Deno.kill(stack.managerPid(), "SIGSTOP");
  let call: Promise<CniCall>;
  try {
    call = pod.add();
    const made = after === "veth" ? () => hasLink(pod, end) : () => onBridge(pod, end);
    await waitFor(`the ${after}, made while the manager is asked`, made, 20_000);
    await pod.node.stopAgent(true);
  } finally {
    Deno.kill(stack.managerPid(), "SIGCONT");
  }
  return await call;
}

async function onBridge(pod: Pod, name: string): Promise<boolean> {
  return (await leftovers(pod.node)).ovsPorts.includes(name);
}

async function hasLink(pod: Pod, name: string): Promise<boolean> {
  const r = await run(["ip", "-n", pod.node.sim.netns, "link", "show", "dev", name], {
    check: false,
  });
  return r.code === 0;
}

Deno.test("e2e restart: an agent killed while an ADD's port is asked for, its veth made, leaves nothing DEL or the reaper does not remove", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "info" });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const list = knitterList(["control"]);
  // kept: its runtime sends DEL after the failed ADD; gone: its netns is deleted meanwhile. The
  // first interface's switch port is plugged while the manager is asked too, once the veth is
  // made (agent/interfaces/early_plug.ts): plugged and unplugged are killed after it.
  const kept = await makePod(n1, "kept", "acme", list);
  const gone = await makePod(n1, "gone", "acme", list);
  const plugged = await makePod(n1, "plugged", "acme", list);
  const unplugged = await makePod(n1, "unplugged", "acme", list);
  const cases: [Pod, Made][] = [
    [kept, "veth"],
    [gone, "veth"],
    [plugged, "switch port"],
    [unplugged, "switch port"],
  ];

  for (const [pod, after] of cases) {
    const call = await killedInTheWindow(stack, pod, after);
    assert.notEqual(call.code, 0, `the ADD cut short fails: ${JSON.stringify(call.out)}`);
    // The record written before the veth names it: whatever finds the record undoes it.
    const record = (await journal(n1)).find((r) => r.containerId === pod.containerId);
    assert.deepEqual(record?.interfaces.map((i) => i.hostIfName), [
      hostIfName(pod.containerId, "eth0"),
    ]);
    if (pod === gone || pod === unplugged) {
      await run(["ip", "netns", "del", ipNetnsName(pod.netns)]);
    }
    await n1.startAgent();
  }
  // The start-up reaper: the netns of gone and unplugged no longer exist.
  await waitFor(
    "the start-up reaper",
    async () =>
      !(await journal(n1)).some((r) =>
        [gone, unplugged].some((p) => p.containerId === r.containerId)
      ),
    20_000,
  );
  for (const pod of [kept, plugged]) {
    const del = await pod.del();
    assert.equal(del.code, 0, `DEL after the restart: ${JSON.stringify(del.out)}`);
  }
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
  assert.equal(await usage(stack, "acme", "control"), 0, "no port is left at the manager");
});
