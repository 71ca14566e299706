/**
 * The monitor's port index after a manager restart, with the default feed settings
 * (`feedWaitSeconds` 25, `feedDeadlineSeconds` 40; backoff 200 ms doubling to 10 s, less up to 20%
 * at random): how long from the manager answering again to the index being current (a port made
 * right after the restart is in it, the count equals the manager's, the port's pod has its
 * network-status), for outages of several lengths, and how long the monitor says not ready. Also a
 * manager stalled (SIGSTOP) past the feed's deadline. N pods, each with a port in a real manager,
 * against the stand-in API server; the monitor in this process.
 *
 *   deno run --allow-all tests/bench/monitor_feed_bench.ts [--pods N] [--rounds R]
 *     [--outages 0,10,30,50] [--stall 50]
 */
import { parseArgs } from "node:util";
import { createLogger } from "@knitter/common";
import { startMonitor } from "../../monitor/monitor.ts";
import { Cleanup } from "../../devstack/cleanup.ts";
import { waitFor } from "../../devstack/stack.ts";
import { defaultMonitorConfig, monitorBenchWorld, must, pool } from "./monitor_world.ts";

const STATUS = "k8s.v1.cni.cncf.io/network-status";
const { values } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string" },
    rounds: { type: "string" },
    outages: { type: "string" },
    stall: { type: "string" },
  },
});
const N = Number(values.pods ?? 10_000);
const ROUNDS = Number(values.rounds ?? 3);
const OUTAGES_S = (values.outages ?? "0,10,30,50").split(",").map(Number);
const STALL_S = Number(values.stall ?? 50);

const log = (msg: string) => console.error(`[bench ${new Date().toISOString()}] ${msg}`);

await using cleanup = new Cleanup();
const world = await monitorBenchWorld(cleanup, { bookmarkMs: 60_000 });
const { stack, api } = world;
const config = await defaultMonitorConfig(world);
const monitor = await startMonitor(config, createLogger("monitor", "error"));
cleanup.defer(() => monitor.stop());
await monitor.ready();

let pods = 0;
async function podWithPort(name: string): Promise<void> {
  const uid = api.create("pods", {
    metadata: { name, namespace: "bench" },
    spec: { nodeName: "n1", containers: [] },
  }).metadata.uid;
  must(
    await stack.api("PUT", `tenants/bench/networks/pods/ports/${uid}-eth0`, {
      pod: { namespace: "bench", name, uid },
      interface: "eth0",
      node: "n1",
    }),
    201,
  );
  pods++;
}

await pool(N, (i) => podWithPort(`p${i}`));
await waitFor(
  "the index holds every port",
  () => Promise.resolve(monitor.stats().ports === N),
  600_000,
);
// Every pod's network-status written: the restarts below start from a monitor with nothing queued.
await monitor.idle();
log(`${N} pods with ports, all in the monitor's index, every network-status written`);

async function ready(): Promise<boolean> {
  const r = await fetch(`${monitor.healthUrl}/readyz`);
  await r.body?.cancel();
  return r.ok;
}

/** From `since`, polls until `probe` holds; answers the milliseconds it took. */
async function until(what: string, since: number, probe: () => Promise<boolean>): Promise<number> {
  await waitFor(what, probe, 600_000);
  return performance.now() - since;
}

const rows: string[] = [];
for (const outage of OUTAGES_S) {
  const current: number[] = [];
  const readyAgain: number[] = [];
  let notReady = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const lists = monitor.portFeed().lists;
    await stack.stopManager();
    // The outage, watching readiness meanwhile: 503 once nothing was heard for the deadline.
    const down = performance.now();
    let saw503 = false;
    while (performance.now() - down < outage * 1000) {
      if (!(await ready())) saw503 = true;
      await new Promise((res) => setTimeout(res, Math.min(1000, outage * 1000)));
    }
    if (saw503) notReady++;
    await stack.startManager();
    const back = performance.now();
    const name = `r${outage}-${r}`;
    await podWithPort(name);
    current.push(
      await until("the index current", back, () =>
        Promise.resolve(
          monitor.stats().ports === pods && monitor.portFeed().lists > lists &&
            api.get("pods", "bench", name)?.metadata.annotations?.[STATUS] !== undefined,
        )),
    );
    readyAgain.push(await until("ready again", back, ready));
    log(`outage ${outage} s, round ${r + 1}: current after ${ms(current.at(-1)!)}`);
  }
  rows.push(
    `| manager stopped, ${outage === 0 ? "started at once" : `down ${outage} s`} | ${
      ms(median(current))
    } | ${ms(Math.max(...current))} | ${
      notReady === 0
        ? "200 throughout"
        : `503 in ${notReady} of ${ROUNDS} rounds; 200 again after ${ms(median(readyAgain))}`
    } |`,
  );
}

// A stall past the deadline: the poll in flight is abandoned, the next ones too, until it answers.
const pid = stack.managerPid();
const hungBefore = monitor.portFeed().hung;
const stalled = performance.now();
Deno.kill(pid, "SIGSTOP");
cleanup.defer(() => Promise.resolve(Deno.kill(pid, "SIGCONT")));
const notReadyAfter = await until("not ready", stalled, async () => !(await ready()));
await new Promise((res) => setTimeout(res, STALL_S * 1000 - (performance.now() - stalled)));
Deno.kill(pid, "SIGCONT");
const resumed = performance.now();
await podWithPort("after-stall");
const stallCurrent = await until(
  "the index current after the stall",
  resumed,
  () =>
    Promise.resolve(
      monitor.stats().ports === pods &&
        api.get("pods", "bench", "after-stall")?.metadata.annotations?.[STATUS] !== undefined,
    ),
);
const stallReady = await until("ready after the stall", resumed, ready);
rows.push(
  `| manager stalled (SIGSTOP) ${STALL_S} s, then resumed | ${ms(stallCurrent)} | ${
    ms(stallCurrent)
  } | 503 after ${ms(notReadyAfter)} of the stall; 200 again after ${ms(stallReady)} |`,
);

console.log(`
${N} pods with a port each; ${ROUNDS} rounds per outage; time from the manager answering again.

| what | index current, median | max | monitor's /readyz |
| ---- | --------------------- | --- | ----------------- |
${rows.join("\n")}

Stalled: polls abandoned as hung: ${monitor.portFeed().hung - hungBefore}.
`);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function ms(x: number): string {
  return x < 1000 ? `${Math.round(x)} ms` : `${(x / 1000).toFixed(1)} s`;
}
