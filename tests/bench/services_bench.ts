/**
 * What a service costs (issue 28): connections per second and iperf3 throughput from a client pod
 * through a service's VIP against straight to its backend's address, in alternating rounds of the
 * same run (the client on one node, the backend on the other, a VXLAN network); how long a backend
 * change takes from the manager's answer to the groups of every node; and the flows and groups a
 * service and a backend add to a node's compile.
 *
 *   deno run -A tests/bench/services_bench.ts [--rounds N]     (as root)
 */
import { run } from "@knitter/common";
import { compileFlows, splitGroups } from "@knitter/wasm";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type StackNode, startStack, waitFor } from "../../devstack/stack.ts";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import { ipNetnsName, knitterList, makePod, type Pod, podBook } from "../support/pods.ts";
import { inNetns, startReady } from "../support/traffic.ts";
import { iperfRate } from "../support/iperf.ts";
import { api } from "../support/stack_api.ts";
import { scenarios } from "../../wasm/testdata/scenarios.ts";

const PEER = new URL("../support/service_peer.ts", import.meta.url).pathname;
const rounds = Number(Deno.args[Deno.args.indexOf("--rounds") + 1]) || 3;
const CONNECTIONS = 300;
const PORT = 8080;
const IPERF_PORT = 5201;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ns = (p: Pod) => ipNetnsName(p.netns);

/** Connections per second of `n` sequential connections from `client` to addr:port. */
async function connectionsPerSecond(client: Pod, addr: string, port: number): Promise<number> {
  const r = await run(
    [...inNetns(ns(client)), Deno.execPath(), "run", "--quiet", "--allow-net", PEER, "count"]
      .concat([addr, String(port), String(CONNECTIONS)]),
    { check: false },
  );
  const out = JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}");
  if (out.failures !== 0) throw new Error(`connections to ${addr}:${port} failed: ${r.stdout}`);
  return CONNECTIONS / (out.ms / 1000);
}

/** The flows and groups one service, and each backend more, add to the golden model services. */
function flowCounts() {
  const base = scenarios.services;
  const count = (services: typeof base.services) => {
    const { flows, groups } = splitGroups(compileFlows({ ...base, services }));
    return { flows: flows.length, groups: groups.length };
  };
  const web = base.services![0];
  const none = count([]);
  const one = (backends: string[]) => count([{ ...web, ports: [web.ports[0]], backends }]);
  const b0 = one([]);
  const b1 = one(["10.0.0.3"]);
  const b2 = one(["10.0.0.3", "10.0.0.4"]);
  return {
    serviceNoBackend: b0.flows - none.flows,
    firstBackend: b1.flows - b0.flows,
    nextBackend: b2.flows - b1.flows,
    groupsPerPort: b1.groups,
  };
}

async function main() {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "tenants", { name: "acme" }, 201);
  await api(stack, "POST", "tenants/acme/networks", {
    name: "data",
    cidr: "10.80.0.0/24",
    gateway: "10.80.0.1",
  }, 201);
  const book = podBook();
  const pod = async (node: StackNode, name: string) => {
    const p = await makePod(node, name, "acme", knitterList(["data"]));
    await book.add(p);
    return p;
  };
  const client = await pod(n1, "client");
  const backend = await pod(n2, "backend");
  const spare = await pod(n1, "spare");
  const server = await startReady(
    cleanup,
    ns(backend),
    [PEER, "serve", String(PORT), "b", "3600"],
    {
      what: "backend",
    },
  );
  cleanup.defer(() => server.stop());
  const idOf = async (p: Pod) =>
    (await api(stack, "GET", `ports?pod=acme/${p.name}`, undefined, 200)).items[0].id;
  const [backendId, spareId] = [await idOf(backend), await idOf(spare)];
  const ports = [
    { protocol: "TCP", port: PORT, targetPort: PORT },
    { protocol: "TCP", port: IPERF_PORT, targetPort: IPERF_PORT },
  ];
  const svc = await api(stack, "POST", "tenants/acme/services", {
    name: "front",
    network: "data",
    ports,
    backends: [backendId],
  }, 201);
  const groupsOf = async (node: StackNode) =>
    [...(await new Ovs(node.sim.ovs).dumpGroups("br-int")).values()].join("\n");
  await waitFor("groups on n1", async () => (await groupsOf(n1)).includes("nat(dst="), 15_000);

  const cps = { direct: [] as number[], vip: [] as number[] };
  const bps = { direct: [] as number[], vip: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    cps.direct.push(await connectionsPerSecond(client, book.ips.backend, PORT));
    cps.vip.push(await connectionsPerSecond(client, svc.vip, PORT));
    const stream = { from: ns(client), to: ns(backend), addr: book.ips.backend };
    bps.direct.push(await iperfRate(cleanup, stream, 5, { port: IPERF_PORT }));
    bps.vip.push(await iperfRate(cleanup, stream, 5, { port: IPERF_PORT, via: svc.vip }));
  }

  // Convergence: a backend added, then taken away, until every node's groups say so.
  const converge: number[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const backends of [[backendId, spareId], [backendId]]) {
      const started = performance.now();
      await api(stack, "PUT", "tenants/acme/services/front", { ports, backends }, 200);
      const want = backends.length;
      for (const node of [n1, n2]) {
        await waitFor(`${node.name}: ${want} buckets`, async () => {
          const g = (await groupsOf(node)).split("\n")[0] ?? "";
          return (g.match(/bucket=/g) ?? []).length === want;
        }, 15_000);
      }
      converge.push(performance.now() - started);
    }
  }
  const flows = flowCounts();
  const f = (x: number) => x.toFixed(0);
  console.log(JSON.stringify({ cps, bps, converge, flows }));
  console.log(`rounds: ${rounds}, ${CONNECTIONS} sequential connections per figure`);
  console.log(
    `connections/s  direct ${f(median(cps.direct))} (${cps.direct.map(f).join(", ")})  ` +
      `VIP ${f(median(cps.vip))} (${cps.vip.map(f).join(", ")})  ratio ${
        (median(cps.vip) / median(cps.direct)).toFixed(2)
      }`,
  );
  const g = (x: number) => (x / 1e9).toFixed(2);
  console.log(
    `Gbit/s         direct ${g(median(bps.direct))} (${bps.direct.map(g).join(", ")})  ` +
      `VIP ${g(median(bps.vip))} (${bps.vip.map(g).join(", ")})  ratio ${
        (median(bps.vip) / median(bps.direct)).toFixed(2)
      }`,
  );
  console.log(
    `backend change to every node's groups: median ${f(median(converge))} ms (${
      converge.map(f).join(", ")
    })`,
  );
  console.log(`flows: ${JSON.stringify(flows)}`);
}

if (import.meta.main) await main();
