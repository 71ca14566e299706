/**
 * Bandwidth limits with real Open vSwitch (userspace datapath) and network namespaces, measured
 * with iperf3: a pod limited by runtimeConfig.bandwidth (the CNI "bandwidth" capability) or by its
 * network's default gets its rate within 10 % in each direction, on one node and across nodes,
 * while pods without a limit go well above it in the same run (the yardstick). The limits survive
 * an ovs-vswitchd restart and an agent restart; DEL takes them away with the veth.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, startStack } from "../devstack/stack.ts";
import { startVswitchd, stopVswitchd } from "../devstack/sim_node.ts";
import { addressOf, ipNetnsName, makePod, type Pod } from "./support/pods.ts";
import { iperfRate, type Stream } from "./support/iperf.ts";
import { api } from "./support/stack_api.ts";

const MBIT = 1_000_000;
/** Low enough that two busy cores are never the bottleneck (unlimited pods reach hundreds). */
const INGRESS = 20 * MBIT;
const EGRESS = 12 * MBIT;

interface Added {
  pod: Pod;
  ip: string;
  netns: string;
  hostIfName: string;
}

Deno.test("e2e bandwidth: runtimeConfig and network-default limits hold within 10 % in each direction, on one node and across nodes", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" });
  await api(stack, "POST", "tenants/acme/networks", {
    name: "web",
    cidr: "10.60.0.0/24",
    gateway: "10.60.0.1",
  });

  const bandwidth = { ingressRate: INGRESS, egressRate: EGRESS };
  const limited = await added(n1, "lim", "web", { bandwidth });
  const local = await added(n1, "free1", "web");
  const remote = await added(n2, "free2", "web");

  /** Into and out of `p`, from and to `peer`, as measured now. */
  const both = async (p: Added, peer: Added) => ({
    into: await iperfRate(cleanup, stream(peer, p)),
    out: await iperfRate(cleanup, stream(p, peer)),
  });
  /** Measures of the rate into `p` from `peer`, and out of `p` to it. */
  const into = (p: Added, peer: Added) => () => iperfRate(cleanup, stream(peer, p));
  const out = (p: Added, peer: Added) => () => iperfRate(cleanup, stream(p, peer));
  /**
   * Measures the rate `measure` gives against `limit`: never more than 10 % above it, and within 10
   * % below. A shaper cannot give more than its rate, but a machine short of CPU can give less: a
   * reading below is measured again (three readings at most), one above fails at once.
   */
  const held = async (what: string, measure: () => Promise<number>, limit: number) => {
    let best = 0;
    for (let reading = 1; reading <= 3 && best < 0.9 * limit; reading++) {
      const measured = await measure();
      const ratio = measured / limit;
      console.log(
        `${what} (reading ${reading}): ${(measured / MBIT).toFixed(2)} Mbit/s of ${limit / MBIT} (${
          ratio.toFixed(3)
        })`,
      );
      assert.ok(ratio <= 1.1, `${what}: ${measured} bit/s is more than 10 % above ${limit}`);
      best = Math.max(best, measured);
    }
    assert.ok(
      best >= 0.9 * limit,
      `${what}: ${best} bit/s, the best of three readings, is more than 10 % below ${limit}`,
    );
  };

  await t.step("the yardstick: pods without a limit go well above it", async () => {
    for (
      const [what, a, b] of [["one node", local, remote], ["across nodes", remote, local]] as const
    ) {
      const r = await both(a, b);
      console.log(
        `no limit, ${what}: into ${(r.into / MBIT).toFixed(1)}, out ${
          (r.out / MBIT).toFixed(1)
        } Mbit/s`,
      );
      assert.ok(
        r.into > 3 * INGRESS && r.out > 3 * INGRESS,
        `no limit, ${what}: ${JSON.stringify(r)}`,
      );
    }
  });

  await t.step(
    "runtimeConfig.bandwidth: on the veth's two ends, and held on one node and across nodes",
    async () => {
      const host = await endLimit(limited.hostIfName, n1.sim.netns);
      const pod = await endLimit("eth0", limited.netns);
      assert.equal(host?.rate, INGRESS, "the host end limits what goes into the pod");
      assert.equal(pod?.rate, EGRESS, "the pod end limits what the pod sends");
      assert.equal(
        await endLimit(local.hostIfName, n1.sim.netns),
        null,
        "no limit asked: none made",
      );
      for (const [what, peer] of [["one node", local], ["across nodes", remote]] as const) {
        await held(`runtimeConfig ingress, ${what}`, into(limited, peer), INGRESS);
        await held(`runtimeConfig egress, ${what}`, out(limited, peer), EGRESS);
      }
    },
  );

  await t.step("the network's default: a pod on it that asks for nothing is limited", async () => {
    await api(stack, "POST", "tenants/acme/networks", {
      name: "slow",
      cidr: "10.61.0.0/24",
      gateway: "10.61.0.1",
      bandwidth: { ingressRate: EGRESS, egressRate: INGRESS },
    });
    const d1 = await added(n1, "dflt1", "slow");
    // runtimeConfig wins over the network's default, per direction.
    const fast = await added(n1, "fast", "slow", {
      bandwidth: { ingressRate: 100 * MBIT, egressRate: 100 * MBIT },
    });
    const mixed = await added(n2, "mixed", "slow", { bandwidth: { ingressRate: INGRESS } });
    assert.equal((await endLimit(d1.hostIfName, n1.sim.netns))?.rate, EGRESS);
    assert.equal((await endLimit("eth0", d1.netns))?.rate, INGRESS);
    assert.equal((await endLimit(fast.hostIfName, n1.sim.netns))?.rate, 100 * MBIT);
    assert.equal((await endLimit(mixed.hostIfName, n2.sim.netns))?.rate, INGRESS);
    assert.equal((await endLimit("eth0", mixed.netns))?.rate, INGRESS, "egress: the network's");
    await held("network default ingress, one node", into(d1, fast), EGRESS);
    await held("network default egress, one node", out(d1, fast), INGRESS);
    await held("network default ingress, across nodes", into(d1, mixed), EGRESS);
    await held("network default egress, across nodes", out(d1, mixed), INGRESS);
    for (const p of [d1, fast, mixed]) assert.equal((await p.pod.del()).code, 0);
  });

  await t.step(
    "an ovs-vswitchd restart and an agent restart leave the limits; DEL takes them away with the veth",
    async () => {
      // ovs-vswitchd replaces the root qdisc of every port it (re)opens, unless the port has the
      // QoS linux-noop, which the agent gives limited ports: the host end's limit stays.
      await stopVswitchd(n1.sim, { kill: true });
      await startVswitchd(n1.sim);
      assert.equal(
        (await endLimit(limited.hostIfName, n1.sim.netns))?.rate,
        INGRESS,
        "after an ovs-vswitchd restart",
      );
      await n1.stopAgent(true);
      await n1.startAgent();
      assert.equal((await endLimit(limited.hostIfName, n1.sim.netns))?.rate, INGRESS);
      assert.equal((await endLimit("eth0", limited.netns))?.rate, EGRESS);
      await held("runtimeConfig ingress after a restart", into(limited, local), INGRESS);
      assert.equal((await limited.pod.del()).code, 0);
      const gone = await run(["ip", "link", "show", limited.hostIfName], {
        netns: n1.sim.netns,
        check: false,
      });
      assert.notEqual(gone.code, 0, "the host end is gone, its limit with it");
    },
  );

  for (const p of [local, remote]) assert.equal((await p.pod.del()).code, 0);
});

function stream(from: Added, to: Added): Stream {
  return { from: from.netns, to: to.netns, addr: to.ip };
}

async function added(
  node: Stack["nodes"][number],
  name: string,
  network: string,
  runtimeConfig?: Record<string, unknown>,
): Promise<Added> {
  const list = {
    cniVersion: "1.1.0",
    name: "knitter",
    plugins: [{ type: "knitter", networks: [network], capabilities: { bandwidth: true } }],
  };
  const pod = await makePod(node, name, "acme", list, runtimeConfig ? { runtimeConfig } : {});
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  // The host end is the veth peer of the pod's eth0 (by ifindex), in the node's netns.
  const podNetns = ipNetnsName(pod.netns);
  const [eth0] = JSON.parse(
    (await run(["ip", "-j", "link", "show", "eth0"], { netns: podNetns })).stdout,
  );
  const peers = JSON.parse(
    (await run(["ip", "-j", "link", "show", "type", "veth"], { netns: node.sim.netns })).stdout,
  ) as { ifname: string; ifindex: number }[];
  const hostIfName = peers.find((l) => l.ifindex === eth0.link_index)?.ifname;
  assert.ok(hostIfName, `the host end of ${name}'s eth0`);
  return { pod, ip: addressOf(r.out), netns: podNetns, hostIfName };
}

/** The token bucket at the root of an interface, as `tc` reports it (bits), or null. */
async function endLimit(
  ifName: string,
  netns: string,
): Promise<{ rate: number; burst: number } | null> {
  const r = await run(["tc", "-j", "qdisc", "show", "dev", ifName, "root"], { netns });
  // deno-lint-ignore no-explicit-any
  const q = (JSON.parse(r.stdout || "[]") as any[]).find((q) => q.kind === "tbf");
  return q ? { rate: q.options.rate * 8, burst: q.options.burst * 8 } : null;
}
