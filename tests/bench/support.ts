/** Shared pieces of the CNI and dataplane benchmarks: the driver, pod namespaces, statistics. */
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";
import type { DriverRequest, DriverResult } from "./driver.ts";

export const ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** Runs a batch through tests/bench/driver.ts inside `netns`; fails if any command failed. */
export async function drive(
  netns: string,
  req: DriverRequest,
  what: string,
  allowFailure = false,
): Promise<DriverResult> {
  const r = await run(
    ["ip", "netns", "exec", netns, Deno.execPath(), "run", "-A", `${ROOT}/tests/bench/driver.ts`],
    { stdin: JSON.stringify(req) },
  );
  const result: DriverResult = JSON.parse(r.stdout);
  const failed = result.runs.findIndex((x) => x.code !== 0);
  if (failed >= 0 && !allowFailure) {
    const x = result.runs[failed];
    throw new Error(
      `${what}: command ${
        failed + 1
      } of ${result.runs.length} failed (exit ${x.code}): ${x.stdout} ${x.stderr}`,
    );
  }
  return result;
}

/** A pod's netns (loopback up), registered with `cleanup`; returns its path. */
export async function podNetns(cleanup: Cleanup, name: string): Promise<string> {
  const netns = cleanup.name(name);
  cleanup.netns(netns);
  await run(["ip", "netns", "add", netns]);
  await run(["ip", "-n", netns, "link", "set", "lo", "up"]);
  return `/var/run/netns/${netns}`;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  // Nearest rank: the smallest value with at least p % of the values at or below it.
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

export function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export function machine(): string {
  let cpu = "unknown CPU";
  try {
    cpu = Deno.readTextFileSync("/proc/cpuinfo").match(/model name\s*:\s*(.*)/)?.[1] ?? cpu;
  } catch { /* not Linux */ }
  return `${navigator.hardwareConcurrency} cores, ${cpu}, Deno ${Deno.version.deno}`;
}

export async function ovsVersion(): Promise<string> {
  const r = await run(["ovs-vsctl", "--version"], { check: false });
  return r.stdout.match(/\(Open vSwitch\) (\S+)/)?.[1] ?? "?";
}

export const log = (msg: string) => console.error(`bench: ${msg}`);

export const now = () => performance.timeOrigin + performance.now();
