/**
 * The CNI contract as a runtime sees it: the plugin first in a conflist, followed by Debian's
 * reference `tuning` and `portmap` plugins (which support CNI up to 1.0.0), driven through ADD,
 * CHECK and DEL with the cached result as prevResult, in each supported version.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import type { ConfList } from "./support/cni_runtime.ts";
import { flows, leftovers, portCookie, usage } from "./support/leftovers.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  type Pod,
} from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";

const PORT_MAPPINGS = [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }];

/**
 * CHECK runs the list without portmap: Debian's portmap 1.1.1 fails CHECK of every IPv4-only pod,
 * looking for IPv6 rules it never made (containernetworking/plugins#819, fixed upstream in 1.2).
 */
function checked(pod: Pod) {
  const list = { ...pod.list, plugins: pod.list.plugins.filter((p) => p.type !== "portmap") };
  return pod.runtime.check(list, pod.attachment());
}

function chain(cniVersion: string, mtu: number): ConfList {
  return knitterList(["control"], [
    { type: "tuning", mtu, sysctl: { "net.ipv4.conf.eth0.arp_notify": "1" } },
    { type: "portmap", capabilities: { portMappings: true }, snat: false },
  ], cniVersion);
}

Deno.test("e2e CNI contract: chained with tuning and portmap, ADD/CHECK/DEL work in every version and DEL leaves nothing", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  const net = { body: await createNetwork(stack, "acme", "control", "10.10.0.0/24") };
  const mtu = net.body.mtu - 50;

  await t.step(
    "CNI 1.0.0 chain: ADD gives a result the next plugins use, CHECK passes, DEL twice succeeds and leaves nothing",
    async () => {
      const pod = await makePod(n1, "c10", "acme", chain("1.0.0", mtu), {
        runtimeConfig: { portMappings: PORT_MAPPINGS },
      });
      const add = await pod.add();
      assert.equal(add.code, 0, `ADD: ${JSON.stringify(add.out)} ${add.stderr}`);
      const result = add.out;
      assert.equal(result.cniVersion, "1.0.0");
      const ip = addressOf(result);
      const eth0 = result.interfaces.find((i: { name: string }) => i.name === "eth0");
      assert.equal(eth0.sandbox, pod.netns);
      assert.equal(eth0.mtu, undefined, "1.0.0 results have no interface mtu");
      for (const a of result.ips) {
        assert.equal(
          result.interfaces[a.interface]?.sandbox,
          pod.netns,
          "ips point at the pod's end",
        );
      }
      assert.ok(
        result.routes.some((r: { dst: string; gw?: string }) =>
          r.dst === "0.0.0.0/0" && r.gw === "10.10.0.1"
        ),
        JSON.stringify(result.routes),
      );
      // tuning acted on the interface knitter made, portmap on the address knitter gave.
      assert.equal(await podSysctl(pod, "net.ipv4.conf.eth0.arp_notify"), "1");
      assert.equal(await podMtu(pod), mtu);
      assert.match(await natRules(stack), new RegExp(`--to-destination ${ip}:80\\b`));

      const check = await checked(pod);
      assert.equal(check.code, 0, `CHECK after ADD: ${JSON.stringify(check.out)} ${check.stderr}`);

      // CHECK reads prevResult: one that claims another address fails.
      const hostIfName = result.interfaces.find((i: { sandbox?: string }) => !i.sandbox).name;
      const cookie = await portCookie(n1, hostIfName);
      assert.ok((await flows(n1, `cookie=${cookie}/-1`)).length > 0);
      const forged = structuredClone(result);
      forged.ips.push({ ...forged.ips[0], address: "10.10.0.250/24" });
      const forgedCheck = await pod.runtime.exec("CHECK", pod.attachment(), {
        ...pod.list.plugins[0],
        cniVersion: "1.0.0",
        name: pod.list.name,
        prevResult: forged,
      });
      assert.notEqual(
        forgedCheck.code,
        0,
        "CHECK fails when prevResult lists an address ADD did not give",
      );
      assert.match(forgedCheck.out.msg, /10\.10\.0\.250/);

      assert.equal((await pod.del()).code, 0, "DEL");
      const again = await pod.runtime.del(pod.list, pod.attachment());
      assert.equal(again.code, 0, `a second DEL succeeds: ${JSON.stringify(again.out)}`);
      assert.doesNotMatch(
        await natRules(stack),
        new RegExp(`${ip}:80`),
        "portmap's rules are gone",
      );
      await assertNothingLeft(stack, cookie);
    },
  );

  await t.step(
    "CHECK fails with a CNI error when the pod's address was removed by hand",
    async () => {
      const pod = await makePod(n1, "chk", "acme", chain("1.0.0", mtu), {
        runtimeConfig: { portMappings: PORT_MAPPINGS },
      });
      const add = await pod.add();
      assert.equal(add.code, 0, JSON.stringify(add.out));
      const ip = add.out.ips[0].address;
      assert.equal((await checked(pod)).code, 0, "CHECK passes after ADD");
      await run(["ip", "-n", ipNetnsName(pod.netns), "addr", "del", ip, "dev", "eth0"]);
      const check = await checked(pod);
      assert.notEqual(check.code, 0, "CHECK fails");
      assert.equal(check.out.cniVersion, "1.0.0");
      assert.equal(typeof check.out.code, "number");
      assert.match(check.out.msg, new RegExp(`eth0.*${ip.replaceAll(".", "\\.")}`));
      assert.equal((await pod.del()).code, 0);
      await assertNothingLeft(stack);
    },
  );

  await t.step(
    "CNI 0.4.0 chain: the result is converted (IP versions) and DEL after the netns is gone succeeds",
    async () => {
      const pod = await makePod(n1, "c04", "acme", chain("0.4.0", mtu), {
        runtimeConfig: { portMappings: PORT_MAPPINGS },
      });
      const add = await pod.add();
      assert.equal(add.code, 0, `ADD: ${JSON.stringify(add.out)} ${add.stderr}`);
      assert.equal(add.out.cniVersion, "0.4.0");
      assert.equal(add.out.ips[0].version, "4");
      const ip = addressOf(add.out);
      assert.match(await natRules(stack), new RegExp(`--to-destination ${ip}:80\\b`));
      assert.equal((await checked(pod)).code, 0, "CHECK passes after ADD");
      await run(["ip", "netns", "del", ipNetnsName(pod.netns)]);
      const del = await pod.del();
      assert.equal(del.code, 0, `DEL without the netns: ${JSON.stringify(del.out)} ${del.stderr}`);
      assert.equal((await pod.del()).code, 0, "and once more");
      assert.doesNotMatch(
        await natRules(stack),
        new RegExp(`${ip}:80`),
        "portmap's rules are gone",
      );
      await assertNothingLeft(stack);
    },
  );

  await t.step(
    "CNI 1.1.0, knitter alone: the result keeps the interface MTU; CHECK and DEL pass",
    async () => {
      const pod = await makePod(n1, "c11", "acme", knitterList(["control"]));
      const add = await pod.add();
      assert.equal(add.code, 0, JSON.stringify(add.out));
      assert.equal(add.out.cniVersion, "1.1.0");
      assert.equal(
        add.out.interfaces.find((i: { name: string }) => i.name === "eth0").mtu,
        mtu + 50,
      );
      assert.equal((await checked(pod)).code, 0);
      assert.equal((await pod.del()).code, 0);
      await assertNothingLeft(stack);
    },
  );
});

async function assertNothingLeft(stack: Stack, cookie?: string): Promise<void> {
  for (const node of stack.nodes) {
    assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
    if (cookie) {
      assert.deepEqual(await flows(node, `cookie=${cookie}/-1`), [], "no flow of the port");
    }
  }
  assert.equal(await usage(stack, "acme", "control"), 0, "the manager's usage is back to 0");
}

async function podSysctl(pod: Pod, key: string): Promise<string> {
  const r = await run(["ip", "netns", "exec", ipNetnsName(pod.netns), "sysctl", "-n", key]);
  return r.stdout.trim();
}

async function podMtu(pod: Pod): Promise<number> {
  const r = await run(["ip", "-n", ipNetnsName(pod.netns), "-j", "link", "show", "eth0"]);
  return JSON.parse(r.stdout)[0].mtu;
}

/** The node's NAT rules, where portmap puts its DNAT. */
async function natRules(stack: Stack): Promise<string> {
  const r = await run(["iptables", "-t", "nat", "-S"], { netns: stack.nodes[0].sim.netns });
  return r.stdout;
}
