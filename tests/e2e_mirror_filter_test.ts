/**
 * Filtered port mirrors end to end (issue 30) on real Open vSwitch (userspace datapath), two
 * simulated nodes: a mirror of a pod on n1 filtered to TCP port 5001 copies the stream it sends to
 * 5001 (on a pod on n2) byte for byte into the collector pod on n1, and nothing of its stream to
 * 5002; it is flows of the compiler (no Mirror row), made again by the agent when ovs-vswitchd
 * restarts with no flows; deleted, the copies stop.
 */
import assert from "node:assert/strict";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { startVswitchd, stopVswitchd } from "../devstack/sim_node.ts";
import { mirrorRows, streamSeen as seenAt, type Tap } from "./support/mirror_stream.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  type Pod,
} from "./support/pods.ts";
import { api } from "./support/stack_api.ts";

const COPIED = 5001;
const NOT_COPIED = 5002;

Deno.test("e2e filtered mirror: TCP to port 5001 is copied byte for byte to the collector pod, TCP to 5002 is not", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "data", "10.60.0.0/24");
  await createNetwork(stack, "acme", "taps", "10.61.0.0/24");
  const ips: Record<string, string> = {};
  const add = async (pod: Pod) => {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  };
  const client = await makePod(n1, "client", "acme", knitterList(["data"]));
  const server = await makePod(stack.nodes[1], "server", "acme", knitterList(["data"]));
  const collector = await makePod(n1, "collector", "acme", knitterList(["taps"]));
  for (const pod of [client, server, collector]) await add(pod);
  const portOf = async (pod: Pod) =>
    (await api(stack, "GET", `ports?pod=acme/${pod.name}`, undefined, 200)).items[0].id as string;
  const payload = crypto.getRandomValues(new Uint8Array(60_000));
  const payloadFile = await Deno.makeTempFile();
  cleanup.defer(() => Deno.remove(payloadFile));
  await Deno.writeFile(payloadFile, payload);
  /** The stream to `port` as the collector pod's interface sees it. */
  const streamSeen = (port: number, expect: boolean) => {
    const tap: Tap = { netns: collector.netns, iface: "eth0", filter: `tcp port ${port}` };
    return seenAt(
      cleanup,
      {
        client: { netns: client.netns, ip: ips.client },
        server: { netns: server.netns, ip: ips.server },
        tap,
        port,
      },
      { file: payloadFile, length: payload.length },
      expect,
    );
  };
  const copyFlows = async () =>
    (await new Ovs(n1.sim.ovs).ofctl(["dump-flows", "br-int", "table=0"]))
      .split("\n").filter((l) => l.includes("clone(output:"));

  await t.step(
    "a mirror filtered to TCP 5001: its copies are flows, not a Mirror row",
    async () => {
      await api(stack, "POST", "tenants/acme/mirrors", {
        name: "only5001",
        sources: [{ network: "data", port: await portOf(client) }],
        direction: "out",
        filter: [{ protocol: "tcp", ports: String(COPIED) }],
        collector: { network: "taps", port: await portOf(collector) },
      });
      await waitFor("the copy flow on n1", async () => (await copyFlows()).length === 1, 10_000);
      assert.match((await copyFlows())[0], new RegExp(`tcp,in_port=\\d+,.*tp_dst=${COPIED} `));
      assert.deepEqual(await mirrorRows(n1), [], "no Mirror row: it would copy everything");
    },
  );

  await t.step(
    "TCP to 5001: what the client sends, byte for byte in the collector pod",
    async () => {
      const seen = await streamSeen(COPIED, true);
      assert.equal(seen.out.length, payload.length, "all the bytes the client sent");
      assert.deepEqual(seen.out, payload, "what the client sent, byte for byte");
      assert.equal(seen.back.length, 0, "direction out: not what the client receives");
    },
  );

  await t.step("TCP to 5002: nothing of it in the collector pod", async () => {
    const seen = await streamSeen(NOT_COPIED, false);
    assert.deepEqual([seen.out.length, seen.back.length], [0, 0]);
  });

  await t.step(
    "ovs-vswitchd killed and started again: the agent puts the copy flow back",
    async () => {
      await stopVswitchd(n1.sim, { kill: true });
      // Until the killed process has let its pidfile go, a new one refuses to start ("already running").
      await waitFor(
        "ovs-vswitchd started again",
        () =>
          startVswitchd(n1.sim).then(() => true, (err) => {
            if (/already running/.test(String(err?.message))) return false;
            throw err;
          }),
        10_000,
      );
      await waitFor("the copy flow back on n1", async () => {
        return (await copyFlows().catch(() => [])).length === 1;
      }, 15_000);
      const seen = await streamSeen(COPIED, true);
      assert.deepEqual(seen.out, payload, "after the restart, byte for byte");
      assert.equal((await streamSeen(NOT_COPIED, false)).out.length, 0);
    },
  );

  await t.step("the mirror deleted: its flow goes, nothing copied", async () => {
    await api(stack, "DELETE", "tenants/acme/mirrors/only5001", undefined, 204);
    await waitFor("no copy flow on n1", async () => (await copyFlows()).length === 0, 10_000);
    assert.equal((await streamSeen(COPIED, false)).out.length, 0);
  });
});
