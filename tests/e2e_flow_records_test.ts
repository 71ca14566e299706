/**
 * Flow records end to end (issue 30) on real Open vSwitch (userspace datapath): a simulated node
 * whose agent has flow records on, every packet sampled. A TCP stream and UDP datagrams of known
 * sizes between two pods, and a TCP connection a security group refuses, while `knitctl flows
 * collect` listens on the node: its records have the right tuples, byte counts within the
 * headers' share, the tenant, network and pod names, allow for what passed and deny for what the
 * group dropped, also for a connection from a pod on another node. OVS's collector set is the
 * agent's, and goes when flow records are turned off.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { Ovs } from "../agent/dataplane/ovs.ts";
import type { FlowRecord } from "../agent/flow_records/record_template.ts";
import {
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  type Pod,
  podBook,
} from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { tcpExchange, udpExchange } from "./support/traffic.ts";

const COLLECTOR = 24739;
const WEB = 8080;
const DNS = 5353;
const CLOSED = 9090;
const TCP_BYTES = 200_000;
const UDP_SIZES = [100, 1200];
/** Per packet: an IPv4 header (20) and a TCP header with its options (20 to 40). */
const TCP_HEADERS = { min: 40, max: 60 };
/** The share of the payload that may have been sent twice (retransmissions, in records too). */
const RETRANSMITTED = 0.05;
/** An IPv4 and a UDP header. */
const UDP_HEADERS = 28;
/** How long the collector listens: the traffic, then the agent's idle timeout and OVS's cache. */
const LISTEN_SECONDS = 40;

Deno.test("e2e flow records: TCP and UDP flows between pods reach knitctl's collector with tuples, bytes, names and the security group decision", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    agent: {
      flowRecords: { collectors: [`127.0.0.1:${COLLECTOR}`], idleTimeout: 2, activeTimeout: 60 },
    },
  });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "app", "10.70.0.0/24");
  await api(stack, "POST", "tenants/acme/security-groups", {
    name: "srv",
    rules: [
      { direction: "ingress", protocol: "tcp", ports: String(WEB) },
      { direction: "ingress", protocol: "udp", ports: String(DNS) },
    ],
  }, 201);
  const book = podBook();
  const pod = async (name: string, node = n1) => {
    const p = await makePod(node, name, "acme", knitterList(["app"]));
    await book.add(p);
    return p;
  };
  const client = await pod("client");
  const server = await pod("server");
  // On the other node: what it sends reaches n1 through the tunnel.
  const remote = await pod("remote", n2);
  await setGroups(stack, server, ["srv"]);
  await waitFor("n1: the server's ingress rule", async () => {
    const lines = await new Ovs(n1.sim.ovs).dumpFlows("br-int", "table=51");
    return lines.some((l) => l.includes(`tp_dst=${WEB}`));
  }, 15_000);
  const ip = book.ips;

  await t.step("the agent's collector set is on br-int, and the pods' flows sample", async () => {
    const sets = await vsctl(n1, ["--bare", "--columns=id", "list", "Flow_Sample_Collector_Set"]);
    assert.equal(sets.trim(), "1");
    const classify = await new Ovs(n1.sim.ovs).dumpFlows("br-int", "table=0");
    assert.ok(
      classify.some((l) => l.includes("actions=sample(probability=65535,collector_set_id=1")),
    );
  });

  const collector = collect(n1);
  // Awaited below; a failure before then is that await's.
  collector.catch(() => {});
  const tcp = await tcpExchange(cleanup, client.netns, server.netns, ip.server, TCP_BYTES, {
    port: WEB,
  });
  const udp = await udpExchange(cleanup, client.netns, server.netns, ip.server, UDP_SIZES, {
    port: DNS,
  });
  const refused = await tcpExchange(cleanup, client.netns, server.netns, ip.server, 1000, {
    port: CLOSED,
    seconds: 3,
  });
  const refusedRemote = await tcpExchange(cleanup, remote.netns, server.netns, ip.server, 1000, {
    port: CLOSED,
    seconds: 3,
  });
  assert.ok(!refusedRemote.ok, "also from the other node");
  assert.ok(tcp.ok && udp.ok, `the allowed traffic passes: ${JSON.stringify({ tcp, udp })}`);
  assert.ok(!refused.ok, "the security group refuses port 9090");
  const records = await collector;

  const of = (src: string, dst: string, protocol: number, port: number) => {
    const rs = records.filter((r) =>
      r.src === src && r.dst === dst && r.protocol === protocol &&
      (r.dstPort === port || r.srcPort === port)
    );
    assert.ok(rs.length > 0, `records of ${src} -> ${dst} ${protocol}/${port}: ${show(records)}`);
    return {
      records: rs,
      bytes: rs.reduce((n, r) => n + r.bytes, 0),
      packets: rs.reduce((n, r) => n + r.packets, 0),
    };
  };

  await t.step("TCP: both directions, the payload and the headers of each packet, named", () => {
    for (const [from, to] of [[client, server], [server, client]]) {
      const f = of(ip[from.name], ip[to.name], 6, WEB);
      const headers = f.bytes - TCP_BYTES;
      // Every payload byte at least once; a segment sent again (a loaded machine drops some)
      // is traffic too, so at most a few percent more than the payload and its headers.
      assert.ok(
        headers >= TCP_HEADERS.min * f.packets &&
          headers <= TCP_HEADERS.max * f.packets + RETRANSMITTED * TCP_BYTES,
        `${from.name} -> ${to.name}: ${f.bytes} bytes in ${f.packets} packets for ${TCP_BYTES}`,
      );
      for (const r of f.records) {
        assert.deepEqual(
          [r.tenant, r.network, r.srcPod, r.dstPod, r.decision, r.node],
          ["acme", "app", `acme/${from.name}`, `acme/${to.name}`, "allow", n1.name],
        );
        assert.ok(r.start <= r.end, "first packet before the last");
      }
    }
  });

  await t.step("UDP: each datagram and its echo, exactly with their headers", () => {
    for (const [from, to] of [[client, server], [server, client]]) {
      const f = of(ip[from.name], ip[to.name], 17, DNS);
      assert.equal(f.packets, UDP_SIZES.length);
      assert.equal(f.bytes, UDP_SIZES.reduce((n, s) => n + s + UDP_HEADERS, 0));
      assert.deepEqual(
        [f.records[0].srcPod, f.records[0].dstPod, f.records[0].decision],
        [`acme/${from.name}`, `acme/${to.name}`, "allow"],
      );
    }
  });

  await t.step("the refused connection is recorded as denied, with its pods", () => {
    const f = of(ip.client, ip.server, 6, CLOSED);
    assert.ok(f.packets >= 1);
    for (const r of f.records) {
      assert.deepEqual(
        [r.tenant, r.network, r.srcPod, r.dstPod, r.decision],
        ["acme", "app", "acme/client", "acme/server", "deny"],
      );
    }
    assert.ok(
      !records.some((r) => r.src === ip.server && r.srcPort === CLOSED),
      "the server never answered on 9090",
    );
  });

  await t.step(
    "a connection from another node, refused here, is recorded here: the server by its MAC, the sender by the manager's view",
    () => {
      const f = of(ip.remote, ip.server, 6, CLOSED);
      assert.ok(f.packets >= 1);
      for (const r of f.records) {
        assert.deepEqual(
          [r.tenant, r.network, r.srcPod, r.dstPod, r.decision, r.node],
          ["acme", "app", "acme/remote", "acme/server", "deny", n1.name],
        );
      }
    },
  );

  await t.step(
    "flow records off: the agent removes its collector set and the sample actions",
    async () => {
      await n1.stopAgent();
      const config = JSON.parse(await Deno.readTextFile(n1.agentConfig));
      delete config.flowRecords;
      await Deno.writeTextFile(n1.agentConfig, JSON.stringify(config));
      await n1.startAgent();
      await waitFor("n1: no sample action", async () => {
        const lines = await new Ovs(n1.sim.ovs).dumpFlows("br-int");
        return !lines.some((l) => l.includes("sample("));
      }, 15_000);
      assert.equal(
        (await vsctl(n1, ["--bare", "--columns=id", "list", "Flow_Sample_Collector_Set"])).trim(),
        "",
      );
    },
  );
});

/** `knitctl flows collect` inside the node's netns (where the agent sends), its records. */
async function collect(node: StackNode): Promise<FlowRecord[]> {
  const r = await run([
    "ip",
    "netns",
    "exec",
    node.sim.netns,
    Deno.execPath(),
    "run",
    "--quiet",
    "--allow-net",
    "--allow-read",
    "--allow-env",
    new URL("../knitctl/main.ts", import.meta.url).pathname,
    "flows",
    "collect",
    "--listen",
    `127.0.0.1:${COLLECTOR}`,
    "--seconds",
    String(LISTEN_SECONDS),
    "-o",
    "json",
  ]);
  const out = JSON.parse(r.stdout);
  assert.equal(out.malformed, 0, "every message readable");
  return out.records;
}

async function setGroups(stack: Stack, pod: Pod, groups: string[]): Promise<void> {
  const ports = await api(stack, "GET", `ports?pod=acme/${pod.name}`, undefined, 200);
  await api(
    stack,
    "PUT",
    `tenants/acme/networks/app/ports/${ports.items[0].id}`,
    { securityGroups: groups },
    200,
  );
}

function vsctl(node: StackNode, args: string[]): Promise<string> {
  return new Ovs(node.sim.ovs).vsctl(args);
}

function show(records: FlowRecord[]): string {
  return JSON.stringify(
    records.map((r) => `${r.src}:${r.srcPort}>${r.dst}:${r.dstPort}/${r.protocol}`),
  );
}
