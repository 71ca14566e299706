/**
 * Failed ADDs as a runtime sees them: the right CNI error code, a message that says what to fix,
 * and nothing left behind (no veth, OVS port, journal record or allocation) without any DEL.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { CniCall } from "./support/cni_runtime.ts";
import { leftovers, type NodeLeftovers, usage } from "./support/leftovers.ts";
import { knitterList, makePod } from "./support/pods.ts";
import { type Stack, type StackNode, startStack } from "../devstack/stack.ts";

Deno.test("e2e bad input: every failed ADD answers the right CNI code and a useful message, and leaves nothing behind", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  assert.equal((await stack.api("POST", "tenants", { name: "acme" })).status, 201);
  for (const [name, cidr] of [["control", "10.10.0.0/24"], ["tiny", "10.99.0.0/30"]]) {
    const r = await stack.api("POST", "tenants/acme/networks", {
      name,
      cidr,
      gateway: cidr.replace("0/", "1/").replace(/\/\d+$/, ""),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  // Pods that hold an address each: a fixed one, and the only one the tiny network has.
  const holders = [
    await makePod(n1, "fixed", "acme", knitterList([{ name: "control", ip: "10.10.0.50" }])),
    await makePod(n1, "full", "acme", knitterList(["tiny"])),
  ];
  for (const pod of holders) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  }
  const baseline = await snapshot(stack, n1);
  assert.equal(baseline.journal.length, 2);

  let count = 0;
  /** A fresh pod netns and its runtime, asking for `networks`. */
  const pod = (networks: (string | Record<string, unknown>)[]) =>
    makePod(n1, `p${++count}`, "acme", knitterList(networks));

  /** The call failed with `code`, a CNI error body naming `what`, and left nothing. */
  async function failsCleanly(r: CniCall, code: number, what: RegExp): Promise<void> {
    assert.notEqual(r.code, 0, "the plugin exits non-zero");
    assert.equal(r.out?.code, code, `CNI error code: ${JSON.stringify(r.out)} ${r.stderr}`);
    assert.equal(typeof r.out.msg, "string");
    assert.match(`${r.out.msg} ${r.out.details ?? ""}`, what);
    assert.deepEqual(await snapshot(stack, n1), baseline, "nothing left behind");
  }

  await t.step("missing or bad CNI environment: code 4, naming the variable", async () => {
    const p = await pod(["control"]);
    const conf = p.list.plugins[0];
    const full = { ...conf, cniVersion: p.list.cniVersion, name: p.list.name };
    const { containerId: _, ...noId } = p.attachment();
    await failsCleanly(await p.runtime.exec("ADD", noId, full), 4, /CNI_CONTAINERID/);
    const badIf = { ...p.attachment(), ifName: "a-very-long-ifname" };
    await failsCleanly(await p.runtime.exec("ADD", badIf, full), 4, /CNI_IFNAME/);
    await failsCleanly(await p.runtime.exec("FROB", p.attachment(), full), 4, /CNI_COMMAND/);
    const noNetns = { ...p.attachment(), netns: "/var/run/netns/kt-no-such-netns" };
    await failsCleanly(await p.runtime.exec("ADD", noNetns, full), 4, /kt-no-such-netns/);
  });

  await t.step(
    "malformed network config: code 6 for what is not JSON, 7 for bad keys",
    async () => {
      const p = await pod(["control"]);
      await failsCleanly(
        await p.runtime.exec("ADD", p.attachment(), "{not json"),
        6,
        /decode|JSON/,
      );
      const base = { type: "knitter", cniVersion: "1.1.0", name: "knitter" };
      const noName = { type: "knitter", cniVersion: "1.1.0" };
      await failsCleanly(await p.runtime.exec("ADD", p.attachment(), noName), 7, /name/);
      const badNets = { ...base, networks: "control" };
      await failsCleanly(await p.runtime.exec("ADD", p.attachment(), badNets), 7, /networks/);
    },
  );

  await t.step("unknown network: code 7, naming it", async () => {
    const r = await (await pod(["no-such-net"])).add();
    await failsCleanly(r, 7, /no-such-net/);
  });

  await t.step("fixed IP already taken: code 7, naming the address", async () => {
    const r = await (await pod([{ name: "control", ip: "10.10.0.50" }])).add();
    await failsCleanly(r, 7, /10\.10\.0\.50/);
  });

  await t.step("pool exhausted: code 11 (try again later), saying so", async () => {
    const r = await (await pod(["tiny"])).add();
    await failsCleanly(r, 11, /exhausted/);
  });

  await t.step(
    "agent down (stopped, or killed leaving its socket): code 11, the agent socket is not answering",
    async () => {
      for (const hard of [false, true]) {
        const p = await pod(["control"]);
        await n1.stopAgent(hard);
        try {
          await failsCleanly(await p.add(), 11, /agent.*not answering/);
        } finally {
          await n1.startAgent();
        }
        assert.equal((await p.add()).code, 0, "the same ADD works once the agent is back");
        assert.equal((await p.del()).code, 0);
      }
    },
  );

  await t.step("manager down during ADD: code 11, the manager is not reachable", async () => {
    const p = await pod(["control"]);
    await stack.stopManager();
    try {
      const r = await p.add();
      assert.equal(r.out?.code, 11, JSON.stringify(r.out));
      assert.match(r.out.msg, /manager.*not reachable/);
      assert.deepEqual(await leftovers(n1), withoutUsage(baseline), "nothing left on the node");
    } finally {
      await stack.startManager();
    }
    assert.deepEqual(await snapshot(stack, n1), baseline, "and nothing at the manager");
    assert.equal((await p.add()).code, 0, "the same ADD works once the manager is back");
    assert.equal((await p.del()).code, 0);
  });

  for (const p of holders) assert.equal((await p.del()).code, 0);
});

interface Snapshot extends NodeLeftovers {
  usage: Record<string, number>;
}

async function snapshot(stack: Stack, node: StackNode): Promise<Snapshot> {
  return {
    ...await leftovers(node),
    usage: {
      control: await usage(stack, "acme", "control"),
      tiny: await usage(stack, "acme", "tiny"),
    },
  };
}

function withoutUsage(s: Snapshot): NodeLeftovers {
  const { usage: _, ...rest } = s;
  return { ovsPorts: [...rest.ovsPorts], veths: [...rest.veths], journal: [...rest.journal] };
}
