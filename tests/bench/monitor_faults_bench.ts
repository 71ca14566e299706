/**
 * The monitor under a misbehaving API server, with its default watch and reclaim settings: how
 * long after a watch breaks (cut, 410 Expired, dropped half-open with and without a change in the
 * number of pods) it hears events again, and how long after a restart it releases the ports of
 * pods deleted while it was down. N pods (each with a port in a real manager, as an agent makes
 * it) against the stand-in API server; the monitor in this process (stopped and started again for
 * the restart), the real `@kubernetes/client-node` under it.
 *
 *   deno task bench:monitor-faults [--pods N] [--rounds R] [--leaks L]
 *
 * "Hears again": a pod created right after the break has its network-status written by the
 * monitor. The stand-in sends bookmarks once a minute, as kube-apiserver does. Also: N pod
 * objects created at once, then deleted at once: how fast the monitor takes in their events (its
 * memory of pods counts them) and releases the deleted pods' ports. The monitor's memory, in a
 * process of its own, is what monitor_bench.ts measures.
 */
import { parseArgs } from "node:util";
import { createLogger } from "@knitter/common";
import { type RunningMonitor, startMonitor } from "../../monitor/monitor.ts";
import { Cleanup } from "../../devstack/cleanup.ts";
import { waitFor } from "../../devstack/stack.ts";
import { defaultMonitorConfig, monitorBenchWorld, must, pool, seconds } from "./monitor_world.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";
const { values } = parseArgs({
  args: Deno.args,
  options: { pods: { type: "string" }, rounds: { type: "string" }, leaks: { type: "string" } },
});
const N = Number(values.pods ?? 10_000);
const ROUNDS = Number(values.rounds ?? 3);
const LEAKS = Number(values.leaks ?? 100);

const log = (msg: string) => console.error(`[bench ${new Date().toISOString()}] ${msg}`);

await using cleanup = new Cleanup();
const world = await monitorBenchWorld(cleanup, { bookmarkMs: 60_000 });
const { stack, api } = world;
const config = await defaultMonitorConfig(world);
let monitor: RunningMonitor = await startMonitor(config, createLogger("monitor", "error"));
cleanup.defer(() => monitor.stop());
await monitor.ready();

// N pods and their ports.
let made = 0;
async function podWithPort(name: string): Promise<void> {
  const o = api.create("pods", {
    metadata: { name, namespace: "bench" },
    spec: { nodeName: "n1", containers: [] },
  });
  const uid = o.metadata.uid;
  must(
    await stack.api("PUT", `tenants/bench/networks/pods/ports/${uid}-eth0`, {
      pod: { namespace: "bench", name, uid },
      interface: "eth0",
      node: "n1",
    }),
    201,
  );
  made++;
}
// The pod objects at once: how fast the monitor takes in their ADDED events (its memory holds
// them all); then their ports, as agents would make them, and their network-status.
const t0 = performance.now();
const uids: string[] = [];
for (let i = 0; i < N; i++) {
  uids.push(
    api.create("pods", {
      metadata: { name: `p${i}`, namespace: "bench" },
      spec: { nodeName: "n1", containers: [] },
    }).metadata.uid,
  );
}
const createdMs = performance.now() - t0;
await waitFor("ADDED events taken in", () => Promise.resolve(monitor.stats().pods === N), 600_000);
const addedMs = performance.now() - t0;
log(`${N} ADDED events taken in after ${seconds(addedMs)}`);
await pool(N, async (i) => {
  must(
    await stack.api("PUT", `tenants/bench/networks/pods/ports/${uids[i]}-eth0`, {
      pod: { namespace: "bench", name: `p${i}`, uid: uids[i] },
      interface: "eth0",
      node: "n1",
    }),
    201,
  );
  made++;
});
await waitFor("every network-status written", () => Promise.resolve(annotated() === N), 600_000);
log(`${N} pods annotated in ${seconds(performance.now() - t0)}`);

// ---- watch breaks
const breaks: Record<string, () => void> = {
  "none (a healthy watch, for reference)": () => {},
  "cut mid-stream (the connection fails)": () => api.abortWatches(),
  "ERROR 410 Expired on the open watch, history compacted": () => api.expireWatches(),
  "dropped half-open; a pod added (the count probe sees it)": () => api.dropWatches(),
  "dropped half-open; a pod deleted and one added (same count: the deadline)": () => {
    api.dropWatches();
    api.delete("pods", "bench", `p${--victim}`);
  },
};
let victim = N;
const heard: Record<string, number[]> = {};
let k = 0;
for (const [what, breakIt] of Object.entries(breaks)) {
  heard[what] = [];
  for (let r = 0; r < ROUNDS; r++) {
    await waitFor("watches open", () => Promise.resolve(api.openWatches >= 4), 120_000);
    await new Promise((res) => setTimeout(res, 2000));
    const name = `b${k++}`;
    const start = performance.now();
    breakIt();
    await podWithPort(name);
    await waitFor(`${name} heard`, () => Promise.resolve(isAnnotated(name)), 300_000);
    const ms = performance.now() - start;
    heard[what].push(ms);
    log(`${what}: heard again after ${seconds(ms)}`);
  }
}

// ---- restart: pods deleted while the monitor is down
await monitor.stop();
const released0 = await releases();
for (let i = 0; i < LEAKS; i++) api.delete("pods", "bench", `p${--victim}`);
// One more, made and deleted just before the start: its port is younger than the grace period.
await podWithPort("young");
api.delete("pods", "bench", "young");
const start = performance.now();
monitor = await startMonitor(config, createLogger("monitor", "error"));
await monitor.ready();
const readyMs = performance.now() - start;
await waitFor("old leaks released", async () => (await releases()) - released0 >= LEAKS, 300_000);
const oldMs = performance.now() - start;
await waitFor(
  "the young leak released",
  async () => (await releases()) - released0 >= LEAKS + 1,
  300_000,
);
const youngMs = performance.now() - start;
log(
  `restart: ready ${seconds(readyMs)}, ${LEAKS} leaks ${seconds(oldMs)}, young leak ${
    seconds(youngMs)
  }`,
);

// Every pod deleted at once: how fast the DELETED events are taken in, then the releases.
await waitFor("watches open", () => Promise.resolve(api.openWatches >= 4), 120_000);
const live = api.list("pods", "bench").map((p) => p.metadata.name as string);
const released1 = await releases();
const t1 = performance.now();
for (const name of live) api.delete("pods", "bench", name);
const deletedMs = performance.now() - t1;
await waitFor(
  "DELETED events taken in",
  () => Promise.resolve(monitor.stats().pods === 0),
  600_000,
);
const goneMs = performance.now() - t1;
await waitFor(
  "every port released",
  async () => (await releases()) - released1 >= live.length,
  600_000,
);
const releasedMs = performance.now() - t1;
log(
  `${live.length} DELETED events taken in after ${seconds(goneMs)}, released after ${
    seconds(releasedMs)
  }`,
);

const stats = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return `${seconds(sorted[Math.floor(sorted.length / 2)])} | ${seconds(sorted.at(-1)!)}`;
};
console.log(
  `Monitor defaults: watchTimeoutSeconds ${config.watchTimeoutSeconds}, watchDeadlineSeconds ${config.watchDeadlineSeconds}, watchProbeSeconds ${config.watchProbeSeconds}, reclaimIntervalSeconds ${config.reclaimIntervalSeconds}, reclaimGraceSeconds ${config.reclaimGraceSeconds}; ${N} pods; ${ROUNDS} rounds each.

| watch break | heard again, median | max |
| --- | --- | --- |
${
    Object.entries(heard).filter(([, xs]) => xs.length > 0).map(([what, xs]) =>
      `| ${what} | ${stats(xs)} |`
    ).join("\n")
  }

| after a restart (${
    made - 1
  } pods made, ${LEAKS} deleted while the monitor was down) | time from start |
| --- | --- |
| watching (every list in, ports followed) | ${seconds(readyMs)} |
| ${LEAKS} leaked ports older than the grace period released | ${seconds(oldMs)} |
| a leak made just before the start (younger than the grace period) released | ${seconds(youngMs)} |

| pod events, all at once | events | the stand-in sends them | the monitor has taken them in | rate |
| --- | --- | --- | --- | --- |
| ADDED (pod objects created) | ${N} | ${seconds(createdMs)} | ${seconds(addedMs)} | ${
    perS(N, addedMs)
  } events/s |
| DELETED (pod objects deleted) | ${live.length} | ${seconds(deletedMs)} | ${seconds(goneMs)} | ${
    perS(live.length, goneMs)
  } events/s |
| the deleted pods' ports released at the manager | ${live.length} | | ${seconds(releasedMs)} | ${
    perS(live.length, releasedMs)
  } pods/s |`,
);

function perS(n: number, ms: number): string {
  return Math.round(n / (ms / 1000)).toLocaleString("en-US");
}

function annotated(): number {
  return api.list("pods", "bench").filter((p) => p.metadata.annotations?.[STATUS]).length;
}

function isAnnotated(name: string): boolean {
  return api.get("pods", "bench", name)?.metadata.annotations?.[STATUS] !== undefined;
}

async function releases(): Promise<number> {
  const text = await (await fetch(`${stack.managerUrl}/metrics`, {
    headers: { authorization: `Bearer ${stack.adminToken}` },
  })).text();
  const line = text.split("\n").find((l) =>
    l.startsWith('knitter_manager_releases_total{kind="ip"}')
  );
  return Number(line?.split(" ").at(-1) ?? 0);
}
