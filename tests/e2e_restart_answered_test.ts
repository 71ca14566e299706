/**
 * The agent answers an ADD once the pod's record says "building" (ports, ofports and result
 * decided) and the work is done; the "ready" write lands after the answer. A crash in between
 * leaves a "building" record for a pod its runtime believes is up. At its next start the agent
 * completes such a record as ready when the pod has everything it names (interface, switch port,
 * flows), and leaves it for the runtime's DEL when it does not: a half-done ADD is never taken for
 * a done one.
 *
 * The crash is made exact: the agent is killed after real ADDs, and the record is written back to
 * its Deno KV file as the commit before the answer left it.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack } from "../devstack/stack.ts";
import type { Attachment } from "../agent/state.ts";
import { flows, journal, leftovers, portCookie } from "./support/leftovers.ts";
import {
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  pings,
  podBook,
} from "./support/pods.ts";

/** Writes the records of `containerIds` back as "building": the state a crash in the window leaves. */
async function asCrashedBeforeReady(stateDir: string, containerIds: string[]): Promise<void> {
  const kv = await Deno.openKv(`${stateDir}/agent.kv`);
  try {
    for (const id of containerIds) {
      const e = await kv.get<Attachment>(["attachment", id, "eth0"]);
      assert.ok(e.value, `the record of ${id}`);
      assert.equal(e.value.status, "ready");
      const r = await kv.set(e.key, { ...e.value, status: "building" });
      assert.ok(r.ok);
    }
  } finally {
    kv.close();
  }
}

Deno.test("e2e restart: an ADD answered before its ready write landed keeps its pod working; a half-done one is left to DEL", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "info" });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const { ips, hostEnds, add } = podBook();
  const a = await makePod(n1, "a", "acme", knitterList(["control"]));
  const b = await makePod(n1, "b", "acme", knitterList(["control"]));
  const half = await makePod(n1, "half", "acme", knitterList(["control"]));
  for (const pod of [a, b, half]) await add(pod);
  assert.ok(await pings(a, ips.b), "a reaches b before the crash");
  const cookieA = await portCookie(n1, hostEnds.a);
  const flowsBefore = await flows(n1);

  await n1.stopAgent(true);
  await asCrashedBeforeReady(n1.agentStateDir, [a.containerId, half.containerId]);
  // While the agent was away, half's switch port went: that ADD is not whole.
  await run(["ovs-vsctl", `--db=unix:${n1.sim.ovs.dbSock}`, "del-port", "br-int", hostEnds.half]);
  await n1.startAgent();

  // The answered ADD: ready again, CHECK passes, traffic flows, its flows were not rebuilt.
  const records = new Map((await journal(n1)).map((r) => [r.containerId, r]));
  assert.equal(records.get(a.containerId)?.status, "ready", "a's record completed as ready");
  const check = await a.check();
  assert.equal(check.code, 0, `CHECK of a after the restart: ${JSON.stringify(check.out)}`);
  assert.ok(await pings(a, ips.b), "a still reaches b");
  assert.deepEqual(
    (await flows(n1)).filter((l) => l.includes(`cookie=${cookieA}`)),
    flowsBefore.filter((l) => l.includes(`cookie=${cookieA}`)),
    "a's flows are as they were",
  );

  // The half-done one is not taken for done: still not ready, CHECK says so, DEL undoes it all.
  assert.equal(records.get(half.containerId)?.status, "building", "half's record left as it was");
  const halfCheck = await half.check();
  assert.notEqual(halfCheck.code, 0, "CHECK of the half-done ADD fails");
  assert.equal((await half.del()).code, 0, "DEL of the half-done ADD");
  assert.equal((await a.del()).code, 0, "DEL of a after the restart");
  assert.deepEqual(await flows(n1, `cookie=${cookieA}/-1`), [], "a's flows went with it");
  const left = await leftovers(n1);
  assert.deepEqual(left.journal, [`${b.containerId}/eth0`], "only b's record is left");
  assert.deepEqual(left.ovsPorts, [hostEnds.b]);
  assert.deepEqual(left.veths, [hostEnds.b]);
  assert.equal((await b.del()).code, 0, "DEL of b");
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
});
