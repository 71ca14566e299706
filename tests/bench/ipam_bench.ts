/**
 * 1,000 macvlan pods whose addresses come from the knitter IPAM, against the same pods with the
 * reference host-local IPAM, in the same run (issue 27): the reference macvlan plugin makes each
 * pod's interface in a netns of its own, on a veth of the simulated node as its master, in waves
 * of 50 concurrent ADDs (the runtime's exec of each plugin, as tests/bench/driver.ts times them),
 * then the DELs the same way. host-local keeps its addresses in files on the node; knitter asks the
 * manager through the node's agent, which records them (the stack's manager: Deno KV file).
 *
 *   deno run -A tests/bench/ipam_bench.ts [--pods 1000] [--wave 50]
 */
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startStack } from "../../devstack/stack.ts";
import { CNI_BIN_DIR, REFERENCE_PLUGINS } from "../support/cni_runtime.ts";
import type { DriverJob, DriverRun } from "./driver.ts";
import { drive, log, machine, percentile, podNetns } from "./support.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { pods: { type: "string", default: "1000" }, wave: { type: "string", default: "50" } },
});
const PODS = Number(values.pods);
const WAVE = Number(values.wave);

interface Figures {
  addSeconds: number;
  delSeconds: number;
  addMs: number[];
  delMs: number[];
  addresses: string[];
}

/** One subject: a macvlan conflist entry with its IPAM, run over every pod. */
async function measure(
  node: string,
  netns: string[],
  ipam: Record<string, unknown>,
  env: Record<string, string>,
): Promise<Figures> {
  const conf = JSON.stringify({
    cniVersion: "1.0.0",
    name: "data",
    type: "macvlan",
    master: "data0",
    mode: "bridge",
    ipam,
  });
  const job = (command: string, i: number): DriverJob => ({
    argv: [`${REFERENCE_PLUGINS}/macvlan`],
    env: {
      ...env,
      CNI_COMMAND: command,
      CNI_CONTAINERID: `bench${i.toString().padStart(6, "0")}`,
      CNI_NETNS: netns[i],
      CNI_IFNAME: "net1",
      CNI_PATH: `${CNI_BIN_DIR}:${REFERENCE_PLUGINS}`,
      PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
    },
    stdin: conf,
  });
  const waves = async (command: string) => {
    const runs: DriverRun[] = [];
    let ms = 0;
    for (let at = 0; at < netns.length; at += WAVE) {
      const jobs = netns.slice(at, at + WAVE).map((_, k) => job(command, at + k));
      const r = await drive(node, { mode: "concurrent", jobs }, `${command} ${at}`);
      ms += r.wallMs;
      runs.push(...r.runs);
    }
    return { seconds: ms / 1000, runs };
  };
  const added = await waves("ADD");
  const addresses = added.runs.map((r) => JSON.parse(r.stdout).ips[0].address as string);
  const deleted = await waves("DEL");
  return {
    addSeconds: added.seconds,
    delSeconds: deleted.seconds,
    addMs: added.runs.map((r) => r.ms),
    delMs: deleted.runs.map((r) => r.ms),
    addresses,
  };
}

if (Deno.uid() !== 0) {
  console.error("bench: needs root (network namespaces, Open vSwitch)");
  Deno.exit(1);
}
{
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1"], logLevel: "error" });
  const [n1] = stack.nodes;
  assert.equal((await stack.api("POST", "tenants", { name: "bench" })).status, 201);
  const made = await stack.api("POST", "tenants/bench/networks", {
    name: "data",
    cidr: "10.70.0.0/16",
    dataPlane: "external",
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
    stdin: "link add data0 type veth peer name data0p\nlink set data0p up\nlink set data0 up\n",
  });
  log(`${PODS} pod namespaces`);
  const netns: string[] = [];
  for (let i = 0; i < PODS; i++) netns.push(await podNetns(cleanup, `ip${i}`));
  const hostLocalDir = await cleanup.tempDir();

  log("host-local");
  const hostLocal = await measure(n1.sim.netns, netns, {
    type: "host-local",
    dataDir: hostLocalDir,
    ranges: [[{ subnet: "10.71.0.0/16" }]],
  }, {});
  log("knitter");
  const knitter = await measure(n1.sim.netns, netns, {
    type: "knitter",
    network: "data",
    tenant: "bench",
  }, { KNITTER_AGENT_SOCKET: n1.agentSocket });

  // Every pod had its own address, and knitter's were the manager's.
  for (const f of [hostLocal, knitter]) assert.equal(new Set(f.addresses).size, PODS);
  const left = await stack.api("GET", "tenants/bench/networks/data/ports");
  assert.deepEqual(left.body.items ?? left.body, [], "DEL released every knitter port");

  console.log(`\n${PODS} macvlan pods, waves of ${WAVE} concurrent; ${machine()}\n`);
  console.log(
    "| IPAM | ADD all (s) | ADD pods/s | ADD p50 / p99 (ms) | DEL all (s) | DEL p50 / p99 (ms) |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  for (const [name, f] of [["host-local (yardstick)", hostLocal], ["knitter", knitter]] as const) {
    console.log(
      `| ${name} | ${f.addSeconds.toFixed(1)} | ${(PODS / f.addSeconds).toFixed(0)} | ${
        percentile(f.addMs, 50).toFixed(0)
      } / ${percentile(f.addMs, 99).toFixed(0)} | ${f.delSeconds.toFixed(1)} | ${
        percentile(f.delMs, 50).toFixed(0)
      } / ${percentile(f.delMs, 99).toFixed(0)} |`,
    );
  }
}
