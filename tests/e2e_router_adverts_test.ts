/**
 * Router advertisements end to end (agent/PIPELINE.md, "Router advertisements"), on two simulated
 * nodes with real Open vSwitch: a network with `ipv6RouterAdvertisements` (SLAAC on). Each pod
 * takes the advertisement of its network's gateway: it makes its own address from the /64 prefix
 * (the modified EUI-64 of its MAC) and a default route through the gateway's link-local address;
 * the flows let that address through, so the pods reach each other by it across nodes. A network
 * without advertisements leaves its pods' IPv6 alone (no address of their making, no such route).
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod } from "./support/pods.ts";
import { type Stack, startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import { slaacIps } from "../agent/punt/slaac.ts";

interface Added {
  name: string;
  ns: string;
  ip: string;
  mac: string;
}

const RA = { slaac: true, managed: false, otherConfig: false };

Deno.test("e2e router advertisements: SLAAC pods make their address from the prefix and route through the gateway; they reach each other by it", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" });
  const six = {
    name: "six",
    cidr: "fd00:5::/64",
    gateway: "fd00:5::1",
    ipv6RouterAdvertisements: {},
  };
  const quiet = { name: "quiet", cidr: "fd00:6::/64", gateway: "fd00:6::1" };
  for (const body of [six, quiet]) await api(stack, "POST", "tenants/acme/networks", body);
  const a = await pod(n1, "a-1", ["six"]);
  const b = await pod(n2, "b-2", ["six"]);
  const q = await pod(n1, "q-1", ["quiet"]);
  // What each pod's kernel makes: the prefix and the EUI-64 of its MAC.
  const own = (p: Added) =>
    slaacIps({ address: `${p.ip}/64`, mac: p.mac, networkRouterAdvertisements: RA })[0];

  await t.step(
    "each pod makes its address from the prefix, and a default route via the gateway",
    async () => {
      for (const p of [a, b]) {
        // Usable once duplicate address detection is done (no longer "tentative").
        const usable = new RegExp(`inet6 ${own(p)}/64 scope global dynamic`);
        const addr = () => sh(p, "ip -6 addr show dev eth0").then((r) => r.stdout);
        await waitFor(`${p.name}'s SLAAC address`, async () => usable.test(await addr()), 30_000);
        const routes = (await sh(p, "ip -6 route show default")).stdout;
        assert.match(routes, /default via fe80::858:[0-9a-f:]+ dev eth0 proto ra/, routes);
      }
    },
  );

  await t.step("the pods reach each other by their SLAAC addresses, across nodes", async () => {
    await waitFor(
      "a -> b by SLAAC",
      async () => (await sh(a, `ping -6 -c 1 -W 1 ${own(b)}`)).code === 0,
      20_000,
    );
    const r = await sh(b, `ping -6 -c 2 -W 2 -I ${own(b)} ${own(a)}`);
    assert.equal(r.code, 0, r.stdout + r.stderr);
  });

  await t.step(
    "a network without advertisements: no address of the pod's making, no such route",
    async () => {
      const addr = (await sh(q, "ip -6 addr show dev eth0 scope global")).stdout;
      assert.doesNotMatch(addr, /dynamic/, addr);
      assert.doesNotMatch((await sh(q, "ip -6 route")).stdout, /proto ra/);
    },
  );
});

async function pod(node: Stack["nodes"][number], name: string, networks: string[]): Promise<Added> {
  const p = await makePod(node, name, "acme", knitterList(networks));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ns = ipNetnsName(p.netns);
  const link = await run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/address"]);
  return { name, ns, ip: addressOf(r.out), mac: link.stdout.trim() };
}

function sh(from: Added, command: string) {
  return run(["ip", "netns", "exec", from.ns, "sh", "-c", command], { check: false });
}
