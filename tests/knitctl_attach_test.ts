/**
 * knitctl attach / detach on simulated nodes, with real traffic: extra interfaces on a Knitter
 * network (address owned by the manager, flows on br-int, across nodes) and plain veths on an OVS
 * bridge with VLAN tags; routes in the netns; detach undoes it all, also after an agent restart.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { CniRuntime } from "./support/cni_runtime.ts";
import { addPodNetns } from "../devstack/sim_node.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
} from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

function managerEnv(stack: Stack): Record<string, string> {
  return { KNITCTL_SERVER: stack.managerUrl, KNITCTL_TOKEN: stack.adminToken };
}

/** Whether `netns` gets echo replies from `ip` (a few tries, bounded by time). */
async function pings(netns: string, ip: string): Promise<boolean> {
  const r = await run(
    ["ip", "netns", "exec", netns, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-q", ip],
    { check: false },
  );
  return r.code === 0;
}

/** TCP (a megabyte) and UDP from `from` to a server in `to`, echoed back intact. */
async function talks(cleanup: Cleanup, from: string, to: string, ip: string, what: string) {
  const tcp = await tcpExchange(cleanup, from, to, ip, 1 << 20);
  assert.ok(tcp.ok, `TCP ${what}: ${tcp.error}`);
  const udp = await udpExchange(cleanup, from, to, ip, [64, 1300]);
  assert.ok(udp.ok, `UDP ${what}: ${udp.error}`);
}

async function links(netns: string): Promise<string[]> {
  const out = JSON.parse((await run(["ip", "-n", netns, "-j", "link", "show"])).stdout);
  return out.map((l: { ifname: string }) => l.ifname);
}

async function routes(netns: string): Promise<{ dst: string; gateway?: string; dev: string }[]> {
  return JSON.parse((await run(["ip", "-n", netns, "-j", "-4", "route", "show"])).stdout);
}

async function portsOf(stack: Stack, tenant: string, network: string) {
  const r = await stack.api("GET", `tenants/${tenant}/networks/${network}/ports`);
  assert.equal(r.status, 200);
  return r.body.items as { id: string; ip: string; node?: string; interface?: string }[];
}

async function bridgePorts(ovs: Ovs, bridge: string): Promise<string[]> {
  return (await ovs.vsctl(["list-ports", bridge])).split("\n").filter(Boolean);
}

Deno.test("knitctl attach --network: two netns on two nodes reach each other (ping, TCP and UDP), routes are installed, detach releases the port and is idempotent, also after an agent restart", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "blue", "10.31.0.0/24");
  await createNetwork(stack, "acme", "green", "10.32.0.0/24");
  const env = managerEnv(stack);
  const a = ipNetnsName(await addPodNetns(n1.sim, "xa"));
  const b = ipNetnsName(await addPodNetns(n2.sim, "xb"));

  const attachA = expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n1.agentSocket, "--netns", a, "--ifname", "eth1"],
      ...["--network", "blue", "-t", "acme", "-o", "json"],
      ...["--route-gw", "10.99.0.0/16,10.31.0.1", "--route-intf", "10.98.0.0/24"],
    ], env),
    0,
    "attach A",
  ).json();
  assert.equal(attachA.kind, "network");
  assert.match(attachA.address, /^10\.31\.0\.\d+\/24$/);
  const ipA = attachA.address.split("/")[0];

  // B by its netns path, with a fixed address; the table output names what was made.
  const attachB = expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n2.agentSocket, "--netns", `/var/run/netns/${b}`],
      ...["--ifname", "data0", "--network", "blue", "--tenant", "acme", "--ip", "10.31.0.50"],
    ], env),
    0,
    "attach B",
  );
  assert.match(attachB.stdout, /^INTERFACE\s+NETNS\s+ADDRESS\s+MAC\s+MTU\s+ON/);
  assert.match(attachB.stdout, /data0\s+\/var\/run\/netns\/\S+\s+10\.31\.0\.50\/24/);

  assert.ok(await pings(a, "10.31.0.50"), "A (n1) reaches B (n2) over the network");
  assert.ok(await pings(b, ipA), "B reaches A");
  await talks(cleanup, a, b, "10.31.0.50", "A to B");

  // The runtime's GC lists only its own attachments: knitctl's stay.
  const gc = await new CniRuntime(n1.sim.netns, n1.agentSocket).exec("GC", {}, {
    cniVersion: "1.1.0",
    name: "knitter",
    type: "knitter",
    "cni.dev/valid-attachments": [],
  });
  assert.equal(gc.code, 0, `GC: ${JSON.stringify(gc.out)} ${gc.stderr}`);
  assert.ok(await pings(a, "10.31.0.50"), "A still reaches B after a CNI GC on its node");

  // The routes asked for, through the new interface.
  const rA = await routes(a);
  assert.ok(
    rA.some((r) => r.dst === "10.99.0.0/16" && r.gateway === "10.31.0.1" && r.dev === "eth1"),
    `route via the gateway: ${JSON.stringify(rA)}`,
  );
  assert.ok(
    rA.some((r) => r.dst === "10.98.0.0/24" && r.gateway === undefined && r.dev === "eth1"),
    `route through the interface: ${JSON.stringify(rA)}`,
  );
  assert.ok(!rA.some((r) => r.dst === "default"), "no default route is added to the netns");

  // The manager owns both addresses, on the right nodes.
  const ports = await portsOf(stack, "acme", "blue");
  assert.deepEqual(
    ports.map((p) => [p.ip, p.node, p.interface]).sort(),
    [["10.31.0.50", "n2", "data0"], [ipA, "n1", "eth1"]].sort(),
  );

  // The same request again answers the same interface; a different one is refused.
  const again = expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n1.agentSocket, "--netns", a, "--ifname", "eth1"],
      ...["--network", "blue", "-t", "acme", "-o", "json"],
      ...["--route-gw", "10.99.0.0/16,10.31.0.1", "--route-intf", "10.98.0.0/24"],
    ], env),
    0,
    "attach A again",
  ).json();
  assert.equal(again.address, attachA.address);
  const other = expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n1.agentSocket, "--netns", a, "--ifname", "eth1"],
      ...["--network", "green", "-t", "acme"],
    ], env),
    1,
    "attach A to another network",
  );
  assert.match(other.stderr, /already attached \(network acme\/blue\): detach it first/);
  assert.equal((await portsOf(stack, "acme", "green")).length, 0, "the refusal took no address");

  // The agent restarts: B keeps its flows, and detach still finds what to undo.
  await n2.stopAgent();
  await n2.startAgent();
  assert.ok(await pings(a, "10.31.0.50"), "A still reaches B after n2's agent restarted");
  const hostB = attachB.stdout; // for the message only
  const detachB = expectExit(
    await knitctl(["detach", "--agent-socket", n2.agentSocket, "--netns", b, "--ifname", "data0"]),
    0,
    "detach B",
  );
  assert.match(detachB.stdout, /data0 in \/var\/run\/netns\/\S+ detached/, hostB);
  assert.ok(!(await links(b)).includes("data0"), "the veth is gone from B");
  assert.deepEqual((await portsOf(stack, "acme", "blue")).map((p) => p.ip), [ipA]);
  const n2Ovs = new Ovs(n2.sim.ovs);
  assert.ok(
    !(await bridgePorts(n2Ovs, "br-int")).some((p) => p.startsWith("kn")),
    "the host end left br-int",
  );
  const twice = expectExit(
    await knitctl(["detach", "--agent-socket", n2.agentSocket, "--netns", b, "--ifname", "data0"]),
    0,
    "detach B again",
  );
  assert.match(twice.stdout, /was not attached: nothing to do/);

  // Detach by PID of a process in A: the same netns, found by identity.
  const sleeper = new Deno.Command("ip", {
    args: ["netns", "exec", a, "sleep", "600"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  cleanup.pid(sleeper.pid);
  const pid = await waitChildPid(sleeper.pid);
  const detachA = expectExit(
    await knitctl([
      ...["detach", "--agent-socket", n1.agentSocket, "--pid", String(pid), "--ifname", "eth1"],
      "-o",
      "json",
    ]),
    0,
    "detach A by pid",
  ).json();
  assert.equal(detachA.removed, true);
  assert.deepEqual(await portsOf(stack, "acme", "blue"), []);
  assert.ok(!(await links(a)).includes("eth1"));

  // A running pod (made through the CNI plugin) gets a second network by its name; the pod's own
  // interface and the extra one both carry traffic.
  const web = await makePod(n1, "web", "acme", knitterList(["blue"]));
  const added = await web.add();
  assert.equal(added.code, 0, `ADD web: ${JSON.stringify(added.out)} ${added.stderr}`);
  const webBlue = addressOf(added.out);
  const extra = expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n1.agentSocket, "--pod", "acme/web", "--ifname", "net9"],
      ...["--network", "green", "-t", "acme", "-o", "json"],
    ], env),
    0,
    "attach to the pod",
  ).json();
  assert.equal(extra.netns, web.netns);
  const peer = ipNetnsName(await addPodNetns(n2.sim, "xc"));
  expectExit(
    await knitctl([
      ...["attach", "--agent-socket", n2.agentSocket, "--netns", peer, "--ifname", "eth1"],
      ...["--network", "green", "-t", "acme", "--ip", "10.32.0.40"],
    ], env),
    0,
    "attach the green peer",
  );
  assert.ok(await pings(ipNetnsName(web.netns), "10.32.0.40"), "the pod's extra interface works");
  const greenPorts = await stack.api("GET", "tenants/acme/networks/green/ports");
  const podPort = greenPorts.body.items.find((p: { interface: string }) => p.interface === "net9");
  assert.deepEqual([podPort.pod.namespace, podPort.pod.name], ["acme", "web"]);
  // The pod goes (CNI DEL); detach by pod name still finds the extra interface and releases it.
  assert.equal((await web.del()).code, 0);
  expectExit(
    await knitctl([
      "detach",
      "--agent-socket",
      n1.agentSocket,
      "--pod",
      "acme/web",
      "--ifname",
      "net9",
    ]),
    0,
    "detach from the deleted pod",
  );
  assert.deepEqual((await portsOf(stack, "acme", "green")).map((p) => p.ip), ["10.32.0.40"]);
  assert.ok(!(await portsOf(stack, "acme", "blue")).some((p) => p.ip === webBlue));
});

/** `ip netns exec` execs its command, so the pid is the sleeper's once it is in the netns. */
async function waitChildPid(pid: number): Promise<number> {
  for (let pause = 1;; pause = Math.min(pause * 2, 50)) {
    const cmd = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
    if (cmd.startsWith("sleep")) return pid;
    await new Promise((r) => setTimeout(r, pause));
  }
}

Deno.test("knitctl attach --bridge: plain veths on an OVS bridge, same VLAN tag reach each other (ping, TCP and UDP), another tag does not; bad bridges and netns are refused clearly", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"] });
  const [n1] = stack.nodes;
  const ovs = new Ovs(n1.sim.ovs);
  await ovs.ensureBridge("brx", { datapathType: "netdev", failMode: "standalone" });
  const sock = ["--agent-socket", n1.agentSocket];
  const c1 = ipNetnsName(await addPodNetns(n1.sim, "c1"));
  const c2 = ipNetnsName(await addPodNetns(n1.sim, "c2"));
  const c3 = ipNetnsName(await addPodNetns(n1.sim, "c3"));
  const plan: [string, number, string][] = [
    [c1, 10, "192.168.77.1/24"],
    [c2, 10, "192.168.77.2/24"],
    [c3, 20, "192.168.77.3/24"],
  ];
  const hostEnds: string[] = [];
  for (const [ns, vlan, ip] of plan) {
    const made = expectExit(
      await knitctl([
        ...["attach", ...sock, "--netns", ns, "--ifname", "data0", "--bridge", "brx"],
        ...["--vlan", String(vlan), "--ip", ip, "--mtu", "1400", "-o", "json"],
        ...["--route-intf", "192.168.78.0/24", "--route-gw", "192.168.79.0/24,192.168.77.254"],
      ]),
      0,
      `attach ${ns}`,
    ).json();
    assert.equal(made.kind, "bridge");
    assert.equal(made.address, ip);
    assert.equal(made.vlan, vlan);
    assert.equal(made.mtu, 1400);
    hostEnds.push(made.hostIfName);
    const tag = (await ovs.vsctl(["get", "Port", made.hostIfName, "tag"])).trim();
    assert.equal(tag, String(vlan), "the host end is an access port of the VLAN");
  }
  assert.deepEqual((await bridgePorts(ovs, "brx")).sort(), [...hostEnds].sort());

  assert.ok(await pings(c1, "192.168.77.2"), "same tag: c1 reaches c2");
  await talks(cleanup, c1, c2, "192.168.77.2", "c1 to c2 on the bridge");
  assert.ok(!(await pings(c1, "192.168.77.3")), "another tag: c1 does not reach c3");

  const r1 = await routes(c1);
  assert.ok(r1.some((r) => r.dst === "192.168.78.0/24" && r.dev === "data0" && !r.gateway));
  assert.ok(
    r1.some((r) =>
      r.dst === "192.168.79.0/24" && r.gateway === "192.168.77.254" && r.dev === "data0"
    ),
    JSON.stringify(r1),
  );
  const mtu = JSON.parse((await run(["ip", "-n", c1, "-j", "link", "show", "data0"])).stdout)[0]
    .mtu;
  assert.equal(mtu, 1400);

  // Refusals that say what to do, leaving nothing behind.
  const intoBrInt = expectExit(
    await knitctl(["attach", ...sock, "--netns", c1, "--ifname", "x1", "--bridge", "br-int"]),
    1,
    "attach to br-int",
  );
  assert.match(intoBrInt.stderr, /use network instead of bridge/);
  const noBridge = expectExit(
    await knitctl(["attach", ...sock, "--netns", c1, "--ifname", "x1", "--bridge", "nosuch"]),
    1,
    "attach to a missing bridge",
  );
  assert.match(noBridge.stderr, /No OVS bridge "nosuch" .*ovs-vsctl add-br nosuch/);
  const noNetns = expectExit(
    await knitctl(["attach", ...sock, "--netns", "kt-none-x", "--ifname", "x1", "--bridge", "brx"]),
    1,
    "attach to a missing netns",
  );
  assert.match(noNetns.stderr, /Network namespace \/var\/run\/netns\/kt-none-x does not exist/);
  const taken = expectExit(
    await knitctl(["attach", ...sock, "--netns", c1, "--ifname", "lo", "--bridge", "brx"]),
    1,
    "attach as an existing interface",
  );
  assert.match(taken.stderr, /lo already exists in .*pick another ifname/);
  const badRoute = expectExit(
    await knitctl([
      ...["attach", ...sock, "--netns", c1, "--ifname", "x1", "--bridge", "brx"],
      ...["--route-intf", "not-a-cidr"],
    ]),
    1,
    "attach with a bad route",
  );
  assert.match(badRoute.stderr, /routes\.0\.dst: must be a CIDR/);
  const usage = expectExit(
    await knitctl(["attach", ...sock, "--netns", c1, "--ifname", "x1"]),
    2,
    "attach with no kind",
  );
  assert.match(usage.stderr, /exactly one of --network NAME .* or --bridge BR/);
  assert.deepEqual((await links(c1)).sort(), ["data0", "lo"], "the refusals made nothing");
  assert.equal((await bridgePorts(ovs, "brx")).length, 3);

  for (const [ns] of plan) {
    expectExit(
      await knitctl(["detach", ...sock, "--netns", ns, "--ifname", "data0"]),
      0,
      `detach ${ns}`,
    );
    assert.deepEqual(await links(ns), ["lo"]);
  }
  assert.deepEqual(await bridgePorts(ovs, "brx"), [], "every host end left the bridge");
  const missing = await knitctl(["detach", "--agent-socket", `${stack.dir}/nosuch.sock`]);
  assert.equal(missing.code, 2, missing.stderr);
  const noSocket = expectExit(
    await knitctl([
      ...["detach", "--agent-socket", `${stack.dir}/nosuch.sock`, "--netns", c1],
      ...["--ifname", "data0"],
    ]),
    1,
    "detach through a missing socket",
  );
  assert.match(noSocket.stderr, /No agent socket at .*--agent-socket PATH/);
});
