/**
 * knitctl trace and knitctl verify node on the real stack (root, userspace Open vSwitch, two
 * simulated nodes on an underlay and a physnet): on each network type (VXLAN across nodes, VLAN,
 * flat) a trace of an allowed packet follows it to the pod on the other node, and a dropped one
 * says why in words (another tenant's network, another network of the tenant, a spoofed source);
 * the offline trace, from the manager's model alone, says the same; a pod that does not exist yet
 * is traced offline. verify is clean on a clean node and lists a deleted flow, an OVS port removed
 * by hand, a state entry without a manager port and a manager port without a state entry.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { parseDumpFlows } from "@knitter/wasm";
import { expectExit } from "../knitctl/test_support.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import type { TraceReport } from "../knitctl/trace.ts";
import type { VerifyReport } from "../knitctl/verify.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, knitterList, makePod, pings, type Pod } from "./support/pods.ts";
import { type Stack, type StackNode, startStack } from "../devstack/stack.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";

interface Added {
  pod: Pod;
  ip: string;
  mac: string;
  /** The manager's port ID of its eth0. */
  portId: string;
}

Deno.test("e2e trace and verify: allowed and dropped packets on vxlan, vlan and flat, live and offline agree; verify lists hand-made drift and exits 0 on a clean node", async (t) => {
  await using cleanup = new Cleanup();
  // No periodic flow check: the drift made by hand must stay until verify has seen it.
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    physnets: ["phys1"],
    agent: { flowCheck: { intervalSeconds: 0 } },
  });
  const [n1, n2] = stack.nodes;
  const ctl = await knitctlOn(stack);

  await create(stack, "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] });
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  const net = (tenant: string, body: Record<string, unknown>) =>
    create(stack, `tenants/${tenant}/networks`, body);
  await net("acme", { name: "blue", cidr: "10.10.0.0/24", gateway: "10.10.0.1" });
  await net("globex", { name: "other", cidr: "10.10.0.0/24", gateway: "10.10.0.1" });
  const storage = await net("acme", {
    name: "storage",
    type: "vlan",
    physnet: "phys1",
    cidr: "10.40.0.0/24",
    gateway: "10.40.0.1",
  });
  await net("acme", {
    name: "legacy",
    type: "flat",
    physnet: "phys1",
    cidr: "10.41.0.0/24",
    gateway: "10.41.0.1",
  });

  const b1 = await addedPod(stack, n1, "b1", "acme", ["blue"]);
  const b2 = await addedPod(stack, n2, "b2", "acme", ["blue"]);
  const g2 = await addedPod(stack, n2, "g2", "globex", [{ name: "other", ip: "10.10.0.50" }]);
  const v1 = await addedPod(stack, n1, "v1", "acme", ["storage"]);
  const v2 = await addedPod(stack, n2, "v2", "acme", ["storage"]);
  const f1 = await addedPod(stack, n1, "f1", "acme", ["legacy"]);
  const f2 = await addedPod(stack, n2, "f2", "acme", ["legacy"]);

  /** A trace, live and offline: both reports, which must agree hop by hop. */
  async function traced(args: string[]): Promise<TraceReport> {
    const live = expectExit(await ctl(["trace", ...args, "-o", "json"]), 0, `trace ${args}`)
      .json() as TraceReport;
    const offline = expectExit(
      await ctl(["trace", "--offline", ...args, "-o", "json"]),
      0,
      `trace --offline ${args}`,
    ).json() as TraceReport;
    assert.equal(live.mode, "live");
    assert.equal(offline.mode, "offline");
    assert.deepEqual(shape(offline), shape(live), `live and offline agree: ${args.join(" ")}`);
    assert.equal(offline.result, live.result);
    return live;
  }

  await t.step("vxlan: b1 on n1 reaches b2 on n2 through the tunnel", async () => {
    const r = await traced([
      "--src",
      "acme/blue/" + portId(b1),
      "--dst",
      b2.ip,
      "--proto",
      "tcp",
      "--dport",
      "80",
    ]);
    assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"]);
    assert.deepEqual(kinds(r.hops[0]), ["classifyLocal", "spoofIpv4", "default", "forwardRemote"]);
    assert.equal(r.hops[0].outcomes[0].kind, "tunnel");
    assert.deepEqual(kinds(r.hops[1]), ["classifyTunnel", "forwardLocal"]);
    assert.ok(r.delivered);
    assert.equal(r.result, `delivered on n2 to acme/b2/eth0`);
    assert.ok(await pings(b1.pod, b2.ip), "and a real ping gets through");
  });

  await t.step(
    "vxlan: to the same address in another tenant is dropped on n1, and says why",
    async () => {
      const r = await traced(["--src", b1.ip, "-t", "acme", "--dst", g2.ip]);
      assert.deepEqual(r.hops.map((h) => h.node), ["n1"]);
      const drop = r.hops[0].outcomes[0];
      assert.equal(drop.kind, "drop");
      assert.equal(drop.kind === "drop" && drop.code, "other_tenant");
      assert.match(
        r.result,
        /^dropped on n1: destination 10\.10\.0\.50 is on another tenant's network \(globex\/other/,
      );
      const text =
        expectExit(await ctl(["trace", "--src", b1.ip, "-t", "acme", "--dst", g2.ip]), 0, "text")
          .stdout;
      assert.match(
        text,
        /result: dropped on n1: destination 10\.10\.0\.50 is on another tenant's network/,
      );
      assert.match(text, / 30 FORWARD +prio +0 /, "the step that dropped it is shown");
    },
  );

  await t.step("vxlan: a spoofed source address is dropped where it enters", async () => {
    const r = await traced([
      "--src",
      `acme/blue/${portId(b1)}`,
      "--dst",
      b2.ip,
      "--src-ip",
      "10.10.0.99",
    ]);
    assert.deepEqual(kinds(r.hops[0]), ["classifyLocal", "default"]);
    assert.equal(r.hops[0].steps[1].tableName, "SPOOF");
    assert.match(
      r.result,
      /source address 10\.10\.0\.99 is not the port's \(acme\/b1\/eth0 has 10\.10\.0\.\d+\)/,
    );
  });

  await t.step("vlan: v1 reaches v2 over the physnet, tagged with the network's VLAN", async () => {
    const r = await traced([
      "--src",
      v1.ip,
      "-t",
      "acme",
      "--dst",
      v2.ip,
      "--proto",
      "udp",
      "--dport",
      "53",
    ]);
    assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"]);
    assert.deepEqual(r.hops[0].outcomes, [{
      kind: "physnet",
      physnet: "phys1",
      vlan: storage.segmentId,
    }]);
    assert.equal(r.hops[1].ingress, `physnet phys1, VLAN ${storage.segmentId}`);
    assert.deepEqual(kinds(r.hops[1]), ["classifyPhysnet", "forwardLocal"]);
    assert.equal(r.result, "delivered on n2 to acme/v2/eth0");
  });

  await t.step(
    "vlan: a spoofed source MAC is dropped; another network of the tenant is dropped on arrival",
    async () => {
      const spoofed = await traced([
        "--src",
        v1.ip,
        "-t",
        "acme",
        "--dst",
        v2.ip,
        "--src-mac",
        "02:00:00:00:00:99",
      ]);
      assert.match(
        spoofed.result,
        /^dropped on n1: source MAC 02:00:00:00:00:99 is not the port's \(acme\/v1\/eth0 has /,
      );
      const r = await traced(["--src", v1.ip, "-t", "acme", "--dst", f2.ip]);
      // Unknown unicast goes out to the physnet (hosts outside Knitter may live there); n2 drops it.
      assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"]);
      assert.equal(r.hops[0].steps.at(-1)!.kind, "unknownUnicast");
      assert.equal(r.hops[1].steps.at(-1)!.kind, "fromOutside");
      assert.match(
        r.result,
        /^dropped on n2: destination 10\.41\.0\.\d+ is on another network of the tenant \(acme\/legacy/,
      );
    },
  );

  await t.step(
    "flat: f1 reaches f2 untagged; another tenant's address is dropped on arrival",
    async () => {
      const ok = await traced([
        "--src",
        f1.ip,
        "-t",
        "acme",
        "--dst",
        f2.ip,
        "--proto",
        "tcp",
        "--dport",
        "22",
      ]);
      assert.deepEqual(ok.hops[0].outcomes, [{ kind: "physnet", physnet: "phys1" }]);
      assert.equal(ok.hops[1].ingress, "physnet phys1, untagged");
      assert.equal(ok.result, "delivered on n2 to acme/f2/eth0");
      assert.ok(await pings(f1.pod, f2.ip), "and a real ping gets through");
      const r = await traced(["--src", f1.ip, "-t", "acme", "--dst", g2.ip]);
      assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"]);
      assert.match(
        r.result,
        /^dropped on n2: destination 10\.10\.0\.50 is on another tenant's network \(globex\/other/,
      );
    },
  );

  await t.step("offline what-if: a pod that does not exist yet on n1 would reach b2", async () => {
    const r = expectExit(
      await ctl([
        ...["trace", "--offline", "--node", "n1", "-t", "acme", "--network", "blue"],
        ...["--ip", "10.10.0.77", "--dst", b2.ip, "-o", "json"],
      ]),
      0,
      "what-if",
    ).json() as TraceReport;
    assert.equal(r.source.hypothetical, true);
    assert.deepEqual(r.hops.map((h) => h.node), ["n1", "n2"]);
    assert.equal(r.result, "delivered on n2 to acme/b2/eth0");
    // A network with no port at all yet: its address is nobody's, the ARP request reaches nobody.
    await net("acme", { name: "green", cidr: "10.60.0.0/24", gateway: "10.60.0.1" });
    const empty = expectExit(
      await ctl([
        ...["trace", "--offline", "--node", "n2", "-t", "acme", "--network", "green"],
        ...["--ip", "10.60.0.9", "--dst", "10.60.0.5", "-o", "json"],
      ]),
      0,
      "what-if on an empty network",
    ).json() as TraceReport;
    assert.equal(empty.packet.proto, "arp");
    assert.equal(empty.delivered, false);
    assert.equal(
      empty.result,
      "nobody has 10.60.0.5: the ARP request for it is dropped on n2: a broadcast with no port of acme/green to go to",
    );
  });

  await t.step("verify: a clean node has no differences and exits 0", async () => {
    const r = expectExit(await ctl(["verify", "node", "n1"]), 0, "verify clean");
    assert.match(r.stdout, /node n1: no differences/);
  });

  await t.step(
    "verify: a deleted flow, a port removed by hand, a state entry without a manager port and a manager port without state are each listed, exit 1",
    async () => {
      const env = { OVS_RUNDIR: n1.sim.ovs.rundir! };
      const ofctl = (args: string[]) =>
        run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", ...args], { env });
      // b1's own flow in FORWARD: deleted strictly, by table, priority and match.
      const lines = parseDumpFlows((await ofctl(["dump-flows", "br-int", "table=30"])).stdout);
      const gone = lines.find((l) => l.includes(`dl_dst=${b1.mac}`) && l.includes("priority=100"))!;
      assert.ok(gone, `b1's forwarding flow is there: ${lines.join("\n")}`);
      await ofctl([
        "--strict",
        "del-flows",
        "br-int",
        gone.slice(gone.indexOf(",") + 1, gone.indexOf(",actions=")),
      ]);
      // f1's port taken off the bridge by hand.
      const f1Port = (await agentState(n1)).find((s) => s.portId === portId(f1))!;
      await run([
        "ovs-vsctl",
        `--db=unix:${n1.sim.ovs.dbSock}`,
        "del-port",
        "br-int",
        f1Port.hostIfName,
      ]);
      // v1's port released at the manager behind the agent's back; a port bound to n1 by hand.
      const del = await stack.api("DELETE", `tenants/acme/networks/storage/ports/${portId(v1)}`);
      assert.equal(del.status, 204, JSON.stringify(del.body));
      const put = await stack.api("PUT", "tenants/acme/networks/blue/ports/ghost-1", {
        node: "n1",
      });
      assert.equal(put.status, 201, JSON.stringify(put.body));

      const r = await ctl(["verify", "node", "n1"]);
      expectExit(r, 1, "verify with drift");
      assert.match(r.stdout, new RegExp(`\\+ ${escape(gone)} +\\(computed, not on the bridge\\)`));
      assert.match(
        r.stdout,
        new RegExp(
          `${f1Port.hostIfName} \\(port ${
            portId(f1)
          }, ofport \\d+\\) is in the agent's state but not on br-int`,
        ),
      );
      assert.match(
        r.stdout,
        new RegExp(
          `acme/storage/${
            portId(v1)
          } \\(\\S+\\) is in the agent's state, but the manager has no such port bound to n1`,
        ),
      );
      assert.match(
        r.stdout,
        /acme\/blue\/ghost-1 \(10\.10\.0\.\d+\) is bound to n1 at the manager, but the agent has no state of it/,
      );
      assert.match(r.stdout, /node n1: 4 differences/);
      const j = (await ctl(["verify", "node", "n1", "-o", "json"])).json() as VerifyReport;
      assert.deepEqual(j.flows.missing, [gone]);
      assert.deepEqual(j.flows.extra, []);
      assert.deepEqual(j.ports.missing.map((p) => p.hostIfName), [f1Port.hostIfName]);
      assert.deepEqual(j.ports.extra, []);
      assert.deepEqual(j.manager.stateOnly.map((s) => s.portId), [portId(v1)]);
      assert.deepEqual(j.manager.managerOnly.map((p) => p.id), ["ghost-1"]);
      expectExit(await ctl(["verify", "node", "n2"]), 0, "n2 is untouched");
    },
  );

  await t.step(
    "verify: a service's select group changed by hand is listed, its computed line and the hand's",
    async () => {
      const made = await stack.api("POST", "tenants/acme/services", {
        name: "front",
        network: "blue",
        ports: [{ protocol: "TCP", port: 80, targetPort: 8080 }],
        backends: [portId(b2)],
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const ovs = new Ovs(n1.sim.ovs);
      const bucket = `nat(dst=${b2.ip}:8080)`;
      let computed: string | undefined;
      for (let i = 0; i < 100 && !computed; i++) {
        computed = [...(await ovs.dumpGroups("br-int")).values()].find((g) => g.includes(bucket));
        if (!computed) await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(computed, `n1 has the service's group with ${bucket}`);
      // The bucket pointed elsewhere by hand: a backend nobody asked for.
      const tampered = computed.replace(bucket, "nat(dst=10.10.0.99:8080)");
      await ovs.bundle("br-int", [], [], { groups: { add: [], modify: [tampered], del: [] } });
      const j = (await ctl(["verify", "node", "n1", "-o", "json"])).json() as VerifyReport;
      assert.ok(j.flows.missing.includes(computed), JSON.stringify(j.flows));
      assert.ok(j.flows.extra.includes(tampered), JSON.stringify(j.flows));
    },
  );

  for (const p of [b1, b2, g2, v2, f2]) assert.equal((await p.pod.del()).code, 0);
});

/** What must agree between a live and an offline trace (node-local numbers aside). */
function shape(r: TraceReport) {
  return r.hops.map((h) => ({
    node: h.node,
    ingress: h.ingress.replace(/ofport \d+/, "ofport N"),
    steps: h.steps.map((s) => ({ table: s.table, priority: s.priority, kind: s.kind })),
    outcomes: h.outcomes.map((o) => ({
      ...o,
      ...("ofport" in o ? { ofport: 0 } : {}),
    })),
  }));
}

function kinds(h: TraceReport["hops"][number]): string[] {
  return h.steps.map((s) => s.kind);
}

function portId(a: Added): string {
  return a.portId;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The agent's state entries, from its own answer (GET /v1/verify on its socket). */
async function agentState(node: StackNode): Promise<{ portId: string; hostIfName: string }[]> {
  const client = Deno.createHttpClient({ proxy: { transport: "unix", path: node.agentSocket } });
  try {
    const r = await fetch("http://agent/v1/verify", { client });
    assert.equal(r.status, 200);
    return (await r.json()).state;
  } finally {
    client.close();
  }
}

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function addedPod(
  stack: Stack,
  node: StackNode,
  name: string,
  tenant: string,
  networks: (string | Record<string, unknown>)[],
): Promise<Added> {
  const pod = await makePod(node, name, tenant, knitterList(networks));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const mac = r.out.interfaces.find((i: { sandbox?: string }) => i.sandbox).mac;
  const ports = (await stack.api("GET", "ports")).body.items as {
    id: string;
    pod?: { name: string };
  }[];
  const port = ports.find((p) => p.pod?.name === name);
  assert.ok(port, `the manager has ${name}'s port`);
  return { pod, ip: addressOf(r.out), mac, portId: port.id };
}
