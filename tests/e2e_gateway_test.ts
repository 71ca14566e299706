/**
 * The distributed gateway end to end (agent/PIPELINE.md, "Distributed gateway"): on VXLAN, VLAN and
 * flat networks and an IPv6 network (neighbour discovery, ICMPv6 echo), pods on two simulated nodes with real Open vSwitch (userspace datapath) resolve
 * their gateway to the network's gateway MAC and get echo replies from it, answered by their own
 * node's flows; a pod of another tenant whose network has the same CIDR and gateway address gets
 * its own network's gateway only. Anything else sent to the gateway MAC is dropped.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { gatewayMac } from "@knitter/wasm";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod, pings, type Pod } from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";

Deno.test("e2e gateway: every pod on vxlan, vlan, flat and IPv6 networks, on both nodes, resolves and pings its network's gateway; another tenant's same CIDR gets its own gateway", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  await create(stack, "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] });
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  const networks: Net[] = [
    await network(stack, "acme", { name: "front", cidr: "10.50.0.0/24", gateway: "10.50.0.1" }),
    await network(stack, "acme", {
      name: "storage",
      type: "vlan",
      physnet: "phys1",
      cidr: "10.51.0.0/24",
      gateway: "10.51.0.1",
    }),
    await network(stack, "acme", {
      name: "legacy",
      type: "flat",
      physnet: "phys1",
      cidr: "10.52.0.0/24",
      gateway: "10.52.0.254",
    }),
    // Another tenant, the same CIDR and gateway address as acme/front.
    await network(stack, "globex", { name: "front", cidr: "10.50.0.0/24", gateway: "10.50.0.1" }),
    // IPv6: neighbour discovery and ICMPv6 echo.
    await network(stack, "acme", {
      name: "six",
      cidr: "fd00:50::/64",
      gateway: "fd00:50::1",
      allocationPools: [{ start: "fd00:50::10", end: "fd00:50::ff" }],
    }),
  ];
  const macs = new Set(networks.map((n) => n.mac));
  assert.equal(macs.size, networks.length, "every network has a gateway MAC of its own");

  const pods: Added[] = [];
  for (const net of networks) {
    for (const node of stack.nodes) {
      const name = `${net.tenant[0]}${net.name}-${node.name}`;
      pods.push(await addedPod(node, name, net, [net.name]));
    }
  }

  await t.step("ping -c 3 GATEWAY answers every pod, from the network's gateway MAC", async () => {
    for (const p of pods) {
      const ns = ipNetnsName(p.pod.netns);
      const v6 = p.net.gateway.includes(":");
      const filter = v6 ? "icmp6 and ip6[40] = 129" : "icmp[icmptype] = icmp-echoreply";
      const cap = await startCapture(cleanup, ns, "eth0", filter, {
        count: 3,
        timeoutMs: 10_000,
      });
      assert.ok(await pings(p.pod, p.net.gateway), `${p.pod.name} pings ${p.net.gateway}`);
      const replies = await cap.done();
      assert.equal(replies.length, 3, `${p.pod.name}: three echo replies: ${replies}`);
      for (const r of replies) {
        // tcpdump -e: "SRC > DST, ethertype IPv4 (0x0800), length 98: GW > POD: ICMP echo reply"
        // (IPv6: "…: GW > POD: ICMP6, echo reply")
        assert.ok(
          r.includes(`${p.net.mac} > ${p.mac}`),
          `${p.pod.name}: from the gateway MAC: ${r}`,
        );
        const reply = v6 ? "ICMP6, echo reply" : "ICMP echo reply";
        assert.ok(r.includes(`${p.net.gateway} > ${p.ip}: ${reply}`), r);
      }
    }
  });

  await t.step("ip neigh resolves the gateway to the network's gateway MAC", async () => {
    for (const p of pods) {
      assert.equal(
        await neighbourMac(p, p.net.gateway),
        p.net.mac,
        `${p.pod.name} on ${p.pod.node.name}, ${p.net.tenant}/${p.net.name}`,
      );
    }
  });

  await t.step(
    "an ARP (IPv6: neighbour solicitation) for the gateway from a fresh neighbour table is answered again",
    async () => {
      // Isolation: the globex pods share the CIDR and gateway address with acme/front and sit on the
      // same nodes; each tenant's pods still get their own gateway MAC.
      for (const p of pods) {
        const ns = ipNetnsName(p.pod.netns);
        await run(["ip", "-n", ns, "neigh", "flush", "dev", "eth0"]);
        const v6 = p.net.gateway.includes(":");
        const filter = v6 ? "icmp6 and ip6[40] = 136" : "arp[6:2] = 2";
        const cap = await startCapture(cleanup, ns, "eth0", filter, {
          count: 1,
          timeoutMs: 10_000,
        });
        assert.ok(await pings(p.pod, p.net.gateway), `${p.pod.name} pings ${p.net.gateway}`);
        const [reply] = await cap.done();
        assert.ok(reply, `${p.pod.name}: an ARP reply or neighbour advertisement`);
        if (v6) {
          assert.ok(reply.includes(`${p.net.mac} > ${p.mac}`), `from the gateway MAC: ${reply}`);
          assert.ok(reply.includes(`neighbor advertisement, tgt is ${p.net.gateway}`), reply);
        } else {
          assert.ok(reply.includes(`Reply ${p.net.gateway} is-at ${p.net.mac}`), reply);
        }
        assert.equal(await neighbourMac(p, p.net.gateway), p.net.mac, p.pod.name);
      }
      const acme = networks[0];
      const globex = networks[3];
      assert.equal(acme.gateway, globex.gateway);
      assert.notEqual(acme.mac, globex.mac);
    },
  );

  await t.step(
    "anything else sent to the gateway MAC is dropped by its node (no router connects the network)",
    async () => {
      await Promise.all(pods.map(async (p) => {
        const ns = ipNetnsName(p.pod.netns);
        const v6 = p.net.gateway.includes(":");
        const [away, far] = v6 ? ["2001:db8::/32", "2001:db8::1"] : ["192.0.2.0/24", "192.0.2.1"];
        await run(["ip", "-n", ns, "route", "replace", away, "via", p.net.gateway]);
        const before = await dropped(p);
        assert.equal(await pings(p.pod, far), false, `${p.pod.name}: nothing answers`);
        const after = await dropped(p);
        assert.ok(
          after - before >= 3,
          `${p.pod.name}: the 3 echo requests hit the drop (${before} -> ${after})`,
        );
      }));
    },
  );
});

/** Packets the gateway MAC's drop flow (gatewayDrop) of the pod's network has dropped on its node. */
async function dropped(p: Added): Promise<number> {
  const r = await run(
    ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "br-int", `table=30,dl_dst=${p.net.mac}`],
    { env: { OVS_RUNDIR: p.pod.node.sim.ovs.rundir! } },
  );
  const lines = r.stdout.split("\n").filter((l) => l.includes("actions=drop"));
  assert.equal(lines.length, 1, `one gatewayDrop flow for ${p.net.mac}: ${r.stdout}`);
  return Number(/n_packets=(\d+)/.exec(lines[0])?.[1]);
}

interface Net {
  id: string;
  tenant: string;
  name: string;
  gateway: string;
  /** The gateway MAC the agent derives for the network. */
  mac: string;
}

interface Added {
  pod: Pod;
  net: Net;
  ip: string;
  mac: string;
}

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function network(
  stack: Stack,
  tenant: string,
  body: { name: string; cidr: string; gateway: string } & Record<string, unknown>,
): Promise<Net> {
  const r = await create(stack, `tenants/${tenant}/networks`, body);
  return { id: r.id, tenant, name: body.name, gateway: body.gateway, mac: gatewayMac(r.id) };
}

async function addedPod(
  node: Stack["nodes"][number],
  name: string,
  net: Net,
  networks: string[],
): Promise<Added> {
  const pod = await makePod(node, name, net.tenant, knitterList(networks));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const mac = r.out.interfaces.find((i: { sandbox?: string }) => i.sandbox).mac;
  return { pod, net, ip: addressOf(r.out), mac };
}

/** The MAC of `ip` in the pod's neighbour table (`ip neigh show`), or "" when it has none. */
async function neighbourMac(p: Added, ip: string): Promise<string> {
  const r = await run(["ip", "-n", ipNetnsName(p.pod.netns), "neigh", "show", ip, "dev", "eth0"]);
  return /lladdr (\S+)/.exec(r.stdout)?.[1] ?? "";
}
