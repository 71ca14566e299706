/**
 * Port mirroring end to end (issue 30) on real Open vSwitch (userspace datapath), two simulated
 * nodes: a TCP stream between a pod on n1 and a pod on n2, mirrored from n1's pod to a collector
 * pod on n1, is found byte for byte in a pcap taken in the collector pod, both directions; again
 * after an agent restart (its Mirror row removed by hand meanwhile: the agent puts it back) and an
 * ovs-vswitchd restart (killed by pid); the row goes with the mirror, and with its source pod; and
 * at a remote collector on the underlay, inside GRE, ERSPAN (type II, the admin's session ID) and
 * VXLAN (its VNI), the ERSPAN tunnel port made again by a restarted agent. `knitctl capture
 * --mirror` takes the copies at the collector (byte for byte) and, an admin's, the tunnel packets
 * on the source's node; another tenant's token is refused.
 */
import assert from "node:assert/strict";
import { Ovs } from "../agent/dataplane/ovs.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { startVswitchd, stopVswitchd } from "../devstack/sim_node.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import { mirrorRows, streamSeen as seenAt, type Tap } from "./support/mirror_stream.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  type Pod,
} from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { EXTERNAL, externalHost } from "./support/external_host.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { expectExit, type KnitctlRun } from "../knitctl/test_support.ts";
import { run } from "@knitter/common";
import { contains, tcpPayload } from "./support/pcap.ts";

const PORT = 24680;
const ACME = `acme-${crypto.randomUUID()}`;
const GLOBEX = `globex-${crypto.randomUUID()}`;

Deno.test("e2e mirror: a pod's TCP stream is seen byte for byte in the collector pod, through agent and ovs-vswitchd restarts; the row goes with the mirror", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    tokens: [
      { token: ACME, scope: "tenant", tenant: "acme" },
      { token: GLOBEX, scope: "tenant", tenant: "globex" },
    ],
  });
  const [n1, n2] = stack.nodes;
  const ctl = await knitctlOn(stack);
  const dir = await cleanup.tempDir();
  /** `knitctl capture --mirror` (as acme), while streams go until it is done: the pcap's bytes. */
  const captureMirror = async (node: string, name: string, filter: string, token = ACME) => {
    const file = `${dir}/${name}-${node}.pcap`;
    let done: KnitctlRun | undefined;
    const capturing = ctl([
      ...["--token", token, "-t", "acme", "capture", "--node", node, "--mirror", name],
      ...["-c", "10000", "--seconds", "5", ...(filter ? ["--filter", filter] : []), "-w", file],
    ]).then((r) => done = r);
    try {
      while (!done) await streamSeen(false);
    } finally {
      await capturing;
    }
    expectExit(done!, 0, `capture of mirror ${name} on ${node}`);
    assert.match(done!.stdout, new RegExp(`packets of mirror acme/${name} written to ${file}`));
    const r = await run(["tcpdump", "-nn", "-r", file], { check: false });
    assert.equal(r.code, 0, `tcpdump -r opens it: ${r.stderr}`);
    return { bytes: await Deno.readFile(file), lines: r.stdout.trim().split("\n") };
  };
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "data", "10.50.0.0/24");
  await createNetwork(stack, "acme", "taps", "10.51.0.0/24");
  const ips: Record<string, string> = {};
  const add = async (pod: Pod) => {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  };
  const client = await makePod(n1, "client", "acme", knitterList(["data"]));
  const server = await makePod(n2, "server", "acme", knitterList(["data"]));
  const collector = await makePod(n1, "collector", "acme", knitterList(["taps"]));
  for (const pod of [client, server, collector]) await add(pod);
  const portOf = async (pod: Pod) =>
    (await api(stack, "GET", `ports?pod=acme/${pod.name}`, undefined, 200)).items[0].id as string;
  const mirror = {
    name: "watch",
    sources: [{ network: "data", port: await portOf(client) }],
    direction: "both",
    collector: { network: "taps", port: await portOf(collector) },
  };
  const payload = crypto.getRandomValues(new Uint8Array(60_000));
  const payloadFile = await Deno.makeTempFile();
  cleanup.defer(() => Deno.remove(payloadFile));
  await Deno.writeFile(payloadFile, payload);

  /** Where the copies are looked for: the collector pod's interface, or a tunnel's end. */
  let tap: Tap = { netns: collector.netns, iface: "eth0", filter: `tcp port ${PORT}` };
  const streamSeen = (expect: boolean) =>
    seenAt(
      cleanup,
      {
        client: { netns: client.netns, ip: ips.client },
        server: { netns: server.netns, ip: ips.server },
        tap,
        port: PORT,
      },
      { file: payloadFile, length: payload.length },
      expect,
    );
  const assertSeen = async (when: string) => {
    const seen = await streamSeen(true);
    assert.equal(seen.out.length, payload.length, `${when}: all the bytes the client sent`);
    assert.deepEqual(seen.out, payload, `${when}: what the client sent, byte for byte`);
    assert.deepEqual(seen.back, payload, `${when}: its echo, what the client received`);
    return seen;
  };

  await t.step("no mirror: the collector pod sees nothing of the stream", async () => {
    const seen = await streamSeen(false);
    assert.deepEqual([seen.out.length, seen.back.length], [0, 0]);
  });

  await t.step("a mirror: the stream, both ways, byte for byte in the collector pod", async () => {
    await api(stack, "POST", "tenants/acme/mirrors", mirror);
    await waitFor("the Mirror row on n1", async () => (await mirrorRows(n1)).length === 1, 10_000);
    assert.deepEqual(await mirrorRows(n1), ["acme/watch"]);
    assert.deepEqual(await mirrorRows(n2), [], "n2 hosts neither source nor collector");
    await assertSeen("mirrored");
  });

  await t.step(
    "knitctl capture --mirror: the copies at the collector, through its node's agent; another tenant refused",
    async () => {
      const { bytes } = await captureMirror("n1", "watch", `tcp port ${PORT}`);
      const flow = { src: ips.client, dst: ips.server, dport: PORT };
      assert.deepEqual(tcpPayload(bytes, flow), payload, "what the client sent, byte for byte");
      const back = { src: ips.server, dst: ips.client, sport: PORT };
      assert.deepEqual(tcpPayload(bytes, back), payload, "its echo");
      for (const tenant of ["acme", "globex"]) {
        const file = `${dir}/stolen-${tenant}.pcap`;
        const r = expectExit(
          await ctl(["--token", GLOBEX, "-t", tenant, "capture", "--node", "n1"]
            .concat(["--mirror", "watch", "--seconds", "1", "-w", file])),
          1,
          `globex capturing acme's mirror as tenant ${tenant}`,
        );
        assert.match(r.stderr, /Capture of mirror .*\/watch refused: the manager does not show/);
        assert.match(r.stderr, /agent: 403 forbidden/);
        assert.equal(await Deno.stat(file).then(() => true, () => false), false, "no file");
      }
    },
  );

  await t.step("agent restart: the row it owns is made again, the stream seen again", async () => {
    await n1.stopAgent(true);
    // Lost while the agent was away: it must put it back from the manager's state.
    await new Ovs(n1.sim.ovs).vsctl(["clear", "Bridge", "br-int", "mirrors"]);
    assert.deepEqual(await mirrorRows(n1), []);
    await n1.startAgent();
    await waitFor(
      "the Mirror row back on n1",
      async () => (await mirrorRows(n1)).length === 1,
      10_000,
    );
    await assertSeen("after an agent restart");
  });

  await t.step("ovs-vswitchd killed by pid and started again: the stream seen again", async () => {
    await stopVswitchd(n1.sim, { kill: true });
    // Until the killed process has let its pidfile go, a new one refuses to start ("already running").
    await waitFor(
      "ovs-vswitchd started again",
      () =>
        startVswitchd(n1.sim).then(() => true, (err) => {
          if (/already running/.test(String(err?.message))) return false;
          throw err;
        }),
      10_000,
    );
    await waitFor("the flows back on n1", async () => {
      const flows = await new Ovs(n1.sim.ovs).ofctl(["dump-flows", "br-int"]).catch(() => "");
      return flows.split("\n").length > 10;
    }, 15_000);
    assert.deepEqual(await mirrorRows(n1), ["acme/watch"]);
    await assertSeen("after an ovs-vswitchd restart");
  });

  await t.step("the mirror deleted: its row goes, the collector sees nothing", async () => {
    await api(stack, "DELETE", "tenants/acme/mirrors/watch", undefined, 204);
    await waitFor("no Mirror row on n1", async () => (await mirrorRows(n1)).length === 0, 10_000);
    assert.equal((await streamSeen(false)).out.length, 0);
  });

  await t.step("the mirror follows its source pod: gone with it, back with it", async () => {
    await api(stack, "POST", "tenants/acme/mirrors", mirror);
    await waitFor("the Mirror row on n1", async () => (await mirrorRows(n1)).length === 1, 10_000);
    assert.equal((await client.del()).code, 0);
    await waitFor(
      "no Mirror row once the pod is gone",
      async () => (await mirrorRows(n1)).length === 0,
      10_000,
    );
    await add(client);
    await waitFor(
      "the Mirror row with the pod back",
      async () => (await mirrorRows(n1)).length === 1,
      10_000,
    );
    await assertSeen("the pod back");
  });

  await api(stack, "DELETE", "tenants/acme/mirrors/watch", undefined, 204);
  // A collector host on the underlay: the copies arrive in a tunnel from n2 (read inside it).
  const host = await externalHost(cleanup);
  const KEYS: Record<string, string[]> = { gre: [], erspan: ["erspan:7"], vxlan: ["vxlan:5001"] };
  const REMOTES = [
    { protocol: "gre", filter: "proto gre" },
    { protocol: "erspan", session: 7, filter: "proto gre" },
    { protocol: "vxlan", vni: 5001, filter: "udp dst port 4789" },
  ];
  for (const { filter, ...remote } of REMOTES) {
    await t.step(
      `a remote collector (admin) over ${remote.protocol}: from the source's node to a netns on the underlay`,
      async () => {
        tap = {
          netns: host,
          iface: "eth0",
          filter: `${filter} and src ${n2.sim.underlayIp} and dst ${EXTERNAL}`,
        };
        await api(stack, "POST", "tenants/acme/mirrors", {
          name: "far",
          sources: [{ network: "data", port: await portOf(server) }],
          direction: "both",
          collector: { remote: { ip: EXTERNAL, ...remote } },
        });
        await waitFor(
          "the Mirror row on n2",
          async () => (await mirrorRows(n2)).length === 1,
          10_000,
        );
        assert.deepEqual(await mirrorRows(n1), [], "n1 hosts no source of it");
        // Open vSwitch resolves the collector's MAC (ARP) on the first copy it sends: copies flow
        // once it has.
        await waitFor(
          "copies through the tunnel",
          async () => (await streamSeen(false)).out.length > 0,
          15_000,
        );
        const { keys } = await assertSeen(`over ${remote.protocol}`);
        // The admin's ERSPAN session and VXLAN VNI are in the tunnel headers (GRE has no key).
        assert.deepEqual(keys, KEYS[remote.protocol]);
        if (remote.protocol === "erspan") {
          // The agent away, its tunnel port removed by hand: the agent makes it again.
          await n2.stopAgent(true);
          const ovs = new Ovs(n2.sim.ovs);
          const tunnel = (await ovs.vsctl(["list-ports", "br-int"])).split("\n")
            .find((p) => p.startsWith("kmir-"));
          assert.ok(tunnel, "the mirror's tunnel port on n2");
          await ovs.vsctl(["del-port", "br-int", tunnel]);
          await n2.startAgent();
          await waitFor(
            "the tunnel port back on n2",
            async () => (await ovs.vsctl(["list-ports", "br-int"])).includes(tunnel),
            10_000,
          );
          assert.deepEqual((await assertSeen("after an agent restart")).keys, ["erspan:7"]);
        }
        // Its capture on the source's node: the tunnel packets to the collector, the stream inside.
        // An admin's: the tunnel carries every mirror's copies to that collector.
        const { bytes, lines } = await captureMirror("n2", "far", "", stack.adminToken);
        // The outer packets' lines (tcpdump prints a VXLAN packet's inner frame on a line of its own).
        const outer = lines.filter((l) => /^\d/.test(l));
        assert.ok(outer.length > 0 && outer.every((l) => l.includes(`> ${EXTERNAL}`)), outer[0]);
        assert.ok(contains(bytes, payload.subarray(0, 1000)), "the stream's bytes inside");
        const away = await ctl(["-t", "acme", "capture", "--node", "n1", "--mirror", "far"]
          .concat(["--seconds", "1", "-w", `${dir}/away.pcap`]));
        expectExit(away, 1, "n1 sends no copies of far");
        assert.match(away.stderr, /no source port of it is on n1/);
        await api(stack, "DELETE", "tenants/acme/mirrors/far", undefined, 204);
        await waitFor(
          "no Mirror row on n2",
          async () => (await mirrorRows(n2)).length === 0,
          10_000,
        );
        const ports = await new Ovs(n2.sim.ovs).vsctl(["list-ports", "br-int"]);
        assert.ok(!ports.includes("kmir-"), `the tunnel port went with the mirror: ${ports}`);
        assert.equal((await streamSeen(false)).out.length, 0);
      },
    );
  }
});
