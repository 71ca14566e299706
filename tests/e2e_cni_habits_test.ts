/**
 * The CNI contract under runtimes' habits: sandboxes recreated under the same container ID or
 * beside the old one, interfaces that other plugins made, netns paths and arguments that are not
 * what they should be, fixed addresses and MACs asked for in every way the reference plugins
 * honour, and a chained plugin that changes the MAC. Each case says what the runtime sees and
 * checks that nothing is left behind, on the node or at the manager.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import type { Attachment, CniCall, ConfList } from "./support/cni_runtime.ts";
import { leftovers, type NodeLeftovers, usage } from "./support/leftovers.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  pings,
  type Pod,
} from "./support/pods.ts";
import { addPodNetns } from "../devstack/sim_node.ts";
import { type Stack, type StackNode, startStack } from "../devstack/stack.ts";

interface Snapshot extends NodeLeftovers {
  used: number;
}

Deno.test("e2e CNI habits: recreated sandboxes, foreign interfaces, bad netns and args, fixed IP and MAC, tuning's MAC", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const list = knitterList(["control"]);
  const snapshot = async (): Promise<Snapshot> => ({
    ...await leftovers(n1),
    used: await usage(stack, "acme", "control"),
  });

  // A pod every step pings, to show that an interface really works.
  const peer = await makePod(n1, "peer", "acme", list);
  const peerAdd = await peer.add();
  assert.equal(peerAdd.code, 0, JSON.stringify(peerAdd.out));
  const peerIp = addressOf(peerAdd.out);
  const baseline = await snapshot();

  /** The call failed with `code` and a message matching `what`, and left nothing. */
  async function failsCleanly(r: CniCall, code: number, what: RegExp, before = baseline) {
    assert.notEqual(r.code, 0, `the plugin exits non-zero: ${JSON.stringify(r.out)}`);
    assert.equal(r.out?.code, code, `CNI error code: ${JSON.stringify(r.out)} ${r.stderr}`);
    assert.match(`${r.out.msg} ${r.out.details ?? ""}`, what);
    assert.deepEqual(await snapshot(), before, "nothing left behind");
  }

  await t.step(
    "1. ADD again with the same container ID and interface in a new netns: made there, never a stale result",
    async () => {
      const pod = await makePod(n1, "re", "acme", list);
      const first = await pod.add();
      assert.equal(first.code, 0, JSON.stringify(first.out));
      const again = await pod.add();
      assert.equal(again.code, 0, JSON.stringify(again.out));
      assert.deepEqual(
        podEnd(again.out),
        podEnd(first.out),
        "the same netns, intact: the same answer",
      );

      // The runtime recreated the sandbox: a new netns; the old one is still there.
      const ns2 = await addPodNetns(n1.sim, "re-2");
      const second = await pod.runtime.add(pod.list, { ...pod.attachment(), netns: ns2 });
      assert.equal(second.code, 0, JSON.stringify(second.out));
      assert.equal(podEnd(second.out).sandbox, ns2, "the result names the new netns");
      await assertLink(ns2, second.out);
      assert.equal(await link(pod.netns, "eth0"), null, "nothing left in the old netns");
      assert.ok(await pingsFrom(ns2, peerIp), "the new sandbox reaches the peer");
      assert.deepEqual((await snapshot()).journal.length, baseline.journal.length + 1);
      assert.equal((await snapshot()).used, baseline.used + 1, "one address, not two");

      // Recreated again, the old netns deleted first.
      await run(["ip", "netns", "del", ipNetnsName(ns2)]);
      const ns3 = await addPodNetns(n1.sim, "re-3");
      const att3 = { ...pod.attachment(), netns: ns3 };
      const third = await pod.runtime.add(pod.list, att3);
      assert.equal(third.code, 0, JSON.stringify(third.out));
      assert.equal(podEnd(third.out).sandbox, ns3);
      await assertLink(ns3, third.out);
      assert.ok(await pingsFrom(ns3, peerIp), "the third sandbox reaches the peer");

      // The same netns, but the interface is gone: made again, not answered from the record.
      await run(["ip", "-n", ipNetnsName(ns3), "link", "del", "eth0"]);
      const fourth = await pod.runtime.add(pod.list, att3);
      assert.equal(fourth.code, 0, JSON.stringify(fourth.out));
      await assertLink(ns3, fourth.out);
      assert.ok(await pingsFrom(ns3, peerIp), "the rebuilt interface reaches the peer");

      assert.equal((await pod.runtime.check(pod.list, att3)).code, 0, "CHECK");
      assert.equal((await pod.runtime.del(pod.list, att3)).code, 0, "DEL");
      assert.deepEqual(await snapshot(), baseline, "nothing left");
    },
  );

  await t.step(
    "2. two sandboxes of one pod: each its own address and MAC, a failed third removes nothing, DEL of the old leaves the new working",
    async () => {
      const a = await makePod(n1, "sb", "acme", list);
      const addA = await a.add();
      assert.equal(addA.code, 0, JSON.stringify(addA.out));
      const attB: Attachment = {
        ...a.attachment(),
        containerId: containerId(),
        netns: await addPodNetns(n1.sim, "sb-2"),
      };
      const addB = await a.runtime.add(list, attB);
      assert.equal(addB.code, 0, JSON.stringify(addB.out));
      const [endA, endB] = [podEnd(addA.out), podEnd(addB.out)];
      assert.notEqual(addressOf(addA.out), addressOf(addB.out), "two addresses");
      assert.notEqual(endA.mac, endB.mac, "two MACs");
      assert.ok(await pingsFrom(a.netns, peerIp), "the old sandbox reaches the peer");
      assert.ok(await pingsFrom(attB.netns, peerIp), "the new sandbox reaches the peer");

      // A third sandbox asks for the old one's address: refused, and nothing of the others goes.
      const before = await snapshot();
      const fixed = knitterList([{ name: "control", ip: addressOf(addA.out) }]);
      const attC: Attachment = {
        ...a.attachment(),
        containerId: containerId(),
        netns: await addPodNetns(n1.sim, "sb-3"),
      };
      const addC = await a.runtime.add(fixed, attC);
      await failsCleanly(addC, 7, new RegExp(addressOf(addA.out).replaceAll(".", "\\.")), before);
      assert.equal((await a.runtime.del(fixed, attC)).code, 0, "DEL of the failed one");
      assert.deepEqual(await snapshot(), before, "DEL of the failed one removes nothing");
      assert.ok(await pingsFrom(a.netns, peerIp), "the old sandbox still works");
      assert.ok(await pingsFrom(attB.netns, peerIp), "the new sandbox still works");

      // The old sandbox goes; the new one keeps working, and keeps its port.
      assert.equal((await a.del()).code, 0, "DEL of the old sandbox");
      assert.ok(await pingsFrom(attB.netns, peerIp), "the new sandbox works after the old's DEL");
      assert.equal((await a.runtime.check(list, attB)).code, 0, "CHECK of the new sandbox");
      const ports = (await stack.api("GET", "ports?pod=acme/sb")).body.items as { ip: string }[];
      assert.deepEqual(ports.map((p) => p.ip), [addressOf(addB.out)], "the new sandbox's port");
      assert.equal((await a.runtime.del(list, attB)).code, 0, "DEL of the new sandbox");
      assert.deepEqual(await snapshot(), baseline, "nothing left");
    },
  );

  await t.step(
    "3. a failed ADD or a DEL never removes an interface knitter did not make",
    async () => {
      // Another plugin made eth0 (a veth) in the netns before knitter was called.
      const p = await makePod(n1, "taken", "acme", list);
      await foreignVeth(p.netns);
      await failsCleanly(await p.add(), 4, /eth0 already exists in .*taken/);
      assert.ok(await link(p.netns, "eth0"), "the other plugin's eth0 survives the ADD");
      assert.equal((await p.del()).code, 0, "DEL");
      assert.ok(await link(p.netns, "eth0"), "and the DEL");

      // The host end vanished (and with it our eth0), then something else made an eth0 veth.
      const q = await makePod(n1, "swapped", "acme", list);
      const add = await q.add();
      assert.equal(add.code, 0, JSON.stringify(add.out));
      const hostEnd = add.out.interfaces.find((i: { sandbox?: string }) => !i.sandbox).name;
      await run(["ip", "-n", n1.sim.netns, "link", "del", hostEnd]);
      await foreignVeth(q.netns);
      assert.equal((await q.del()).code, 0, "DEL");
      assert.ok(await link(q.netns, "eth0"), "the eth0 knitter did not make survives DEL");
      assert.deepEqual(await snapshot(), baseline, "nothing of knitter's left");
    },
  );

  await t.step(
    "4. bad netns, K8S_* arguments and oversized requests: a clear CNI error, nothing left",
    async () => {
      const p = await makePod(n1, "bad", "acme", list);
      const conf = { ...list.plugins[0], cniVersion: list.cniVersion, name: list.name };
      const add = (att: Partial<Attachment>, c: Record<string, unknown> = conf) =>
        p.runtime.exec("ADD", { ...p.attachment(), ...att }, c);

      const file = await Deno.makeTempFile({ dir: stack.dir });
      const dir = await Deno.makeTempDir({ dir: stack.dir });
      // Where pid 1 is out of reach (this test machine's own init), the agent cannot read it.
      const host = await Deno.stat("/proc/1/ns/net").then(
        () => /host's network namespace/,
        () => /cannot be read by the agent/,
      );
      const netnses: [string, RegExp][] = [
        ["/proc/1/ns/net", host],
        ["/proc/self/ns/net", /agent's own network namespace/],
        [`/proc/${n1.agentPid}/ns/net`, /agent's own network namespace/],
        [`/var/run/netns/${n1.sim.netns}`, /agent's own network namespace/],
        [file, /not a network namespace/],
        [dir, /not a network namespace/],
        [`${dir}/missing`, /does not exist/],
      ];
      for (const [netns, why] of netnses) {
        await failsCleanly(await add({ netns }), 4, new RegExp(`CNI_NETNS.*${why.source}`));
      }

      const badArgs: [Record<string, string>, RegExp][] = [
        [{ K8S_POD_UID: "not a uid!" }, /K8S_POD_UID/],
        [{ K8S_POD_UID: "u".repeat(100) }, /K8S_POD_UID/],
        [{ K8S_POD_NAMESPACE: "Not_A_Namespace" }, /K8S_POD_NAMESPACE/],
        [{ K8S_POD_NAME: "n".repeat(300) }, /K8S_POD_NAME/],
        [{ K8S_POD_INFRA_CONTAINER_ID: "-bad" }, /K8S_POD_INFRA_CONTAINER_ID/],
      ];
      for (const [args, what] of badArgs) {
        const att = { ...p.attachment(), args: { ...p.args, ...args } };
        await failsCleanly(await p.runtime.exec("ADD", att, conf), 4, what);
        const del = await p.runtime.exec("DEL", att, conf);
        assert.equal(del.code, 0, `DEL with the same arguments: ${JSON.stringify(del.out)}`);
      }
      const longId = { containerId: "c".repeat(1500) };
      await failsCleanly(await add(longId), 4, /CNI_CONTAINERID/);
      assert.equal((await p.runtime.exec("DEL", { ...p.attachment(), ...longId }, conf)).code, 0);

      // Records bigger than the agent's store takes (64 KiB a value): refused before anything.
      const hugePrev = {
        cniVersion: "1.1.0",
        interfaces: Array.from({ length: 2000 }, (_, i) => ({ name: `veth${i}`, mac: "02:00" })),
        ips: [],
      };
      await failsCleanly(await add({}, { ...conf, prevResult: hugePrev }), 7, /too large.*KiB/);
      const many = Array.from({ length: 2500 }, () => "control");
      await failsCleanly(await add({}, { ...conf, networks: many }), 7, /too large.*KiB/);
      const manyArgs = { args: { ...p.args, KNITTER_NETWORKS: many.join(",") } };
      await failsCleanly(await add(manyArgs), 7, /too large.*KiB/);

      assert.equal((await p.add()).code, 0, "the same pod, asked properly, is attached");
      assert.equal((await p.del()).code, 0);
      assert.deepEqual(await snapshot(), baseline);
    },
  );

  await t.step(
    "5. IP= and MAC= in CNI_ARGS and the ips / mac capabilities are honoured, checked, and refused clearly",
    async () => {
      const capable: ConfList = {
        ...list,
        plugins: [{
          type: "knitter",
          networks: ["control"],
          capabilities: { ips: true, mac: true },
        }],
      };
      const asked: [string, Record<string, string>, Record<string, unknown>, string, string?][] = [
        [
          "args",
          { IP: "10.10.0.77", MAC: "02:aa:bb:cc:dd:01" },
          {},
          "10.10.0.77",
          "02:aa:bb:cc:dd:01",
        ],
        ["argspfx", { IP: "10.10.0.78/24" }, {}, "10.10.0.78"],
        [
          "caps",
          {},
          { ips: ["10.10.0.79/24"], mac: "02:AA:BB:CC:DD:03" },
          "10.10.0.79",
          "02:aa:bb:cc:dd:03",
        ],
        ["capsnp", {}, { ips: ["10.10.0.80"] }, "10.10.0.80"],
      ];
      const pods: Pod[] = [];
      const atts: Attachment[] = [];
      for (const [name, args, runtimeConfig, ip, mac] of asked) {
        const pod = await makePod(n1, name, "acme", capable, { runtimeConfig });
        const att = { ...pod.attachment(), args: { ...pod.args, ...args } };
        const r = await pod.runtime.add(capable, att);
        assert.equal(r.code, 0, `${name}: ${JSON.stringify(r.out)}`);
        assert.equal(addressOf(r.out), ip, `${name}: the address asked for`);
        if (mac) assert.equal(podEnd(r.out).mac, mac, `${name}: the MAC asked for`);
        await assertLink(pod.netns, r.out);
        assert.ok(await pingsFrom(pod.netns, peerIp), `${name} reaches the peer`);
        pods.push(pod);
        atts.push(att);
      }

      const before = await snapshot();
      const refused: [Record<string, string>, Record<string, unknown>, number, RegExp][] = [
        [{ IP: "10.10.0.77" }, {}, 7, /IP= in CNI_ARGS: .*10\.10\.0\.77.*used/],
        [{ IP: "10.20.0.5" }, {}, 7, /10\.20\.0\.5.*(outside|not in)/],
        [{ IP: "10.10.0.300" }, {}, 4, /IP=.*10\.10\.0\.300.*not an IP address/],
        [{ IP: "10.10.0.81/16" }, {}, 7, /10\.10\.0\.81\/16.*\/24/],
        [{}, { ips: ["nonsense"] }, 7, /runtimeConfig\.ips.*nonsense/],
        [{}, { ips: ["10.10.0.82/24", "10.10.0.83/24"] }, 7, /runtimeConfig\.ips.*one address/],
        [{ IP: "10.10.0.84" }, { ips: ["10.10.0.85/24"] }, 7, /IP=.*runtimeConfig\.ips/],
        [{ MAC: "01:00:5e:00:00:01" }, {}, 4, /MAC=.*unicast/],
        [{ MAC: "00:00:00:00:00:00" }, {}, 4, /MAC=.*00:00:00:00:00:00/],
        [{ MAC: "zz:zz" }, {}, 4, /MAC=.*zz:zz/],
        [
          { MAC: "02:aa:bb:cc:dd:01" },
          {},
          7,
          /MAC= in CNI_ARGS: .*02:aa:bb:cc:dd:01.*already used/,
        ],
        [{ MAC: "00:11:22:33:44:55" }, {}, 7, /MAC= in CNI_ARGS: .*locally administered/],
        [{}, { mac: "ff:ff:ff:ff:ff:ff" }, 7, /runtimeConfig\.mac.*unicast/],
      ];
      for (const [i, [args, runtimeConfig, code, what]] of refused.entries()) {
        const pod = await makePod(n1, `no${i}`, "acme", capable, { runtimeConfig });
        const att = { ...pod.attachment(), args: { ...pod.args, ...args } };
        await failsCleanly(await pod.runtime.add(capable, att), code, what, before);
      }

      for (const [i, pod] of pods.entries()) {
        assert.equal((await pod.runtime.del(capable, atts[i])).code, 0, `DEL ${pod.name}`);
      }
      assert.deepEqual(await snapshot(), baseline);
    },
  );

  await t.step(
    "6. tuning chained with a MAC: CHECK says the MAC was changed after ADD, why it breaks, what to do instead",
    async () => {
      const tuned = knitterList(
        ["control"],
        [{ type: "tuning", mac: "02:11:22:33:44:55" }],
        "1.0.0",
      );
      const pod = await makePod(n1, "tuned", "acme", tuned);
      const add = await pod.add();
      assert.equal(add.code, 0, JSON.stringify(add.out));
      assert.equal((await link(pod.netns, "eth0"))?.mac, "02:11:22:33:44:55", "tuning set it");
      const check = await pod.check();
      assert.equal(check.out?.code, 100, JSON.stringify(check.out));
      const msg = `${check.out.msg} ${check.out.details ?? ""}`;
      assert.match(msg, /02:11:22:33:44:55/);
      assert.match(msg, /changed after ADD/);
      assert.match(msg, /tuning/);
      assert.match(msg, /anti-spoofing/);
      assert.match(msg, /MAC= in CNI_ARGS/);
      assert.match(msg, /"mac" capability/);
      assert.equal((await pod.del()).code, 0);
      assert.deepEqual(await snapshot(), baseline);
    },
  );

  await t.step(
    "7. a runtime that passes no Kubernetes arguments (containerd's ctr, nerdctl, cnitool): the missing default tenant says what to do; the config's tenant key places the pod",
    async () => {
      const p = await makePod(n1, "plain", "acme", list);
      const conf = { ...list.plugins[0], cniVersion: list.cniVersion, name: list.name };
      // No CNI_ARGS at all, as those runtimes call a plugin.
      const { args: _k8s, ...att } = p.attachment();
      await failsCleanly(
        await p.runtime.exec("ADD", att, conf),
        7,
        /Tenant "default" does not exist.*no K8S_POD_NAMESPACE.*"tenant" key of the network config.*knitctl create tenant default/,
      );
      const placed = { ...conf, tenant: "acme" };
      const add = await p.runtime.exec("ADD", att, placed);
      assert.equal(add.code, 0, JSON.stringify(add.out));
      assert.ok(await pingsFrom(p.netns, peerIp), "the pod is on acme's network");
      assert.equal((await p.runtime.exec("DEL", att, placed)).code, 0);
      assert.deepEqual(await snapshot(), baseline);
    },
  );

  assert.equal((await peer.del()).code, 0);
  await assertNothingLeft(stack, n1);
});

/** The pod end of knitter's interface in a result. */
// deno-lint-ignore no-explicit-any
function podEnd(result: any): { name: string; mac: string; sandbox: string } {
  const i = result.interfaces.find((i: { name: string; sandbox?: string }) =>
    i.name === "eth0" && i.sandbox
  );
  if (!i) throw new Error(`no eth0 in ${JSON.stringify(result)}`);
  return i;
}

/** eth0 in `netns` as it is: MAC and addresses (with prefix); null when missing. */
async function link(
  netns: string,
  ifName: string,
): Promise<{ mac: string; addresses: string[] } | null> {
  const r = await run(["ip", "-n", ipNetnsName(netns), "-j", "addr", "show", "dev", ifName], {
    check: false,
  });
  if (r.code !== 0) return null;
  const [l] = JSON.parse(r.stdout) as {
    address: string;
    addr_info: { family: string; local: string; prefixlen: number }[];
  }[];
  return {
    mac: l.address,
    addresses: l.addr_info.filter((a) => a.family === "inet").map((a) =>
      `${a.local}/${a.prefixlen}`
    ),
  };
}

/** eth0 in `netns` has the MAC and address the result says. */
// deno-lint-ignore no-explicit-any
async function assertLink(netns: string, result: any): Promise<void> {
  const l = await link(netns, "eth0");
  assert.ok(l, `eth0 exists in ${netns}`);
  assert.equal(l.mac, podEnd(result).mac);
  assert.deepEqual(l.addresses, [`${addressOf(result)}/24`]);
}

/** A veth named eth0 in the netns, as another plugin would make it. */
async function foreignVeth(netns: string): Promise<void> {
  await run([
    "ip",
    "-n",
    ipNetnsName(netns),
    "link",
    "add",
    "eth0",
    "type",
    "veth",
    "peer",
    "name",
    "other0",
  ]);
}

function pingsFrom(netns: string, ip: string): Promise<boolean> {
  return pings({ netns } as Pod, ip);
}

function containerId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

async function assertNothingLeft(stack: Stack, node: StackNode): Promise<void> {
  assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
  assert.equal(await usage(stack, "acme", "control"), 0, "the manager's usage is back to 0");
}
