/**
 * Dual stack end to end (issue 16): pods of a network with an IPv4 and an IPv6 subnet, on two
 * simulated nodes with real Open vSwitch (userspace datapath), get one address of each family, a
 * static IPv6 default route, and carry TCP and UDP with real payloads over both families, on one
 * node and across nodes; an IPv6-only /64 without allocation pools does the same. A pod sending
 * from another pod's IPv6 address, or advertising another pod's IPv6 address as its own
 * (a forged neighbour advertisement), is dropped at its port: captured as sent, never received.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { gatewayMac } from "@knitter/wasm";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  addressesOf,
  ipNetnsName,
  knitterList,
  makePod,
  pingFrom,
  pings,
  type Pod,
} from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const DUAL = {
  name: "dual",
  cidr: "10.60.0.0/24",
  gateway: "10.60.0.1",
  cidr6: "fd00:60::/64",
  gateway6: "fd00:60::1",
};
/** IPv6 only, a whole /64 without allocationPools: the manager hands out a bounded window. */
const SIX = { name: "six", cidr: "fd00:61::/64", gateway: "fd00:61::1" };

/** A pod and its eth0: the MAC and the addresses without prefix, IPv4 first on `dual`. */
interface Added {
  pod: Pod;
  ns: string;
  mac: string;
  ips: string[];
}

Deno.test("e2e dual stack: IPv4 and IPv6 TCP and UDP between pods across nodes, an IPv6-only /64, spoofed IPv6 sources and forged neighbour advertisements dropped", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await create(stack, "tenants", { name: "acme" });
  const dual = await create(stack, "tenants/acme/networks", DUAL);
  const six = await create(stack, "tenants/acme/networks", SIX);
  assert.equal(
    six.usage.total,
    65535,
    "a /64 hands out its first 65,536 addresses, less the gateway",
  );

  const near = await added(n1, "near", "dual");
  const evil = await added(n1, "evil", "dual");
  const far = await added(n2, "far", "dual");
  const victim = await added(n2, "victim", "dual");
  const s1 = await added(n1, "s1", "six");
  const s2 = await added(n2, "s2", "six");

  await t.step(
    "each pod has one address of each family, both gateways, a static IPv6 default route, router advertisements off",
    async () => {
      for (const p of [near, evil, far, victim]) {
        assert.equal(p.ips.length, 2, `${p.pod.name}: ${p.ips}`);
        assert.ok(p.ips[0].startsWith("10.60.0.") && p.ips[1].startsWith("fd00:60::"), `${p.ips}`);
        // Paired by host part: 10.60.0.N and fd00:60::N (hex).
        assert.equal(Number.parseInt(p.ips[1].split("::")[1], 16), Number(p.ips[0].split(".")[3]));
        const shown = JSON.parse(
          (await run(["ip", "-n", p.ns, "-j", "addr", "show", "dev", "eth0"])).stdout,
        )[0].addr_info.filter((a: { scope: string }) => a.scope === "global")
          .map((a: { local: string; prefixlen: number }) => `${a.local}/${a.prefixlen}`);
        assert.deepEqual(shown.sort(), [`${p.ips[0]}/24`, `${p.ips[1]}/64`].sort());
        const v6 = JSON.parse(
          (await run(["ip", "-n", p.ns, "-6", "-j", "route", "show", "default"])).stdout,
        );
        assert.deepEqual(v6.map((r: { gateway: string }) => r.gateway), [DUAL.gateway6]);
        // Router advertisements off: no other pod can add a route through itself.
        const ra = await run([
          "ip",
          "netns",
          "exec",
          p.ns,
          "sysctl",
          "-n",
          "net.ipv6.conf.eth0.accept_ra",
        ]);
        assert.equal(ra.stdout.trim(), "0", `${p.pod.name}: accept_ra`);
      }
    },
  );

  await t.step(
    "IPv4 and IPv6: TCP and UDP with real payloads, across nodes and on one node",
    async () => {
      for (const [from, to] of [[near, far], [near, evil]] as const) {
        for (const family of [0, 1]) {
          const addr = to.ips[family];
          const tcp = await tcpExchange(cleanup, from.ns, to.ns, addr, 1 << 20);
          assert.ok(tcp.ok, `TCP ${from.pod.name} -> ${addr}: ${tcp.error}`);
          const udp = await udpExchange(cleanup, from.ns, to.ns, addr, [64, 1200]);
          assert.ok(udp.ok, `UDP ${from.pod.name} -> ${addr}: ${udp.error}`);
        }
        assert.ok(await pings(from.pod, to.ips[1]), `ping -6 ${from.pod.name} -> ${to.ips[1]}`);
      }
    },
  );

  await t.step(
    "both gateways answer every pod on both nodes, from the network's one gateway MAC",
    async () => {
      const mac = gatewayMac(dual.id);
      for (const p of [near, evil, far, victim]) {
        await run(["ip", "-n", p.ns, "neigh", "flush", "dev", "eth0"]);
        for (const gw of [DUAL.gateway, DUAL.gateway6]) {
          assert.ok(await pings(p.pod, gw), `${p.pod.name} pings ${gw}`);
          const r = await run(["ip", "-n", p.ns, "neigh", "show", gw, "dev", "eth0"]);
          assert.equal(/lladdr (\S+)/.exec(r.stdout)?.[1], mac, `${p.pod.name}: ${gw} is ${mac}`);
        }
      }
    },
  );

  await t.step(
    "IPv6 only on a /64: ping, TCP and UDP across nodes; the gateway answers",
    async () => {
      assert.ok(await pings(s1.pod, s2.ips[0]), `ping ${s2.ips[0]}`);
      assert.ok(await pings(s1.pod, SIX.gateway), `ping the gateway ${SIX.gateway}`);
      const tcp = await tcpExchange(cleanup, s1.ns, s2.ns, s2.ips[0], 1 << 20);
      assert.ok(tcp.ok, `TCP: ${tcp.error}`);
      const udp = await udpExchange(cleanup, s1.ns, s2.ns, s2.ips[0], [64, 1200]);
      assert.ok(udp.ok, `UDP: ${udp.error}`);
    },
  );

  // The attacker takes the victim's IPv6 address as its own (no duplicate detection).
  const stolen = victim.ips[1];
  await run(["ip", "-n", evil.ns, "addr", "add", `${stolen}/64`, "dev", "eth0", "nodad"]);

  await t.step(
    "a spoofed IPv6 source (another pod's address) is dropped at the sender's port",
    async () => {
      for (const to of [far, near]) {
        await run([
          "ip",
          "-n",
          evil.ns,
          "-6",
          "neigh",
          "replace",
          to.ips[1],
          "lladdr",
          to.mac,
          "dev",
          "eth0",
        ]);
        const filter = `icmp6 and ip6[40] = 128 and src host ${stolen}`;
        const seen = await sentAndReceived(
          cleanup,
          evil,
          to,
          filter,
          () => pingFrom(evil.ns, to.ips[1], ["-I", stolen]),
        );
        assert.deepEqual(
          seen,
          { sent: 1, received: 0 },
          `spoofed requests never reach ${to.pod.name}`,
        );
      }
      // Its own address still works (named: the kernel may pick the stolen one as the source).
      assert.ok(
        await pingFrom(evil.ns, far.ips[1], ["-I", evil.ips[1]]),
        "its own IPv6 address works",
      );
    },
  );

  await t.step(
    "a forged neighbour advertisement (another pod's IPv6 address) is dropped; the asker keeps the owner's MAC",
    async () => {
      for (const asker of [near, far]) {
        await run(["ip", "-n", asker.ns, "-6", "neigh", "flush", "dev", "eth0"]);
        // The attacker's kernel answers the solicitation for the address it took, from its own MAC.
        const filter = `icmp6 and ip6[40] = 136 and ether src ${evil.mac}`;
        const seen = await sentAndReceived(
          cleanup,
          evil,
          asker,
          filter,
          () => pingFrom(asker.ns, stolen, []),
        );
        assert.deepEqual(
          seen,
          { sent: 1, received: 0 },
          `no forged advertisement reaches ${asker.pod.name}`,
        );
        const neigh = JSON.parse(
          (await run(["ip", "-n", asker.ns, "-6", "-j", "neigh", "show", stolen, "dev", "eth0"]))
            .stdout,
        );
        assert.deepEqual(
          neigh.map((n: { lladdr?: string }) => n.lladdr),
          [victim.mac],
          asker.pod.name,
        );
      }
    },
  );

  await run(["ip", "-n", evil.ns, "addr", "del", `${stolen}/64`, "dev", "eth0"]);
  for (const p of [near, evil, far, victim, s1, s2]) {
    assert.equal((await p.pod.del()).code, 0, `DEL ${p.pod.name}`);
  }
});

/** What matches `filter` on the sender's eth0 and on the target's, while `send` runs. */
async function sentAndReceived(
  cleanup: Cleanup,
  from: Added,
  to: Added,
  filter: string,
  send: () => Promise<unknown>,
): Promise<{ sent: number; received: number }> {
  const opts = { count: 1, timeoutMs: 5000 };
  const sent = await startCapture(cleanup, from.ns, "eth0", filter, opts);
  const received = await startCapture(cleanup, to.ns, "eth0", filter, opts);
  await send();
  // The ping waited for its replies: whatever it sent has arrived by now.
  return { sent: (await sent.done(300)).length, received: (await received.done(300)).length };
}

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function added(node: Stack["nodes"][number], name: string, network: string): Promise<Added> {
  const pod = await makePod(node, name, "acme", knitterList([network]));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const mac = r.out.interfaces.find((i: { sandbox?: string }) => i.sandbox).mac;
  const ips = addressesOf(r.out).map((a) => a.address.split("/")[0]);
  return { pod, ns: ipNetnsName(pod.netns), mac, ips };
}
