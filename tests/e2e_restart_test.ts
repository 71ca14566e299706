/**
 * Restarts under traffic: the agent killed with SIGKILL and started again must not disturb running
 * pods (their flows stay as they are, not flushed and rebuilt), and the manager stopped and started
 * again must not either; afterwards both go on working (DEL, new pods on other nodes).
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
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

Deno.test("e2e restart: pods keep every ping reply and their flows through an agent SIGKILL and a manager restart", async (t) => {
  await using cleanup = new Cleanup();
  // info: the agent logs how it took over the flows at its restart.
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], logLevel: "info" });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const { ips, hostEnds, add } = podBook();
  const a = await makePod(n1, "a", "acme", knitterList(["control"]));
  const b = await makePod(n2, "b", "acme", knitterList(["control"]));
  const gone = await makePod(n1, "gone", "acme", knitterList(["control"]));
  for (const pod of [a, b, gone]) await add(pod);
  assert.ok(await pings(a, ips.b), "a reaches b before any restart");

  await t.step(
    "agent SIGKILL and restart: no ping reply lost, flows untouched, DEL works",
    async () => {
      const before = await flows(n1);
      const ping = startPing(cleanup, a, ips.b);
      await ping.replies(10);
      await n1.stopAgent(true);
      await n1.startAgent();
      await ping.replies(ping.received + 20);
      const seqs = await ping.stop();
      assert.deepEqual(gaps(seqs), [], `every reply arrived (${seqs.length} replies)`);
      assert.deepEqual(await flows(n1), before, "the restarted agent left the flows as they were");
      // It knew them from its journal, without reading the table back (agent/dataplane/flow_journal.ts).
      const agentLog = await Deno.readTextFile(`${n1.sim.stateDir}/agent.log`);
      assert.equal(
        agentLog.split("\n").filter((l) => l.includes("flows resumed from the journal")).length,
        1,
        "the restarted agent resumed from its journal",
      );

      const cookie = await portCookie(n1, hostEnds.gone);
      assert.equal((await gone.del()).code, 0, "DEL after the restart");
      const left = await leftovers(n1);
      assert.equal(left.journal.length, 1, "only a's record is left");
      assert.deepEqual(left.ovsPorts, [hostEnds.a]);
      assert.deepEqual(await flows(n1, `cookie=${cookie}/-1`), [], "the pod's flows went with it");
      assert.ok(await pings(a, ips.b), "a still reaches b after the DEL");
    },
  );

  await t.step(
    "manager stopped and started: pods keep connectivity, agents follow it again",
    async () => {
      const ping = startPing(cleanup, a, ips.b);
      await ping.replies(5);
      const stopping = performance.now();
      await stack.stopManager();
      // stopPid would SIGKILL after 5 s: the agents' long polls must not hold a graceful stop.
      assert.ok(performance.now() - stopping < 3000, "the manager exits at once on SIGTERM");
      await ping.replies(ping.received + 10);
      await stack.startManager();
      await ping.replies(ping.received + 10);
      const seqs = await ping.stop();
      assert.deepEqual(gaps(seqs), [], `every reply arrived (${seqs.length} replies)`);

      // A pod made after the restart on n2 is reachable from n1: n1's agent follows the feed again.
      const c = await makePod(n2, "c", "acme", knitterList(["control"]));
      await add(c);
      await waitFor("a reaching c", () => pings(a, ips.c), 15_000);
      for (const pod of [a, b, c]) assert.equal((await pod.del()).code, 0, `DEL ${pod.name}`);
      for (const node of stack.nodes) {
        assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
      }
    },
  );
});

interface Ping {
  /** Replies so far. */
  readonly received: number;
  /** Waits (bounded) until `n` replies arrived. */
  replies(n: number): Promise<void>;
  /** Stops the ping; the icmp_seq of every reply. */
  stop(): Promise<number[]>;
}

/** A ping every 50 ms in the background, at most 30 s, its replies counted as they come. */
function startPing(cleanup: Cleanup, from: Pod, ip: string): Ping {
  const child = new Deno.Command("ip", {
    args: ["netns", "exec", ipNetnsName(from.netns), "ping", "-n", "-i", "0.05", "-c", "600", ip],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  cleanup.pid(child.pid);
  const seqs: number[] = [];
  const reading = (async () => {
    let buf = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const l of lines) {
        const m = /bytes from .*icmp_seq=(\d+)/.exec(l);
        if (m) seqs.push(Number(m[1]));
      }
    }
  })();
  return {
    get received() {
      return seqs.length;
    },
    replies: (n) =>
      waitFor(
        `${n} ping replies (have ${seqs.length})`,
        () => Promise.resolve(seqs.length >= n),
        20_000,
      ),
    async stop() {
      try {
        child.kill("SIGINT");
      } catch { /* already done */ }
      await child.status;
      await reading;
      return seqs;
    },
  };
}

/** Sequence numbers missing between the first and the last reply. */
function gaps(seqs: number[]): number[] {
  const got = new Set(seqs);
  const missing = [];
  for (let s = Math.min(...seqs); s <= Math.max(...seqs); s++) if (!got.has(s)) missing.push(s);
  return missing;
}
