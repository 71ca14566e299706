/**
 * Runs the manager's benchmarks and prints their figures as Markdown for docs/benchmarks.md, with the
 * date, the machine and the yardstick measured in the same run.
 *
 *   deno task bench [--quick]
 */
import { bitmapFigures } from "./bitmap_bench.ts";
import { clusterFeedFigures, clusterFeedTable } from "./clusters_bench.ts";
import { convergenceFigures, convergenceTable, followerProcesses } from "./convergence_bench.ts";
import { fairnessFigures, fairnessTable, VICTIM_INTERVAL_MS } from "./fairness_bench.ts";
import { guardFigures, guardTable } from "./guard_bench.ts";
import { historyFigures, historyTable } from "./history_bench.ts";
import { httpAllocations } from "./http_bench.ts";
import { ipamFigures } from "./ipam_bench.ts";
import { startupWithPorts } from "./startup_bench.ts";

const quick = Deno.args.includes("--quick");
const n = quick ? 2000 : 20000;

function machine(): string {
  let cpu = "unknown CPU";
  try {
    cpu = Deno.readTextFileSync("/proc/cpuinfo").match(/model name\s*:\s*(.*)/)?.[1] ?? cpu;
  } catch { /* not Linux */ }
  return `${navigator.hardwareConcurrency} cores, ${cpu}, Deno ${Deno.version.deno}`;
}

const f = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits });
const log = (msg: string) => console.error(`bench: ${msg}`);

const rounds = quick ? 3 : 5;
log(
  `raw Deno KV commits and in-process allocations (${rounds} alternating rounds of ${n / 4} each)`,
);
const ipam = await ipamFigures(n / 4, rounds, 16);
log(`HTTP allocations, 16 clients, ${n} requests`);
const http = await httpAllocations(16, n);
const startPorts = quick ? 10000 : 100000;
log(`start to ready with ${startPorts} ports in the store`);
const startup = await startupWithPorts(startPorts);
log("WASM bitmap against plain TypeScript");
const bitmaps = await bitmapFigures();
log("address history off and on (manager/bench/history_bench.ts)");
const history = await historyFigures(n / 5, quick ? 3 : 5, quick ? 2000 : 10000);
log("another tenant's latency, idle and under each single tenant's attack (fairness_bench.ts)");
const fairness = await fairnessFigures(quick ? 200 : 1000);
log("HTTP allocations with the slow-client protection on and off (manager/bench/guard_bench.ts)");
const guardRounds = quick ? 2 : 3;
const guard = await guardFigures(guardRounds, quick ? 2000 : 6000);
const clusterNodes = quick ? 40 : 200;
log(`5 clusters × ${clusterNodes} nodes following the feed (manager/bench/clusters_bench.ts)`);
const clusterFeed = await clusterFeedFigures({
  clusters: 5,
  nodes: clusterNodes,
  ports: quick ? 20 : 100,
});
const followerSizes = quick ? [100] : [1000, 200];
log(
  `5 clusters × ${
    followerSizes.join(", ")
  } nodes following the feed from child processes (manager/bench/convergence_bench.ts)`,
);
const convergence = [];
for (const nodes of followerSizes) {
  convergence.push(
    await convergenceFigures({
      clusters: 5,
      nodes,
      ports: quick ? 20 : 100,
      procs: followerProcesses(nodes * 5),
      guard: true,
    }),
  );
}

console.log(`### Manager (${new Date().toISOString().slice(0, 10)}; ${machine()})

| what | figure | yardstick / goal |
|---|---|---|
| raw Deno KV \`atomic().check().set().commit()\`, sequential, file | ${
  f(ipam.rawSequential)
} commits/s | yardstick |
| port allocation in process (service layer), sequential, file | ${
  f(ipam.allocSequential)
} allocations/s = **${
  f((ipam.allocSequential / ipam.rawSequential) * 100)
} %** of raw | goal ≥ 60 % |
| raw Deno KV commits, 16 concurrent callers | ${f(ipam.rawConcurrent)} commits/s | yardstick |
| port allocation in process, 16 concurrent callers, one network | ${
  f(ipam.allocConcurrent)
} allocations/s = **${
  f((ipam.allocConcurrent / ipam.rawConcurrent) * 100)
} %** of raw (group commit) | |
| port allocation over HTTP, ${http.clients} concurrent clients, one network | **${
  f(http.perSecond)
}/s**, p50 ${f(http.p50Ms, 2)} ms, p99 ${
  f(http.p99Ms, 2)
} ms, ${http.errors} errors | goal ≥ 3,000/s |
| start to ready with ${f(startup.ports)} allocated ports | **${
  f(startup.readyMs)
} ms** (first allocation done at ${f(startup.firstAllocationMs)} ms) | goal ≤ 1,000 ms |

| bitmap workload (one iteration) | WASM | TypeScript | TS time / WASM time |
|---|---|---|---|
${
  bitmaps.map((b) =>
    `| ${b.workload} | ${f(b.wasmMicros, 3)} µs | ${f(b.tsMicros, 3)} µs | ${
      f(b.tsMicros / b.wasmMicros, 2)
    }× |`
  ).join("\n")
}

#### Address history, off and on (${history.rounds} rounds of ${f(history.n)})

${historyTable(history)}

#### One manager, many clusters: the change feed

${clusterFeedTable(clusterFeed)}

#### The slow-client protection's cost (${guardRounds} rounds each, alternating)

${guardTable(guard)}

#### Convergence at thousands of followers (issue 32)

${convergenceTable(convergence)}

#### Fairness between tenants (${fairness.requests} requests of the victim per phase, one every ${VICTIM_INTERVAL_MS} ms)

${fairnessTable(fairness)}`);
