/**
 * The monitor's throughput and memory: N pods created (each with a port in a real manager, as an
 * agent makes it) then deleted, against the stand-in API server, with the monitor as its own
 * process. Created: until every pod carries its network-status; deleted: until the monitor has
 * released every port. Memory: the monitor's resident set while it holds the N pods and ports.
 *
 *   deno task bench:monitor [--pods N]
 */
import { parseArgs } from "node:util";
import { Cleanup } from "../../devstack/cleanup.ts";
import { waitFor } from "../../devstack/stack.ts";
import { monitorBenchWorld, must, pool, seconds } from "./monitor_world.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const STATUS = "k8s.v1.cni.cncf.io/network-status";
const { values } = parseArgs({ args: Deno.args, options: { pods: { type: "string" } } });
const N = Number(values.pods ?? 10_000);

const log = (msg: string) => console.error(`[bench ${new Date().toISOString()}] ${msg}`);

await using cleanup = new Cleanup();
const { stack, api, token } = await monitorBenchWorld(cleanup, { bookmarkMs: 5000 });

const dir = stack.dir;
await Deno.writeTextFile(
  `${dir}/monitor.json`,
  JSON.stringify({
    kubernetes: { kubeconfig: await api.writeKubeconfig(`${dir}/monitor.kubeconfig`, token) },
    manager: { url: stack.managerUrl, token: stack.adminToken },
    reclaimIntervalSeconds: 3600,
    // Any free port for the probes: another monitor may hold the default one.
    health: { hostname: "127.0.0.1", port: 0 },
    logLevel: "warn",
  }),
);
const child = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "--allow-all",
    "--v8-flags=--expose-gc",
    "monitor/main.ts",
    "--config",
    `${dir}/monitor.json`,
  ],
  cwd: ROOT,
  stdout: "null",
  stderr: "piped",
}).spawn();
cleanup.pid(child.pid);
const monitorLog: string[] = [];
(async () => {
  const lines = child.stderr.pipeThrough(new TextDecoderStream());
  let rest = "";
  for await (const chunk of lines) {
    const parts = (rest + chunk).split("\n");
    rest = parts.pop()!;
    monitorLog.push(...parts);
  }
})().catch(() => {});
await waitFor("monitor watching", () => Promise.resolve(api.openWatches >= 4), 30_000);
const idle = await memory();
log(`monitor up: ${JSON.stringify(idle)}`);

// Created: the pod objects, then each pod's port as its agent would make it.
const t0 = performance.now();
const uids: string[] = [];
for (let i = 0; i < N; i++) {
  const o = api.create("pods", {
    metadata: { name: `p${i}`, namespace: "bench" },
    spec: { nodeName: "n1", containers: [] },
  });
  uids.push(o.metadata.uid);
}
await pool(N, async (i) => {
  must(
    await stack.api("PUT", `tenants/bench/networks/pods/ports/${uids[i]}-eth0`, {
      pod: { namespace: "bench", name: `p${i}`, uid: uids[i] },
      interface: "eth0",
      node: "n1",
    }),
    201,
  );
});
const portsMs = performance.now() - t0;
log(`${N} pods and ports in ${Math.round(portsMs)} ms`);
await waitFor("every network-status written", () => Promise.resolve(annotated() === N), 600_000);
const createdMs = performance.now() - t0;
const held = await memory();
log(`all annotated after ${Math.round(createdMs)} ms: ${JSON.stringify(held)}`);

// Deleted: every pod object at once; the monitor releases every port.
const t1 = performance.now();
for (let i = 0; i < N; i++) api.delete("pods", "bench", `p${i}`);
await waitFor("every port released", async () => (await releases()) >= N, 600_000);
const deletedMs = performance.now() - t1;
const after = await memory();
log(`all released after ${Math.round(deletedMs)} ms: ${JSON.stringify(after)}`);

const perS = (ms: number) => Math.round(N / (ms / 1000));
console.log(`| phase | pods | time | rate |
| --- | --- | --- | --- |
| created: pod objects and their ports (driver, for reference) | ${N} | ${seconds(portsMs)} | ${
  perS(portsMs)
} pods/s |
| created: until every pod has its network-status | ${N} | ${seconds(createdMs)} | ${
  perS(createdMs)
} pods/s |
| deleted: until every port is released | ${N} | ${seconds(deletedMs)} | ${perS(deletedMs)} pods/s |

| monitor memory, after a full collection | resident set | V8 heap used |
| --- | --- | --- |
| watching, no pods | ${idle.rssMb} MB | ${idle.heapUsedMb} MB |
| holding ${N} pods and their ports | ${held.rssMb} MB | ${held.heapUsedMb} MB |
| after the deletions | ${after.rssMb} MB | ${after.heapUsedMb} MB |`);

function annotated(): number {
  return api.list("pods", "bench").filter((p) => p.metadata.annotations?.[STATUS]).length;
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

/** The monitor's own figures (SIGUSR2: a collection, then one "stats" log line). */
async function memory(): Promise<{ rssMb: number; heapUsedMb: number }> {
  const seen = monitorLog.length;
  Deno.kill(child.pid, "SIGUSR2");
  let line: string | undefined;
  await waitFor("the monitor's stats", () => {
    line = monitorLog.slice(seen).find((l) => l.includes('"msg":"stats"'));
    return Promise.resolve(line !== undefined);
  }, 10_000).catch((err) => {
    console.error(monitorLog.join("\n"));
    throw err;
  });
  return JSON.parse(line!);
}
