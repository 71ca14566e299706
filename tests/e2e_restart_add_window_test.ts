/**
 * An ADD makes the pod's veth pair while the manager is still asked for the port (agent
 * interfaces/wiring.ts): the pair exists before anything else of the pod does. An agent that dies
 * in that window must leave nothing that the runtime's DEL, or the start-up reaper when the netns
 * is gone too, does not remove: no veth, no switch port, no record, no port at the manager.
 *
 * The window is made exact: the manager is stopped (SIGSTOP) so that the PUT hangs, the agent is
 * killed once the pods' veths exist, and the manager goes on (SIGCONT) after, taking the PUTs
 * already sent.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { hostIfName } from "../agent/interfaces/ip_links.ts";
import { journal, leftovers, usage } from "./support/leftovers.ts";
import { createNetwork, createTenant, ipNetnsName, knitterList, makePod } from "./support/pods.ts";

async function hasLink(netns: string, name: string): Promise<boolean> {
  const r = await run(["ip", "-n", netns, "link", "show", "dev", name], { check: false });
  return r.code === 0;
}

Deno.test("e2e restart: an agent killed while an ADD's port is asked for, its veth made, leaves nothing DEL or the reaper does not remove", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "info" });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const list = knitterList(["control"]);
  // kept: its runtime sends DEL after the failed ADD; gone: its netns is deleted meanwhile.
  const kept = await makePod(n1, "kept", "acme", list);
  const gone = await makePod(n1, "gone", "acme", list);
  const ends = [kept, gone].map((p) => hostIfName(p.containerId, "eth0"));

  Deno.kill(stack.managerPid(), "SIGSTOP");
  let adds;
  try {
    adds = [kept.add(), gone.add()];
    await waitFor(
      "both veths, made while the manager is asked",
      async () => (await Promise.all(ends.map((e) => hasLink(n1.sim.netns, e)))).every(Boolean),
      20_000,
    );
    await n1.stopAgent(true);
  } finally {
    Deno.kill(stack.managerPid(), "SIGCONT");
  }
  for (const call of await Promise.all(adds)) {
    assert.notEqual(call.code, 0, `the ADD cut short fails: ${JSON.stringify(call.out)}`);
  }
  // The record written before the veths names them: whatever finds it undoes them.
  const records = await journal(n1);
  assert.deepEqual(
    records.map((r) => [r.containerId, r.interfaces.map((i) => i.hostIfName)]).sort(),
    [[kept.containerId, [ends[0]]], [gone.containerId, [ends[1]]]].sort(),
  );

  await run(["ip", "netns", "del", ipNetnsName(gone.netns)]);
  await n1.startAgent();
  // The start-up reaper: gone's netns no longer exists.
  await waitFor(
    "the start-up reaper",
    async () => !(await journal(n1)).some((r) => r.containerId === gone.containerId),
    20_000,
  );
  assert.equal(await hasLink(n1.sim.netns, ends[1]), false, "gone's veth went with its record");

  const del = await kept.del();
  assert.equal(del.code, 0, `DEL after the restart: ${JSON.stringify(del.out)}`);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
  assert.equal(await usage(stack, "acme", "control"), 0, "no port is left at the manager");
});
