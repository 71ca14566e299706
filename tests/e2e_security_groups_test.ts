/**
 * Security groups end to end (agent/PIPELINE.md, "Security groups"): pods on two simulated nodes
 * with real Open vSwitch (userspace datapath, connection tracking), groups set through the manager's
 * API. Each rule kind (a peer group, a CIDR, a network; TCP, UDP, ICMP; a port) allows what it
 * says and nothing else, in both directions; the replies of a port without any egress rule pass; a
 * rule change under a running TCP stream leaves the stream whole and stops new connections; a port
 * without groups keeps today's behaviour, and taking every group away gives back the node's flows
 * exactly as they were.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { api } from "./support/stack_api.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { run } from "@knitter/common";
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
import { tcpExchange, udpExchange } from "./support/traffic.ts";
import { waitForPeer } from "./support/flows.ts";

const CIDR = "10.60.0.0/24";
const WEB = 8080;
const DNS = 5353;
/** What a refused exchange waits before it says so (a bound, not a measure). */
const REFUSED = { seconds: 3 };

const WEB_RULES = [
  { direction: "ingress", protocol: "tcp", ports: String(WEB), peer: { group: "client" } },
  { direction: "ingress", protocol: "udp", ports: String(DNS), peer: { cidr: CIDR } },
  { direction: "ingress", protocol: "icmp", peer: { group: "client" } },
];
const CLIENT_RULES = [
  { direction: "egress", protocol: "tcp", peer: { group: "web" } },
  { direction: "egress", protocol: "udp", peer: { network: "app" } },
  { direction: "egress", protocol: "icmp" },
];

Deno.test("e2e security groups: rules by group, CIDR and network, both directions, replies, a rule change under a running stream", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "app", CIDR);
  // Each names the other: web first without rules, then its rules once client exists.
  await api(stack, "POST", "tenants/acme/security-groups", { name: "web", rules: [] }, 201);
  await api(stack, "POST", "tenants/acme/security-groups", {
    name: "client",
    rules: CLIENT_RULES,
  }, 201);
  await api(stack, "PUT", "tenants/acme/security-groups/web", { rules: WEB_RULES }, 200);

  const book = podBook();
  const pod = async (node: StackNode, name: string) => {
    const p = await makePod(node, name, "acme", knitterList(["app"]));
    await book.add(p);
    return p;
  };
  // web and c1 share n1 with plain2; c2 and plain are on n2.
  const web = await pod(n1, "web");
  const c1 = await pod(n1, "c1");
  const plain2 = await pod(n1, "plain2");
  const c2 = await pod(n2, "c2");
  const plain = await pod(n2, "plain");
  // A second web pod, on the other node, for new connections while web's port is busy.
  const web2 = await pod(n2, "web2");
  const ip = book.ips;
  const tcp = (from: Pod, to: Pod, port: number, opts = {}, bytes = 64_000) =>
    tcpExchange(cleanup, ns(from), ns(to), ip[to.name], bytes, { port, ...opts });
  const udp = (from: Pod, to: Pod, port: number, opts = {}) =>
    udpExchange(cleanup, ns(from), ns(to), ip[to.name], [100, 1200], { port, ...opts });

  const before = { n1: await flows(n1), n2: await flows(n2) };
  await t.step(
    "without groups nothing changes: no ACL flow, and a pod reaches any other",
    async () => {
      for (const lines of [before.n1, before.n2]) {
        assert.ok(!lines.some((l) => /table=5[01]|ct\(/.test(l)), "no security group flow");
      }
      assert.ok((await tcp(plain, web, WEB)).ok, "plain -> web TCP");
      assert.ok((await tcp(web, c1, WEB)).ok, "web -> c1 TCP");
    },
  );

  await setGroups(stack, web, ["web"]);
  await setGroups(stack, web2, ["web"]);
  await setGroups(stack, c1, ["client"]);
  await setGroups(stack, c2, ["client"]);
  // n1 knows c2's group through the feed: web's rules name its address.
  await waitForPeer(n1, "table=51", `nw_src=${ip.c2}`, WEB);
  await untilFlow(n2, "table=50", `nw_dst=${ip.web}`);

  await t.step(
    "ingress by group on both nodes; web has no egress rule, yet its replies pass",
    async () => {
      for (const from of [c1, c2]) {
        const r = await tcp(from, web, WEB);
        assert.ok(
          r.ok && r.received === r.sent,
          `${from.name} -> web:${WEB}: ${JSON.stringify(r)}`,
        );
      }
      assert.ok(await pings(c2, ip.web), "c2 pings web (icmp from group client)");
    },
  );

  await t.step(
    "denied: a pod outside the group, another port, and what web itself opens",
    async () => {
      assert.equal((await tcp(plain, web, WEB, REFUSED)).ok, false, "plain -> web TCP");
      assert.equal((await tcp(c1, web, WEB + 1, REFUSED)).ok, false, "c1 -> web, another port");
      assert.equal((await tcp(web, c1, WEB, REFUSED)).ok, false, "web -> c1: no egress rule");
      assert.equal((await udp(web, plain, DNS, REFUSED)).ok, false, "web -> plain UDP");
      assert.equal(await pings(plain, ip.web), false, "plain pings web: icmp only from clients");
    },
  );

  await t.step("UDP by CIDR: any pod of the subnet, on that port only", async () => {
    assert.ok((await udp(plain, web, DNS)).ok, "plain -> web UDP (in the CIDR, no groups)");
    assert.ok((await udp(c2, web, DNS)).ok, "c2 -> web UDP");
    assert.equal((await udp(c1, web, DNS + 1, REFUSED)).ok, false, "c1 -> web, another port");
  });

  await t.step(
    "egress by network and by group: c1 may send UDP anywhere in app, TCP only to web",
    async () => {
      assert.ok((await udp(c1, plain2, DNS + 7)).ok, "c1 -> plain2 UDP (peer network app)");
      assert.ok((await udp(c2, plain, DNS + 7)).ok, "c2 -> plain UDP, on its node");
      assert.equal((await tcp(c1, plain2, WEB, REFUSED)).ok, false, "c1 -> plain2 TCP");
      assert.equal((await tcp(c2, plain, WEB, REFUSED)).ok, false, "c2 -> plain TCP");
      // plain has no groups: what it opens to c2 is checked by c2's ingress (none).
      assert.equal((await tcp(plain, c2, WEB, REFUSED)).ok, false, "plain -> c2 TCP");
    },
  );

  await t.step("ports without groups keep today's behaviour among themselves", async () => {
    assert.ok((await tcp(plain, plain2, WEB)).ok, "plain -> plain2 TCP");
    assert.ok((await udp(plain2, plain, DNS)).ok, "plain2 -> plain UDP");
    assert.ok(await pings(plain2, ip.plain), "plain2 pings plain");
  });

  await t.step(
    "a rule change under a running TCP stream: the stream completes, new connections meet the new rules",
    async () => {
      // 1.2 MB at 60 kB/s: the stream runs while the rule goes.
      let finished = false;
      const stream = tcp(c2, web, WEB, { rate: 60_000, seconds: 60 }, 1_200_000)
        .finally(() => finished = true);
      await waitFor("c2's stream to web established on n1", async () => {
        const ct = await new Ovs(n1.sim.ovs).appctl(["dpctl/dump-conntrack"]);
        return ct.split("\n").some((l) =>
          l.includes(`src=${ip.c2},dst=${ip.web}`) && l.includes(`dport=${WEB}`) &&
          l.includes("ESTABLISHED")
        );
      }, 15_000);
      const udpOnly = WEB_RULES.filter((r) => r.protocol !== "tcp");
      await api(stack, "PUT", "tenants/acme/security-groups/web", { rules: udpOnly }, 200);
      for (const node of [n1, n2]) await untilFlow(node, "table=51", `tp_dst=${WEB}`, false);
      assert.equal(finished, false, "the stream still runs when the rule is gone");
      assert.equal((await tcp(c1, web2, WEB, REFUSED)).ok, false, "a new connection is refused");
      const r = await stream;
      assert.ok(
        r.ok && r.received === r.sent,
        `the running stream completed: ${JSON.stringify(r)}`,
      );
      await api(stack, "PUT", "tenants/acme/security-groups/web", { rules: WEB_RULES }, 200);
      await waitForPeer(n1, "table=51", `nw_src=${ip.c1}`, WEB);
      assert.ok((await tcp(c1, web, WEB)).ok, "allowed again, on the same node");
      assert.ok((await tcp(c1, web2, WEB)).ok, "and across nodes");
    },
  );

  await t.step("taking every group away gives back each node's flows as they were", async () => {
    for (const p of [web, web2, c1, c2]) await setGroups(stack, p, []);
    await waitFor("n1 and n2 without security group flows", async () => {
      const now = { n1: await flows(n1), n2: await flows(n2) };
      return same(now.n1, before.n1) && same(now.n2, before.n2);
    }, 15_000);
    assert.ok((await tcp(plain, web, WEB)).ok, "plain -> web TCP again");
  });
});

Deno.test("e2e security groups on IPv6: neighbour discovery passes, TCP by group, replies, ICMPv6 without a rule refused", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  await createTenant(stack, "acme");
  await api(stack, "POST", "tenants/acme/networks", {
    name: "app",
    cidr: "fd00:60::/64",
    gateway: "fd00:60::1",
    allocationPools: [{ start: "fd00:60::10", end: "fd00:60::ff" }],
  }, 201);
  await api(stack, "POST", "tenants/acme/security-groups", { name: "six", rules: [] }, 201);
  await api(stack, "PUT", "tenants/acme/security-groups/six", {
    rules: [
      { direction: "ingress", protocol: "tcp", ports: String(WEB), peer: { group: "six" } },
      { direction: "egress", protocol: "any" },
    ],
  }, 200);
  const book = podBook();
  const pods: Pod[] = [];
  for (const name of ["a", "b", "c"]) {
    const p = await makePod(n1, name, "acme", knitterList(["app"]));
    await book.add(p);
    pods.push(p);
  }
  const [a, b, c] = pods;
  const tcp = (from: Pod, to: Pod, opts = {}) =>
    tcpExchange(cleanup, ns(from), ns(to), book.ips[to.name], 64_000, { port: WEB, ...opts });
  await setGroups(stack, a, ["six"]);
  await setGroups(stack, b, ["six"]);
  await waitForPeer(n1, "table=51", `ipv6_src=${book.ips.a}`, WEB);
  // Fresh neighbour tables: every exchange below resolves its peer through the ACL tables first.
  for (const p of pods) await run(["ip", "-n", ns(p), "neigh", "flush", "dev", "eth0"]);
  assert.ok((await tcp(a, b)).ok, "a -> b TCP (group six), after neighbour discovery");
  assert.equal((await tcp(c, b, REFUSED)).ok, false, "c -> b TCP: c is in no group");
  assert.ok((await tcp(b, c)).ok, "b -> c TCP: egress any, the replies pass");
  assert.equal(await pings(c, book.ips.b), false, "c pings b: no ICMPv6 rule");
  assert.ok(await pings(b, book.ips.c), "b pings c (c has no groups)");
});

Deno.test("e2e security groups: two tenants' overlapping subnets never share a connection (a conntrack zone per network)", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  const book = podBook();
  const pods: Record<string, Pod> = {};
  // The same CIDR in both tenants: their pods get the same addresses. acme's server takes UDP from
  // the subnet; globex's takes nothing in. UDP: a datagram of a known flow is +est in its zone, so
  // a zone shared by the two networks would let globex's twin datagrams in.
  for (
    const [tenant, rules] of [["acme", [{
      direction: "ingress",
      protocol: "udp",
      peer: { cidr: "10.70.0.0/24" },
    }]], ["globex", []]] as const
  ) {
    await createTenant(stack, tenant);
    await createNetwork(stack, tenant, "app", "10.70.0.0/24");
    await api(stack, "POST", `tenants/${tenant}/security-groups`, { name: "srv", rules }, 201);
    for (const role of ["client", "server"]) {
      const name = `${tenant[0]}${role}`;
      pods[name] = await makePod(n1, name, tenant, knitterList(["app"]));
      await book.add(pods[name]);
    }
    await setGroups(stack, pods[`${tenant[0]}server`], ["srv"], tenant);
  }
  assert.equal(book.ips.aclient, book.ips.gclient, "the clients share an address");
  assert.equal(book.ips.aserver, book.ips.gserver, "the servers share an address");
  await untilFlow(n1, "table=51", `nw_src=10.70.0.0/24`);
  await waitFor("both servers' hooks", async () => {
    return (await flows(n1, "table=30")).filter((l) => l.includes("priority=103")).length === 2;
  }, 15_000);

  // One peer per server, echoed by socat itself (PIPE): no forked children or `cat` to outlive the
  // pid that cleanup ends; -T ends it anyway if the test dies before cleanup.
  const echo = ["socat", "-T", "120", "UDP-LISTEN:5353,reuseaddr", "PIPE"];
  for (const server of ["aserver", "gserver"]) spawn(cleanup, ns(pods[server]), echo);
  // A datagram before the server binds is answered port-unreachable, which ends the client.
  for (const server of ["aserver", "gserver"]) {
    await waitFor(`${server} listens`, async () => {
      const r = await run(["ss", "-Hlun", "sport = :5353"], { netns: ns(pods[server]) });
      return r.stdout.includes(":5353");
    }, 15_000);
  }
  // acme's client keeps sending from port 40000, and gets its echoes.
  const dial = `UDP:${book.ips.aserver}:5353,sourceport=40000,reuseaddr`;
  const open = spawn(cleanup, ns(pods.aclient), ["socat", "STDIO", dial], true);
  await waitFor("acme's connection echoes", async () => {
    await open.write("hello\n");
    return (await open.read()).includes("hello");
  }, 15_000);
  // globex's client sends the very same 5-tuple in its own network: its server takes nothing in,
  // and acme's flow, established in acme's zone, is nothing to globex's.
  const twin = await run(["socat", "-T", "3", "STDIO", dial], {
    netns: ns(pods.gclient),
    stdin: "hello\n",
    check: false,
    timeoutMs: 15_000,
  });
  assert.ok(!twin.stdout.includes("hello"), `globex's twin connection got through: ${twin.stderr}`);
  const ct = await new Ovs(n1.sim.ovs).appctl(["dpctl/dump-conntrack"]);
  const zones = new Set(
    ct.split("\n").filter((l) => l.includes("sport=40000")).map((l) => /zone=(\d+)/.exec(l)?.[1]),
  );
  assert.ok(zones.size >= 1 && !zones.has(undefined), `tracked in network zones: ${ct}`);
  await open.close();
});

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

/** A process in a netns, ended at cleanup; with `io`, its stdin and stdout kept for the test. */
function spawn(cleanup: Cleanup, netns: string, argv: string[], io = false) {
  const child = new Deno.Command("ip", {
    args: ["netns", "exec", netns, ...argv],
    stdin: io ? "piped" : "null",
    stdout: io ? "piped" : "null",
    stderr: "null",
  }).spawn();
  cleanup.pid(child.pid);
  const writer = io ? child.stdin.getWriter() : undefined;
  const reader = io ? child.stdout.pipeThrough(new TextDecoderStream()).getReader() : undefined;
  let seen = "";
  return {
    write: (text: string) => writer!.write(new TextEncoder().encode(text)),
    /** What it printed so far (waits for the next chunk). */
    async read(): Promise<string> {
      const { value } = await reader!.read();
      seen += value ?? "";
      return seen;
    },
    async close(): Promise<void> {
      await writer?.close().catch(() => {});
      try {
        child.kill("SIGTERM");
      } catch { /* ended */ }
      await reader?.cancel().catch(() => {});
      await child.status;
    },
  };
}

/** Sets the groups of the pod's port through the manager (a second PUT of the port). */
async function setGroups(
  stack: Stack,
  pod: Pod,
  groups: string[],
  tenant = "acme",
): Promise<void> {
  const ports = await api(stack, "GET", `ports?pod=${tenant}/${pod.name}`, undefined, 200);
  assert.equal(ports.items.length, 1, `one port of ${pod.name}`);
  const port = ports.items[0];
  await api(
    stack,
    "PUT",
    `tenants/${tenant}/networks/app/ports/${port.id}`,
    { securityGroups: groups },
    200,
  );
}

/** The node's br-int flows (canonical, sorted). */
function flows(node: StackNode, match?: string): Promise<string[]> {
  return new Ovs(node.sim.ovs).dumpFlows("br-int", match);
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((l, i) => l === b[i]);
}

/** Waits until a flow of `match` holds `text` (or, with present false, none does). */
async function untilFlow(node: StackNode, match: string, text: string, present = true) {
  await waitFor(`${node.name}: a flow with ${text} ${present ? "" : "gone"}`, async () => {
    return (await flows(node, match)).some((l) => l.includes(text)) === present;
  }, 15_000);
}
