/**
 * Lost DELs: a pod's netns deleted without the runtime's DEL (a crashed runtime, a failed cleanup),
 * and netns removed while the agent was down (a node reboot). The agent reaps each attachment whose
 * netns is gone: its manager port released, its OVS port, veth, flows and record removed, other
 * pods undisturbed. Prints how long each took (docs/benchmarks.md): from the netns deletion to the
 * agent's decision (its log line) and to everything gone on the node and at the manager.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { CniRuntime } from "./support/cni_runtime.ts";
import { flows, leftovers, portCookie } from "./support/leftovers.ts";
import {
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  pings,
  type Pod,
  podBook,
} from "./support/pods.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { tcpExchange } from "./support/traffic.ts";

const GRACE_SECONDS = 1;

Deno.test("e2e lost DEL: attachments whose netns is gone are reaped after the grace, and at the agent's start", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    agent: { staleAttachments: { graceSeconds: GRACE_SECONDS, intervalSeconds: 0.25 } },
    logLevel: "info",
  });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const { ips, hostEnds, add } = podBook();
  /** The manager's ports bound to n1 (a released address may stay in quarantine: not counted). */
  const n1Ports = async (): Promise<number> => {
    const r = await stack.api("GET", "ports");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body.items as { node?: string }[]).filter((p) => p.node === "n1").length;
  };

  const a = await makePod(n1, "a", "acme", knitterList(["control"]));
  const lost = await makePod(n1, "lost", "acme", knitterList(["control"]));
  const c = await makePod(n2, "c", "acme", knitterList(["control"]));
  for (const pod of [a, lost, c]) await add(pod);
  assert.ok(await pings(a, ips.c), "a reaches c before anything happens");
  assert.equal(await n1Ports(), 2);

  const figures: string[] = [];
  /** When the agent logged that it removes `pod`'s attachment (epoch ms). */
  const reapLogged = async (pod: Pod): Promise<number> => {
    const log = await Deno.readTextFile(`${n1.sim.stateDir}/agent.log`);
    const line = log.split("\n").find((l) =>
      l.includes("netns gone without DEL") && l.includes(pod.containerId)
    );
    assert.ok(line, `the agent logged reaping ${pod.name}`);
    return Date.parse(JSON.parse(line).time);
  };

  /** Only a's attachment is left on n1: record, OVS port, veth. */
  const onlyA = async () => {
    const left = await leftovers(n1);
    return left.journal.length === 1 && left.journal[0] === `${a.containerId}/eth0` &&
      left.ovsPorts.join() === hostEnds.a && left.veths.join() === hostEnds.a;
  };

  await t.step("a pod's netns deleted without DEL: reaped after the grace", async () => {
    const cookie = await portCookie(n1, hostEnds.lost);
    const deletedAt = Date.now();
    await run(["ip", "netns", "delete", ipNetnsName(lost.netns)]);
    // Not before the grace: the runtime's DEL may still come.
    await new Promise((r) => setTimeout(r, GRACE_SECONDS * 500));
    assert.equal(await n1Ports(), 2, "the port is kept during the grace");
    await waitFor("lost's attachment reaped", onlyA, 15_000);
    assert.ok(Date.now() - deletedAt >= GRACE_SECONDS * 1000, "not reaped before the grace");
    await waitFor(
      "lost's port released at the manager",
      async () => (await n1Ports()) === 1,
      5000,
    );
    const allGone = Date.now() - deletedAt;
    figures.push(
      `netns deleted without DEL (grace ${GRACE_SECONDS} s, checked every 0.25 s): reaping began ${
        (await reapLogged(lost)) - deletedAt
      } ms after, everything gone (node and manager) ${allGone} ms after`,
    );
    assert.deepEqual(await flows(n1, `cookie=${cookie}/-1`), [], "its flows are gone");
    const log = await Deno.readTextFile(`${n1.sim.stateDir}/agent.log`);
    assert.match(
      log,
      new RegExp(`netns gone.*${lost.containerId}|${lost.containerId}.*netns gone`),
    );
    // Other pods undisturbed.
    const tcp = await tcpExchange(cleanup, a.netns, c.netns, ips.c, 1 << 20);
    assert.ok(tcp.ok, `a's TCP to c still works: ${JSON.stringify(tcp)}`);
    // A DEL that comes late finds nothing, and succeeds.
    assert.equal((await lost.del()).code, 0, "a late DEL succeeds");
  });

  await t.step("netns removed while the agent was down: reconciled at its start", async () => {
    const d = await makePod(n1, "d", "acme", knitterList(["control"]));
    await add(d);
    assert.equal(await n1Ports(), 2);
    await n1.stopAgent();
    await run(["ip", "netns", "delete", ipNetnsName(d.netns)]);
    // The timer off and a long grace: only the start's reconciliation can reap d.
    const config = JSON.parse(await Deno.readTextFile(n1.agentConfig));
    config.staleAttachments = { graceSeconds: 3600, intervalSeconds: 0 };
    await Deno.writeTextFile(n1.agentConfig, JSON.stringify(config));
    const starting = Date.now();
    await n1.startAgent();
    await waitFor("d's attachment reaped at start", onlyA, 15_000);
    await waitFor(
      "d's port released at the manager",
      async () => (await n1Ports()) === 1,
      5000,
    );
    figures.push(
      `netns removed while the agent was down: everything gone ${
        Date.now() - starting
      } ms after the agent's start began (reaping began after ${
        (await reapLogged(d)) - starting
      } ms)`,
    );
    assert.ok(await pings(a, ips.c), "a still reaches c");
    const tcp = await tcpExchange(cleanup, c.netns, a.netns, ips.a, 1 << 20);
    assert.ok(tcp.ok, `c's TCP to a works: ${JSON.stringify(tcp)}`);
  });

  await t.step("CNI GC: what the runtime no longer lists goes, what it lists stays", async () => {
    const e = await makePod(n1, "e", "acme", knitterList(["control"]));
    await add(e);
    const gc = (valid: Pod[]) =>
      new CniRuntime(n1.sim.netns, n1.agentSocket).exec("GC", {}, {
        cniVersion: "1.1.0",
        name: "knitter",
        type: "knitter",
        "cni.dev/valid-attachments": valid.map((p) => ({
          containerID: p.containerId,
          ifname: "eth0",
        })),
      });
    const kept = await gc([a, e]);
    assert.equal(kept.code, 0, `GC: ${JSON.stringify(kept.out)} ${kept.stderr}`);
    assert.equal((await leftovers(n1)).journal.length, 2, "both listed attachments stay");
    const collected = await gc([a]);
    assert.equal(collected.code, 0, `GC: ${JSON.stringify(collected.out)} ${collected.stderr}`);
    assert.ok(await onlyA(), "e's attachment is collected");
    assert.equal(await n1Ports(), 1, "e's port is released");
    assert.ok(await pings(a, ips.c), "a still reaches c");
  });

  console.log(`lost DEL figures: ${figures.join("; ")}`);
  assert.equal((await a.del()).code, 0);
  assert.equal((await c.del()).code, 0);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
  assert.equal(await n1Ports(), 0);
});
