/**
 * Egress and the node end to end (agent/README.md, "Egress and the node"): on two simulated nodes
 * with real Open vSwitch (userspace datapath) and their own kernels, pods of a network with `egress`
 * reach an external host on the underlay (a netns of the test's own, with no route to any pod CIDR)
 * over TCP, UDP and ICMP, seen from their own node's address; two tenants' egress networks with the
 * same CIDR and the same pod address do so at once; a network without egress reaches nothing. With
 * `hostAccess`, a node reaches its own pods (a probe), also through security groups that let
 * nothing in, and hostPort through Debian's portmap plugin works from the external host. A pod
 * never reaches another network through the node. An agent restart (under a stream) and host ports
 * deleted by hand keep it all; egress turned off stops it.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { gatewayMac } from "@knitter/wasm";
import { Cleanup } from "../devstack/cleanup.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { type Stack, startStack, waitFor } from "../devstack/stack.ts";
import { startCapture } from "./support/capture.ts";
import { EXTERNAL, externalHost } from "./support/external_host.ts";
import {
  addressOf,
  ipNetnsName,
  knitterList,
  makePod,
  pingFrom,
  type Pod,
} from "./support/pods.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

/** The external host: on the underlay, no route to any pod CIDR. */
const NODE_IP = "192.0.2.1";
const HOST_PORT = 18080;

Deno.test("e2e egress: SNAT to the node for egress networks only, same CIDR for two tenants at once, hostPort and probes on hostAccess networks, no way between networks through the node, kept over an agent restart, stopped by PATCH", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  const ext = await externalHost(cleanup);
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  // acme/out and globex/out: egress, the same CIDR. acme/web: hostAccess. acme/quiet: neither.
  await network(stack, "acme", "out", "10.70.0.0/24", { egress: true });
  await network(stack, "globex", "out", "10.70.0.0/24", { egress: true });
  await network(stack, "acme", "web", "10.71.0.0/24", { hostAccess: true });
  await network(stack, "acme", "quiet", "10.72.0.0/24", {});

  const acmeOut = await pod(n1, "aout", "acme", [{ name: "out", ip: "10.70.0.10" }]);
  const globexOut = await pod(n1, "gout", "globex", [{ name: "out", ip: "10.70.0.10" }]);
  const quiet = await pod(n1, "quiet", "acme", ["quiet"]);
  const web = await pod(n1, "web", "acme", ["web"], [
    { type: "portmap", capabilities: { portMappings: true }, snat: false },
  ], { portMappings: [{ hostPort: HOST_PORT, containerPort: HOST_PORT, protocol: "tcp" }] });
  // The same networks on another node.
  const acmeOut2 = await pod(n2, "aout2", "acme", ["out"]);
  const web2n = await pod(n2, "webn2", "acme", ["web"]);

  await t.step(
    "an egress network's pod reaches the external host over TCP, UDP and ICMP, as the node",
    async () => {
      await egressWorks(cleanup, acmeOut, ext);
    },
  );

  await t.step(
    "a pod of the network on another node leaves through its own node; each node reaches its own pods only",
    async () => {
      await egressWorks(cleanup, acmeOut2, ext, n2.sim.underlayIp);
      const probe = await tcpExchange(cleanup, n2.sim.netns, ns(web2n), web2n.ip, 1000);
      assert.ok(probe.ok, `n2 to its pod: ${JSON.stringify(probe)}`);
      const far = await tcpExchange(cleanup, n1.sim.netns, ns(web2n), web2n.ip, 100, {
        seconds: 2,
      });
      assert.equal(far.ok, false, `n1 to n2's pod: ${JSON.stringify(far)}`);
    },
  );

  await t.step(
    "a network without egress reaches nothing outside, and the external host sees nothing of it",
    async () => {
      const cap = await startCapture(cleanup, ext, "eth0", "ip and not arp", {
        count: 1,
        timeoutMs: 4000,
      });
      assert.equal(await pingFrom(ns(quiet), EXTERNAL), false, "no ping out of quiet");
      const tcp = await tcpExchange(cleanup, ns(quiet), ext, EXTERNAL, 1000, { seconds: 2 });
      assert.equal(tcp.ok, false, `no TCP out of quiet: ${JSON.stringify(tcp)}`);
      assert.deepEqual(await cap.done(500), [], "nothing of quiet reached the external host");
      // hostAccess alone is no egress either.
      assert.equal(await pingFrom(ns(web), EXTERNAL), false, "no ping out of web");
    },
  );

  await t.step(
    "two tenants, the same CIDR and pod address on one node: both reach out at once, each gets its own replies",
    async () => {
      assert.equal(acmeOut.ip, globexOut.ip);
      const [a, b] = await Promise.all([
        tcpExchange(cleanup, ns(acmeOut), ext, EXTERNAL, 200_000),
        tcpExchange(cleanup, ns(globexOut), ext, EXTERNAL, 200_000),
        pingFrom(ns(acmeOut), EXTERNAL),
        pingFrom(ns(globexOut), EXTERNAL),
      ]);
      assert.ok(a.ok, `acme: ${JSON.stringify(a)}`);
      assert.ok(b.ok, `globex: ${JSON.stringify(b)}`);
      const [ua, ub] = await Promise.all([
        udpExchange(cleanup, ns(acmeOut), ext, EXTERNAL, [64, 1200]),
        udpExchange(cleanup, ns(globexOut), ext, EXTERNAL, [64, 1200]),
      ]);
      assert.ok(ua.ok && ub.ok, `UDP: ${JSON.stringify([ua, ub])}`);
      // The very same packets from both (address, destination, ICMP identifier): still two
      // connections on the node, so the outside sees two identifiers, and each pod its replies.
      const cap = await startCapture(cleanup, ext, "eth0", "icmp[icmptype] = icmp-echo", {
        count: 4,
        timeoutMs: 10_000,
      });
      const same = ["-e", "4242"];
      const [pa, pb] = await Promise.all([
        pingFrom(ns(acmeOut), EXTERNAL, same),
        pingFrom(ns(globexOut), EXTERNAL, same),
      ]);
      assert.ok(pa && pb, `the same ICMP identifier from both: acme ${pa}, globex ${pb}`);
      const ids = new Set((await cap.done(1000)).map((l) => / id (\d+),/.exec(l)?.[1]));
      assert.equal(ids.size, 2, `two connections seen from outside: ${[...ids]}`);
    },
  );

  await t.step(
    "attack: a pod that may send from the external host's address does not take over another tenant's connection",
    async () => {
      // globex's pod talks UDP to the external host, from port 5000 (kept by the node's NAT).
      const extGot = await udpReceiver(cleanup, ext, 6000);
      await waitFor("the external host hears globex", async () => {
        await udpSend(ns(globexOut), "from-globex", EXTERNAL, 6000, 5000);
        return (await extGot.got()).includes("from-globex");
      }, 20_000);
      const globexGot = await udpReceiver(cleanup, ns(globexOut), 5000);
      const acmeGot = await udpReceiver(cleanup, ns(acmeOut), 5000);
      await waitFor("globex hears the external host", async () => {
        await udpSend(ext, "reply-1", NODE_IP, 5000, 6000);
        return (await globexGot.got()).includes("reply-1");
      }, 20_000);
      // acme routes the external host's address through its pod, which may then send from it
      // (spoofRouted): as the external host, to the node's port of globex's connection.
      await create(stack, "tenants/acme/routers", {
        name: "spoof",
        networks: ["out"],
        routes: [{ dst: `${EXTERNAL}/32`, via: acmeOut.ip }],
      });
      try {
        await run(["ip", "-n", ns(acmeOut), "-batch", "-"], {
          stdin: `addr add ${EXTERNAL}/32 dev eth0\n` +
            `route add ${NODE_IP}/32 via 10.70.0.1 src ${EXTERNAL}\n`,
        });
        const port = await hostPortOf(stack, n1, "acme", "out");
        const cap = await startCapture(
          cleanup,
          n1.sim.netns,
          port,
          `udp and src host ${EXTERNAL}`,
          {
            count: 1,
            timeoutMs: 20_000,
          },
        );
        await waitFor("the forged packet at the node", async () => {
          await udpSend(ns(acmeOut), "forged", NODE_IP, 5000, 6000, EXTERNAL);
          return (await cap.done(300)).length > 0;
        }, 20_000);
      } finally {
        // The pod would take a packet from its own address for a martian: it drops it no more.
        await run(["ip", "-n", ns(acmeOut), "-batch", "-"], {
          stdin: `route del ${NODE_IP}/32\naddr del ${EXTERNAL}/32 dev eth0\n`,
          check: false,
        });
        const r = await stack.api("DELETE", "tenants/acme/routers/spoof");
        assert.ok(r.status < 300, JSON.stringify(r.body));
      }
      await waitFor("the next reply delivered", async () => {
        await udpSend(ext, "reply-2", NODE_IP, 5000, 6000);
        return `${await globexGot.got()}${await acmeGot.got()}`.includes("reply-2");
      }, 20_000);
      assert.equal(await acmeGot.got(), "", "acme got nothing of globex's connection");
      assert.match(await globexGot.got(), /reply-2/);
      for (const r of [extGot, globexGot, acmeGot]) await r.stop();
      await egressWorks(cleanup, acmeOut, ext);
    },
  );

  await t.step(
    "the node's ICMP errors go back to the pod they answer (time exceeded), not by the node's own routes",
    async () => {
      for (const p of [acmeOut, globexOut]) {
        const r = await run(
          ["ip", "netns", "exec", ns(p), "ping", "-n", "-c1", "-W3", "-t1", EXTERNAL],
          { check: false },
        );
        assert.match(r.stdout, /Time to live exceeded/, `${p.name}: ${r.stdout}`);
      }
    },
  );

  await t.step(
    "egress never reaches link-local addresses (the node's own: cloud metadata and the like)",
    async () => {
      // The node routes 169.254.0.0/16 to the underlay, where the external host has one.
      await run(["ip", "-n", n1.sim.netns, "route", "add", "169.254.0.0/16", "dev", "br-phy"]);
      await run(["ip", "-n", ext, "addr", "add", "169.254.1.1/16", "dev", "eth0"]);
      assert.ok(await pingFrom(n1.sim.netns, "169.254.1.1"), "the node reaches it");
      assert.equal(await pingFrom(ns(acmeOut), "169.254.1.1"), false, "a pod reaches it");
      const tcp = await tcpExchange(cleanup, ns(acmeOut), ext, "169.254.1.1", 100, { seconds: 2 });
      assert.equal(tcp.ok, false, `TCP to link-local: ${JSON.stringify(tcp)}`);
      await run(["ip", "-n", ext, "addr", "del", "169.254.1.1/16", "dev", "eth0"]);
      await run(["ip", "-n", n1.sim.netns, "route", "del", "169.254.0.0/16"]);
    },
  );

  await t.step(
    "attack: no pod reaches another network's pod or gateway through the node",
    async () => {
      // Each target with a server where it lives (the gateways: on the node), so that only the
      // node's rules and the flows stand between.
      const targets: [string, string][] = [
        [web.ip, ns(web)],
        ["10.71.0.1", n1.sim.netns],
        [quiet.ip, ns(quiet)],
        ["10.72.0.1", n1.sim.netns],
      ];
      for (const from of [acmeOut, globexOut]) {
        for (const [to, server] of targets) {
          assert.equal(await pingFrom(ns(from), to), false, `${from.name} pings ${to}`);
          const r = await tcpExchange(cleanup, ns(from), server, to, 100, { seconds: 2 });
          assert.equal(r.ok, false, `${from.name} TCP to ${to}: ${JSON.stringify(r)}`);
        }
      }
      // The other way round: from hostAccess and plain networks to an egress network's pod.
      for (const from of [web, quiet]) {
        assert.equal(await pingFrom(ns(from), acmeOut.ip), false, `${from.name} to out`);
        assert.equal(await pingFrom(ns(from), "10.70.0.1"), false, `${from.name} to out's gateway`);
      }
    },
  );

  await t.step(
    "attack: the underlay reaches no tenant's gateway address on the node (ARP, or routed to it)",
    async () => {
      // Asked for by ARP on the underlay, the node would take the address there (a tenant's
      // gateway may be the LAN router's address); routed to the node, it would answer as it.
      await run(["ip", "-n", ext, "-batch", "-"], {
        stdin: "route add 10.70.0.1/32 dev eth0\nroute add 10.71.0.1/32 via 192.0.2.1\n",
      });
      cleanup.defer(async () => {
        await run(["ip", "-n", ext, "-batch", "-"], {
          stdin: "route del 10.70.0.1/32\nroute del 10.71.0.1/32\n",
          check: false,
        });
      });
      for (const gw of ["10.70.0.1", "10.71.0.1"]) {
        assert.equal(await pingFrom(ext, gw), false, `the external host pings ${gw}`);
      }
      const neigh = await run(["ip", "-n", ext, "neigh", "show", "10.70.0.1"]);
      assert.ok(!neigh.stdout.includes("lladdr"), `answered by ARP: ${neigh.stdout}`);
      await run(["ip", "-n", ext, "-batch", "-"], {
        stdin: "route del 10.70.0.1/32\nroute del 10.71.0.1/32\n",
      });
    },
  );

  await t.step(
    "hostPort: the external host reaches the pod through the node (portmap); the node probes the pod",
    async () => {
      await hostAccessWorks(cleanup, n1, web, ext);
    },
  );

  await t.step(
    "security groups that let nothing in or out: the node still probes the pod and hostPort still works; another pod does not get in",
    async () => {
      const web2 = await pod(n1, "web2", "acme", ["web"]);
      assert.ok(await pingFrom(ns(web2), web.ip), "web2 reaches web before the groups");
      await create(stack, "tenants/acme/security-groups", { name: "closed", rules: [] });
      const r = await stack.api("PATCH", "tenants/acme/networks/web", {
        securityGroups: ["closed"],
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await waitFor("web closed to web2", async () => !(await pingFrom(ns(web2), web.ip)), 20_000);
      await hostAccessWorks(cleanup, n1, web, ext);
      const r2 = await stack.api("PATCH", "tenants/acme/networks/web", { securityGroups: null });
      assert.equal(r2.status, 200, JSON.stringify(r2.body));
      await waitFor("web open again", () => pingFrom(ns(web2), web.ip), 20_000);
    },
  );

  await t.step("the node does not reach pods of networks without hostAccess", async () => {
    for (const p of [quiet, acmeOut]) {
      const r = await tcpExchange(cleanup, n1.sim.netns, ns(p), p.ip, 100, { seconds: 2 });
      assert.equal(r.ok, false, `node to ${p.name}: ${JSON.stringify(r)}`);
    }
  });

  await t.step(
    "the agent killed and started again: a stream out goes on through it; egress and hostPort still work",
    async () => {
      // About 5 s at 40 kB/s, across the restart: every byte back, in order.
      const stream = tcpExchange(cleanup, ns(acmeOut), ext, EXTERNAL, 200_000, {
        seconds: 30,
        rate: 40_000,
      });
      await n1.stopAgent(true);
      await n1.startAgent();
      const through = await stream;
      assert.ok(through.ok, `the stream across the restart: ${JSON.stringify(through)}`);
      await egressWorks(cleanup, acmeOut, ext);
      await hostAccessWorks(cleanup, n1, web, ext);
    },
  );

  await t.step(
    "the host ports deleted by hand are made again (self-healing), with their kernel side",
    async () => {
      const names = await hostPorts(n1);
      assert.equal(names.length, 3, names.join(" "));
      await new Ovs(n1.sim.ovs).delPorts("br-int", names);
      await waitFor("the host ports back", async () => (await hostPorts(n1)).length === 3, 20_000);
      await waitFor("egress back", () => pingFrom(ns(acmeOut), EXTERNAL), 20_000);
      await egressWorks(cleanup, acmeOut, ext);
      await hostAccessWorks(cleanup, n1, web, ext);
    },
  );

  await t.step(
    "egress turned off stops an established stream at once (the host port stays, for hostAccess)",
    async () => {
      const on = await stack.api("PATCH", "tenants/acme/networks/web", { egress: true });
      assert.equal(on.status, 200, JSON.stringify(on.body));
      await waitFor("web with egress", () => pingFrom(ns(web), EXTERNAL), 20_000);
      const flowing = await startCapture(cleanup, ext, "eth0", `tcp and src host ${NODE_IP}`, {
        count: 5,
        timeoutMs: 20_000,
      });
      // 400 kB at 20 kB/s: it lasts 20 s, longer than the PATCH takes to reach the node.
      const stream = tcpExchange(cleanup, ns(web), ext, EXTERNAL, 400_000, {
        rate: 20_000,
        seconds: 30,
      });
      assert.equal((await flowing.done()).length, 5, "the stream flows");
      const off = await stack.api("PATCH", "tenants/acme/networks/web", { egress: false });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      const r = await stream;
      assert.equal(r.ok, false, `the stream went on: ${JSON.stringify(r)}`);
      await hostAccessWorks(cleanup, n1, web, ext);
    },
  );

  await t.step("egress turned off (PATCH) stops it; the other tenant's keeps working", async () => {
    const r = await stack.api("PATCH", "tenants/acme/networks/out", { egress: false });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.egress, false);
    await waitFor(
      "acme/out without egress",
      async () => !(await pingFrom(ns(acmeOut), EXTERNAL)),
      20_000,
    );
    await waitFor(
      "acme/out on n2 without egress",
      async () => !(await pingFrom(ns(acmeOut2), EXTERNAL)),
      20_000,
    );
    const tcp = await tcpExchange(cleanup, ns(acmeOut), ext, EXTERNAL, 1000, { seconds: 2 });
    assert.equal(tcp.ok, false, JSON.stringify(tcp));
    assert.ok(await pingFrom(ns(globexOut), EXTERNAL), "globex/out still reaches out");
    assert.equal((await hostPorts(n1)).length, 2, "globex/out's and web's host ports are left");
  });
});

/** The host port of a network on a node: the one with the network's gateway MAC. */
async function hostPortOf(
  stack: Stack,
  node: Stack["nodes"][number],
  tenant: string,
  name: string,
): Promise<string> {
  const net = await stack.api("GET", `tenants/${tenant}/networks/${name}`);
  const mac = gatewayMac(net.body.id);
  const r = await run(["ip", "-n", node.sim.netns, "-j", "link", "show"]);
  const links = JSON.parse(r.stdout) as { ifname: string; address?: string }[];
  const port = links.find((l) => l.ifname.startsWith("kh") && l.address === mac);
  assert.ok(port, `no host port of ${tenant}/${name} with ${mac}`);
  return port.ifname;
}

/** A UDP receiver in `netns` on `port` for at most `seconds`: what it got so far, and its end. */
async function udpReceiver(
  cleanup: Cleanup,
  netns: string,
  port: number,
  seconds = 90,
): Promise<{ got(): Promise<string>; stop(): Promise<void> }> {
  const file = `${await cleanup.tempDir()}/got`;
  const child = new Deno.Command("ip", {
    args: ["netns", "exec", netns, "timeout", String(seconds), "socat", "-u"]
      .concat([`UDP4-RECV:${port},reuseaddr`, `OPEN:${file},creat,append`]),
    stdout: "null",
    stderr: "null",
  }).spawn();
  cleanup.pid(child.pid);
  return {
    got: () => Deno.readTextFile(file).catch(() => ""),
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
    },
  };
}

/** One UDP datagram from `netns` (from `sourcePort`, and `source` if given) to `addr`:`port`. */
async function udpSend(
  netns: string,
  text: string,
  addr: string,
  port: number,
  sourcePort: number,
  source?: string,
): Promise<void> {
  const from = source ? `bind=${source}:${sourcePort}` : `sourceport=${sourcePort}`;
  await run(
    ["ip", "netns", "exec", netns, "socat", "-u", "-"].concat(
      `UDP4-SENDTO:${addr}:${port},${from},reuseaddr`,
    ),
    { stdin: text + "\n" },
  );
}

/** The node's host ports (`kh<N>`), as its kernel has them. */
async function hostPorts(node: Stack["nodes"][number]): Promise<string[]> {
  const r = await run(["ip", "-n", node.sim.netns, "-o", "link", "show"]);
  return [...r.stdout.matchAll(/^\d+: (kh\d+)[:@]/gm)].map((m) => m[1]);
}

interface Added extends Pod {
  ip: string;
}

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

/** TCP and UDP with payloads and a ping to the external host, which sees the node as source. */
async function egressWorks(
  cleanup: Cleanup,
  p: Added,
  ext: string,
  nodeIp = NODE_IP,
): Promise<void> {
  const cap = await startCapture(cleanup, ext, "eth0", `ip and dst host ${EXTERNAL}`, {
    count: 5,
    timeoutMs: 15_000,
  });
  const tcp = await tcpExchange(cleanup, ns(p), ext, EXTERNAL, 100_000);
  assert.ok(tcp.ok, `TCP from ${p.name}: ${JSON.stringify(tcp)}`);
  const udp = await udpExchange(cleanup, ns(p), ext, EXTERNAL, [1, 512, 1400]);
  assert.ok(udp.ok, `UDP from ${p.name}: ${JSON.stringify(udp)}`);
  assert.ok(await pingFrom(ns(p), EXTERNAL), `ping from ${p.name}`);
  const seen = await cap.done(1000);
  assert.ok(seen.length > 0, "the external host saw the traffic");
  for (const line of seen) {
    // tcpdump -nn: "... length N: 192.0.2.1.40000 > 192.0.2.250.20000: ..." (ICMP without ports)
    assert.match(line, new RegExp(`: ${nodeIp.replaceAll(".", "\\.")}[. ]`), line);
    assert.ok(!line.includes(p.ip), `no pod address on the wire: ${line}`);
  }
}

/** hostPort from the external host, and a probe from the node, both answered by the pod. */
async function hostAccessWorks(
  cleanup: Cleanup,
  node: Stack["nodes"][number],
  web: Added,
  ext: string,
): Promise<void> {
  const viaNode = await tcpExchange(cleanup, ext, ns(web), NODE_IP, 50_000, { port: HOST_PORT });
  assert.ok(viaNode.ok, `hostPort ${NODE_IP}:${HOST_PORT}: ${JSON.stringify(viaNode)}`);
  const probe = await tcpExchange(cleanup, node.sim.netns, ns(web), web.ip, 1000);
  assert.ok(probe.ok, `the node to ${web.ip}: ${JSON.stringify(probe)}`);
}

async function pod(
  node: Stack["nodes"][number],
  name: string,
  tenant: string,
  networks: (string | Record<string, unknown>)[],
  chained: Record<string, unknown>[] = [],
  runtimeConfig?: Record<string, unknown>,
): Promise<Added> {
  const p = await makePod(
    node,
    name,
    tenant,
    knitterList(networks, chained, "1.0.0"),
    runtimeConfig ? { runtimeConfig } : {},
  );
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  return Object.assign(p, { ip: addressOf(r.out) });
}

async function network(
  stack: Stack,
  tenant: string,
  name: string,
  cidr: string,
  more: Record<string, unknown>,
): Promise<void> {
  const gateway = cidr.replace(/0\/\d+$/, "1");
  await create(stack, `tenants/${tenant}/networks`, { name, cidr, gateway, ...more });
}

async function create(stack: Stack, path: string, body: unknown): Promise<void> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
}
