/**
 * End to end: a VM's live migration between two simulated nodes with real Open vSwitch, as
 * KubeVirt's bridge binding does it. The "VM" is a netns G holding the claim's address and MAC on
 * eth0, one end of a veth whose other end sits in the virt-launcher pod's netns, bridged there with
 * the pod's CNI interface (whose address moved to the guest). The migration: the target pod's ADD on
 * n2 (same claim: same address and MAC, inactive), the "freeze" (the veth's pod end moves into the
 * target pod and its bridge: G's sockets never notice), the guest announces itself (gratuitous ARPs
 * from busybox arping -U, on QEMU's self-announce schedule), then the source pod's DEL. A TCP stream from a third pod carries random bytes through it all
 * and gets every byte back; a 10 ms ping measures the loss window (printed, not asserted: the
 * figure goes to docs/benchmarks.md).
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { addPodNetns } from "../devstack/sim_node.ts";
import { ipNetnsName, knitterList, makePod, pings, type Pod } from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const SG_RULES = [
  { direction: "ingress", protocol: "tcp", peer: { cidr: "10.0.0.0/8" } },
  { direction: "ingress", protocol: "icmp", peer: { cidr: "10.0.0.0/8" } },
  { direction: "egress", protocol: "any" },
];
/** The stream: this many random bytes at this rate, so that it runs through the migration. */
const STREAM = { bytes: 1_200_000, rate: 200_000, seconds: 40 };
/** The ping: one every 10 ms. */
const PING_MS = 10;

interface Net {
  name: string;
  cidr: string;
  body: Record<string, unknown>;
}

const NETWORKS: Net[] = [
  { name: "overlay", cidr: "10.71.0.0/24", body: {} },
  { name: "tagged", cidr: "10.72.0.0/24", body: { type: "vlan", physnet: "phys1" } },
  { name: "plain", cidr: "10.73.0.0/24", body: { type: "flat", physnet: "phys1" } },
];

Deno.test("e2e migration: a VM migrates from n1 to n2 on VXLAN, VLAN and flat with its TCP stream intact and its security group; a failed migration leaves the source untouched", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "physnets", { name: "phys1", vlanRanges: [{ start: 300, end: 399 }] });
  await api(stack, "POST", "tenants", { name: "acme" });
  await api(stack, "POST", "tenants/acme/security-groups", { name: "vm", rules: SG_RULES });
  for (const n of NETWORKS) {
    await api(stack, "POST", "tenants/acme/networks", {
      name: n.name,
      cidr: n.cidr,
      gateway: n.cidr.replace(/0\/24$/, "1"),
      securityGroups: ["vm"],
      ...n.body,
    });
  }

  for (const net of NETWORKS) {
    await t.step(`${net.name} (${net.body.type ?? "vxlan"}): the VM migrates n1 → n2`, async () => {
      const claim = await api(stack, "POST", `tenants/acme/networks/${net.name}/claims`, {
        name: `vm-${net.name}`,
      });
      const client = await podOn(n1, `c-${net.name}`, [net.name]);
      const source = await podOn(n1, `src-${net.name}`, [{ name: net.name, claim: claim.name }]);
      const guest = await vmIn(cleanup, source, claim, `g-${net.name}`);
      assert.ok(await pings(client, claim.ip), "the client reaches the VM on n1");
      assert.equal(
        (await udpExchange(cleanup, ipNetnsName(client.netns), guest, claim.ip, [100], {
          seconds: 2,
        })).ok,
        false,
        "the security group lets no UDP in on n1",
      );

      const stream = tcpExchange(
        cleanup,
        ipNetnsName(client.netns),
        guest,
        claim.ip,
        STREAM.bytes,
        { rate: STREAM.rate, seconds: STREAM.seconds },
      );
      const ping = pingWindow(cleanup, client, claim.ip);
      await sleep(1000);

      // The target pod on n2 names the same claim: same address and MAC, inactive.
      const target = await podOn(n2, `dst-${net.name}`, [{ name: net.name, claim: claim.name }]);
      await bridgeIn(target);
      assert.deepEqual(await claimPorts(stack, net.name, claim.name), [["n1", true], [
        "n2",
        false,
      ]]);
      assert.ok(await pings(client, claim.ip), "the VM is still reached on n1 meanwhile");
      // Freeze and resume on n2: the VM's link moves to the target pod's bridge.
      await run([
        "ip",
        "-n",
        ipNetnsName(source.netns),
        "link",
        "set",
        "vm",
        "netns",
        ipNetnsName(target.netns),
      ]);
      await run([
        "ip",
        "-n",
        ipNetnsName(target.netns),
        "link",
        "set",
        "vm",
        "master",
        "br0",
        "up",
      ]);
      // The guest resumes once its link is up (as QEMU on the target: its tap is ready first).
      await waitFor("the VM's link up on n2", () => linkUp(guest, "eth0"), 5000);
      await announce(guest, claim.ip);
      const activeOnN2 = async () =>
        JSON.stringify(await claimPorts(stack, net.name, claim.name)) ===
          JSON.stringify([["n1", false], ["n2", true]]);
      await waitFor("the target port active at the manager", activeOnN2, 10_000);
      await sleep(2000);
      const del = await source.del();
      assert.equal(del.code, 0, `source DEL: ${del.stderr}`);

      const got = await stream;
      assert.ok(got.ok, `the TCP stream through the migration: ${JSON.stringify(got)}`);
      assert.equal(got.received, STREAM.bytes);
      const window = await ping.stop();
      console.log(
        `loss window on ${net.name}: ${window.lost} of ${window.sent} pings of ${PING_MS} ms lost = ${
          window.lost * PING_MS
        } ms`,
      );
      assert.ok(window.sent > 100, `the ping ran through the migration: ${JSON.stringify(window)}`);
      assert.ok(
        await pings(client, claim.ip),
        "the client reaches the VM on n2 after the source's DEL",
      );
      // The security group moved with the port: still no UDP in, now on n2.
      assert.equal(
        (await udpExchange(cleanup, ipNetnsName(client.netns), guest, claim.ip, [100], {
          seconds: 2,
        })).ok,
        false,
        "the security group lets no UDP in on n2",
      );
      const after = await tcpExchange(cleanup, ipNetnsName(client.netns), guest, claim.ip, 64_000);
      assert.ok(after.ok, `a new TCP connection to the VM on n2: ${JSON.stringify(after)}`);
    });
  }

  await t.step(
    "a failed migration (target DEL before activation) leaves the source untouched",
    async () => {
      const net = NETWORKS[0];
      const claim = await api(stack, "POST", `tenants/acme/networks/${net.name}/claims`, {
        name: "vm-failed",
      });
      const client = await podOn(n2, "c-failed", [net.name]);
      const source = await podOn(n1, "src-failed", [{ name: net.name, claim: claim.name }]);
      const guest = await vmIn(cleanup, source, claim, "g-failed");
      const stream = tcpExchange(
        cleanup,
        ipNetnsName(client.netns),
        guest,
        claim.ip,
        400_000,
        { rate: 200_000, seconds: 30 },
      );
      const target = await podOn(n2, "dst-failed", [{ name: net.name, claim: claim.name }]);
      const del = await target.del();
      assert.equal(del.code, 0, `target DEL: ${del.stderr}`);
      const got = await stream;
      assert.ok(got.ok, `the stream to the source went on: ${JSON.stringify(got)}`);
      assert.ok(await pings(client, claim.ip), "the VM is still reached on n1");
      assert.deepEqual(await claimPorts(stack, net.name, claim.name), [["n1", true]]);
    },
  );
});

/** The claim's ports as [node, active], by node. */
async function claimPorts(
  stack: Stack,
  network: string,
  claim: string,
): Promise<[string, boolean][]> {
  const c = await api(
    stack,
    "GET",
    `tenants/acme/networks/${network}/claims/${claim}`,
    undefined,
    200,
  );
  return c.ports
    .map((p: { node?: string; active: boolean }) => [p.node ?? "", p.active] as [string, boolean])
    .sort();
}

/** A pod on `node` with the given networks, added; asserts the port's activity. */
async function podOn(
  node: StackNode,
  name: string,
  networks: (string | Record<string, unknown>)[],
): Promise<Pod> {
  const pod = await makePod(node, name, "acme", knitterList(networks));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  return pod;
}

/**
 * The virt-launcher pod's side of the bridge binding: eth0 loses its address and MAC (the guest has
 * them) and joins br0, as does the VM's link when it comes. IPv6 off: the pod sends nothing itself.
 */
async function bridgeIn(pod: Pod): Promise<void> {
  const ns = ipNetnsName(pod.netns);
  await run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
  await run(["ip", "-n", ns, "addr", "flush", "dev", "eth0"]);
  await run(["ip", "-n", ns, "link", "set", "eth0", "down"]);
  await run(["ip", "-n", ns, "link", "set", "eth0", "address", randomMac()]);
  await run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"]);
  await run(["ip", "-n", ns, "link", "set", "br0", "address", randomMac()]);
  await run(["ip", "-n", ns, "link", "set", "eth0", "master", "br0", "up"]);
  await run(["ip", "-n", ns, "link", "set", "br0", "up"]);
}

/** The VM: netns G with the claim's address and MAC on eth0, its link bridged in `pod`. */
async function vmIn(
  cleanup: Cleanup,
  pod: Pod,
  claim: { ip: string; address: string; mac: string },
  name: string,
): Promise<string> {
  await bridgeIn(pod);
  const g = ipNetnsName(await addPodNetns(pod.node.sim, name));
  void cleanup;
  const ns = ipNetnsName(pod.netns);
  await run(["ip", "netns", "exec", g, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
  await run([
    "ip",
    "-n",
    ns,
    "link",
    "add",
    "vm",
    "type",
    "veth",
    "peer",
    "name",
    "eth0",
    "netns",
    g,
  ]);
  await run(["ip", "-n", ns, "link", "set", "vm", "master", "br0", "up"]);
  await run(["ip", "-n", g, "link", "set", "eth0", "address", claim.mac]);
  await run(["ip", "-n", g, "addr", "add", claim.address, "dev", "eth0"]);
  await run(["ip", "-n", g, "link", "set", "eth0", "up"]);
  return g;
}

/** Whether `dev` in `netns` is up with its carrier, its queue ready (operstate UP). */
async function linkUp(netns: string, dev: string): Promise<boolean> {
  const r = await run(["ip", "-n", netns, "-br", "link", "show", dev]);
  return r.stdout.split(/\s+/)[1] === "UP";
}

/** A 10 ms ping from `pod` to `ip` until stop(): how many were sent and lost. */
function pingWindow(
  cleanup: Cleanup,
  pod: Pod,
  ip: string,
): { stop(): Promise<{ sent: number; lost: number }> } {
  const child = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      ipNetnsName(pod.netns),
      "ping",
      "-q",
      "-i",
      String(PING_MS / 1000),
      "-W",
      "1",
      ip,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  cleanup.pid(child.pid);
  const out = child.output();
  return {
    async stop() {
      child.kill("SIGINT");
      const text = new TextDecoder().decode((await out).stdout);
      const m = text.match(/(\d+) packets transmitted, (\d+) received/);
      if (!m) throw new Error(`no ping summary: ${text}`);
      return { sent: Number(m[1]), lost: Number(m[1]) - Number(m[2]) };
    },
  };
}

function randomMac(): string {
  const b = crypto.getRandomValues(new Uint8Array(5));
  return ["06", ...[...b].map((x) => x.toString(16).padStart(2, "0"))].join(":");
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The resumed guest's announcements, as QEMU makes them after a migration (its self-announce
 * defaults: 5 rounds, 50 ms apart at first, 100 ms more each time): a gratuitous ARP each, so one
 * frame lost on the way does not leave the target port inactive.
 */
async function announce(guest: string, ip: string): Promise<void> {
  for (let round = 0; round < 5; round++) {
    if (round > 0) await sleep(50 + 100 * (round - 1));
    await run([
      "ip",
      "netns",
      "exec",
      guest,
      "busybox",
      "arping",
      "-U",
      "-c",
      "1",
      "-I",
      "eth0",
      ip,
    ]);
  }
}
