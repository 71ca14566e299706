/**
 * What security groups cost (issue 17): flows per port and compile time of a node with 1,000 ports
 * in 100 groups, against the same node without groups; the ADD of a pod whose network has default
 * groups against one whose network has none (the real plugin against a one-node stack, alternating
 * rounds); and iperf3 throughput between two pods with groups against two without, on one node.
 *
 *   deno run -A tests/bench/security_groups_bench.ts [--quick]     (as root; also part of bench:cni)
 *   deno run -A tests/bench/security_groups_bench.ts --compile     (flows and compile only, both engines)
 */
import type { Port, SecurityGroup } from "@knitter/common";
import { compileFlows, compileFlowsTs, type FlowInput } from "@knitter/wasm";
import { aclsOf } from "../../agent/dataplane/acl_model.ts";
import { Cleanup } from "../../devstack/cleanup.ts";
import type { Stack } from "../../devstack/stack.ts";
import { ipNetnsName, knitterList, makePod, type Pod, podBook } from "../support/pods.ts";
import { iperfRate } from "../support/iperf.ts";
import { knitterJobs, knitterSubject, latency, type LatencyFigures } from "./cni_bench.ts";
import type { DriverRun } from "./driver.ts";
import { pairedRounds } from "./bandwidth_bench.ts";
import { nodeModel } from "./flows_figures.ts";
import { log, median } from "./support.ts";

export interface PolicyCompileFigures {
  localPorts: number;
  groups: number;
  /** Flows of the node without groups, and with every local port in a group. */
  flowsWithout: number;
  flowsWith: number;
  /** Medians over the runs, milliseconds: the compile without and with, and the agent's resolution. */
  compileWithoutMs: number;
  compileWithMs: number;
  resolveMs: number;
  runs: number;
}

/** Each group's rules: a peer group, a CIDR with a port range, a network, any address. */
function groupRules(name: string): SecurityGroup["rules"] {
  return [
    { direction: "ingress", protocol: "tcp", ports: "80", peer: { group: name } },
    { direction: "ingress", protocol: "tcp", ports: "8000-8100", peer: { cidr: "10.0.0.0/8" } },
    { direction: "ingress", protocol: "icmp", peer: { group: name } },
    { direction: "egress", protocol: "any", peer: { network: "n", cidr: "10.0.0.0/8" } },
    { direction: "egress", protocol: "udp", ports: "53" },
  ];
}

/** The node model's ports as the manager would list them, port i in group i % groups. */
function portsOf(model: FlowInput, groups: number): { locals: Port[]; remotes: Port[] } {
  const port = (id: string, network: number, ip: string, g: number): Port => ({
    id,
    tenant: "bench",
    network: `net${network}`,
    networkTenant: "bench",
    networkId: `net${network}`,
    type: "vxlan",
    ip,
    address: `${ip}/16`,
    family: 4,
    mac: "02:00:00:00:00:01",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "",
    securityGroups: [`g${g}`],
  });
  return {
    locals: model.localPorts.map((p, i) => port(`l${i}`, p.network, p.ips[0], i % groups)),
    remotes: model.remotePorts.map((p, i) => port(`r${i}`, p.network, p.ips[0], i % groups)),
  };
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

/** Flows per port and compile time, 1,000 local ports (and 1,000 remote) in 100 groups. */
export function policyCompileFigures(
  localPorts = 1000,
  groups = 100,
  runs = 9,
  compile: (input: FlowInput) => string[] = compileFlows,
): PolicyCompileFigures {
  const model = nodeModel(localPorts);
  const { locals, remotes } = portsOf(model, groups);
  const all = [...locals, ...remotes];
  const known = Array.from({ length: groups }, (_, g) => ({
    name: `g${g}`,
    tenant: "bench",
    rules: groupRules(`g${g}`),
    createdAt: "",
    updatedAt: "",
  }));
  const view = {
    securityGroup: (_t: string, n: string) => known[Number(n.slice(1))],
    ports: () => all,
    port: () => undefined,
  };
  const pairs = locals.map((port, i) => ({ port, cookie: model.localPorts[i].cookie }));
  const without: number[] = [];
  const withAcls: number[] = [];
  const resolve: number[] = [];
  let counts = [0, 0];
  // The first run warms the engines up and is not counted.
  for (let r = 0; r <= runs; r++) {
    const [plain, tPlain] = timed(() => compile(model));
    const [acls, tResolve] = timed(() => aclsOf(pairs, view));
    const [guarded, tGuarded] = timed(() => compile({ ...model, acls }));
    counts = [plain.length, guarded.length];
    if (r === 0) continue;
    without.push(tPlain);
    withAcls.push(tGuarded);
    resolve.push(tResolve);
  }
  return {
    localPorts,
    groups,
    flowsWithout: counts[0],
    flowsWith: counts[1],
    compileWithoutMs: median(without),
    compileWithMs: median(withAcls),
    resolveMs: median(resolve),
    runs,
  };
}

/** A group `pods` (TCP and ICMP from its own members, anything out) and a network `guarded` that names it. */
async function guardedNetwork(stack: Stack): Promise<void> {
  const calls: [string, string, unknown][] = [
    ["POST", "tenants/bench/security-groups", { name: "pods", rules: [] }],
    ["PUT", "tenants/bench/security-groups/pods", {
      rules: [
        { direction: "ingress", protocol: "tcp", peer: { group: "pods" } },
        { direction: "ingress", protocol: "icmp", peer: { group: "pods" } },
        { direction: "egress", protocol: "any" },
      ],
    }],
    ["POST", "tenants/bench/networks", {
      name: "guarded",
      cidr: "10.202.0.0/16",
      gateway: "10.202.0.1",
      securityGroups: ["pods"],
    }],
  ];
  for (const [method, path, body] of calls) {
    const r = await stack.api(method, path, body);
    if (r.status >= 300) {
      throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    }
  }
}

export interface PolicyAddFigures {
  pods: number;
  without: { add: LatencyFigures; del: LatencyFigures };
  guarded: { add: LatencyFigures; del: LatencyFigures };
  /** iperf3 between two pods on the node, bits per second (median of the rounds). */
  throughputWithout: number;
  throughputGuarded: number;
  throughputRounds: number;
}

/** ADD latency and throughput, policy on against off, on a one-node stack. */
export async function policyAddFigures(
  cleanup: Cleanup,
  opts: { pods: number; rounds: number; iperfRounds: number; seconds: number },
): Promise<PolicyAddFigures> {
  const per = Math.ceil(opts.pods / opts.rounds);
  log(`security groups: a one-node knitter stack, ${per} pods, ${opts.rounds} rounds on and off`);
  const [plain, stack] = await knitterSubject(cleanup, per);
  await guardedNetwork(stack);
  const job = knitterJobs(stack.nodes[0].agentSocket, plain.pods, { networks: ["guarded"] });
  const guarded = {
    add: (phase: string, i: number) => job("ADD", phase, i),
    del: (phase: string, i: number, added: DriverRun) =>
      job("DEL", phase, i, JSON.parse(added.stdout)),
  };
  const runs = await pairedRounds(plain, guarded, { per, rounds: opts.rounds, tag: "sg" });

  log("security groups: iperf3 between two pods, with groups and without");
  const node = stack.nodes[0];
  const book = podBook();
  const pods: Pod[] = [];
  for (
    const [name, net] of [["ta1", "net"], ["ta2", "net"], ["tg1", "guarded"], ["tg2", "guarded"]]
  ) {
    const pod = await makePod(node, name, "bench", knitterList([net]));
    await book.add(pod);
    pods.push(pod);
  }
  const stream = (a: number, b: number) => ({
    from: ipNetnsName(pods[a].netns),
    to: ipNetnsName(pods[b].netns),
    addr: book.ips[pods[b].name],
  });
  const rates = { without: [] as number[], guarded: [] as number[] };
  for (let r = 0; r < opts.iperfRounds; r++) {
    const order = r % 2 === 0 ? ["without", "guarded"] as const : ["guarded", "without"] as const;
    for (const which of order) {
      const s = which === "without" ? stream(0, 1) : stream(2, 3);
      rates[which].push(await iperfRate(cleanup, s, opts.seconds));
    }
  }
  return {
    pods: per * opts.rounds,
    without: { add: latency(runs.without.add), del: latency(runs.without.del) },
    guarded: { add: latency(runs.other.add), del: latency(runs.other.del) },
    throughputWithout: median(rates.without),
    throughputGuarded: median(rates.guarded),
    throughputRounds: opts.iperfRounds,
  };
}

/** The figures as rows of docs/benchmarks.md's table. */
export function policyMarkdown(c: PolicyCompileFigures, a?: PolicyAddFigures): string {
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const per = (n: number) => (n / c.localPorts).toFixed(2);
  const lat = (l: LatencyFigures) => `p50 ${ms(l.p50)}, p99 ${ms(l.p99)}`;
  const gbit = (bps: number) => `${(bps / 1e9).toFixed(2)} Gbit/s`;
  const rows = [
    `| flows per local port, ${c.localPorts} local + ${c.localPorts} remote ports, every local port in one of ${c.groups} groups (5 rules each) | **${
      per(c.flowsWith)
    }** (${c.flowsWith.toLocaleString("en-US")} flows) | without groups: ${per(c.flowsWithout)} (${
      c.flowsWithout.toLocaleString("en-US")
    }) |`,
    `| compile of that node (compileFlows), median of ${c.runs} | **${ms(c.compileWithMs)}** (+ ${
      ms(c.resolveMs)
    } resolving the groups, aclsOf) | without groups: ${ms(c.compileWithoutMs)} |`,
  ];
  if (a) {
    rows.push(
      `| knitter pod ADD, network with default groups, ${a.pods} pods | **${
        lat(a.guarded.add)
      }** (${a.guarded.add.p50 >= a.without.add.p50 ? "+" : ""}${
        ms(a.guarded.add.p50 - a.without.add.p50)
      } p50) | without groups, same run: ${lat(a.without.add)} |`,
      `| knitter pod DEL of those pods | ${lat(a.guarded.del)} | without groups: ${
        lat(a.without.del)
      } |`,
      `| iperf3 TCP between two pods on one node, median of ${a.throughputRounds} | **${
        gbit(a.throughputGuarded)
      }** with groups | without groups: ${gbit(a.throughputWithout)} |`,
    );
  }
  return rows.join("\n");
}

/**
 * Flows per port and compile time with groups of 20 (ports / 10 groups) at 1,000 and 10,000 local
 * ports, in both engines (WASM, and the same source as JavaScript): docs/benchmarks.md's table.
 */
export function conjunctionMarkdown(runs = 9): string {
  const rows = [
    "| local + remote ports, groups of 20 | engine | flows per local port with groups | without | ratio | compile with groups, median of " +
    `${runs} | without |`,
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  for (const ports of [1000, 10000]) {
    for (const [name, engine] of [["WASM", compileFlows], ["JS build", compileFlowsTs]] as const) {
      const c = policyCompileFigures(ports, ports / 10, runs, engine);
      rows.push(
        `| ${ports.toLocaleString("en-US")} + ${ports.toLocaleString("en-US")} | ${name} | **${
          (c.flowsWith / ports).toFixed(2)
        }** (${c.flowsWith.toLocaleString("en-US")}) | ${(c.flowsWithout / ports).toFixed(2)} | ${
          (c.flowsWith / c.flowsWithout).toFixed(2)
        }× | **${ms(c.compileWithMs)}** (+ ${ms(c.resolveMs)} aclsOf) | ${
          ms(c.compileWithoutMs)
        } |`,
      );
    }
  }
  return rows.join("\n");
}

if (import.meta.main && Deno.args.includes("--compile")) {
  console.log(conjunctionMarkdown());
} else if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const compile = policyCompileFigures();
  await using cleanup = new Cleanup();
  const add = await policyAddFigures(cleanup, {
    pods: quick ? 20 : 60,
    rounds: quick ? 2 : 6,
    iperfRounds: quick ? 2 : 6,
    seconds: quick ? 3 : 5,
  });
  console.log(policyMarkdown(compile, add));
}
