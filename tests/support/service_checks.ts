/**
 * The checks of a service end to end (tests/e2e_services_test.ts, e2e_services_routed_test.ts):
 * connections from a client pod to a VIP through service_peer.ts, each telling which backend
 * answered, and the select groups a node's br-int has.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { type Stack, type StackNode, waitFor } from "../../devstack/stack.ts";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import { ipNetnsName, type Pod } from "./pods.ts";
import { inNetns, startReady } from "./traffic.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { api } from "./stack_api.ts";

export const PEER = new URL("./service_peer.ts", import.meta.url).pathname;
export const UDP_PEER = new URL("./service_udp_peer.ts", import.meta.url).pathname;
export const TARGET = 8080;
/** How long flows may take to reach a node (a bound for the wait, not a measure). */
export const CONVERGE_MS = 15_000;

export type Counts = {
  names: Record<string, number>;
  failures: number;
  errors: string[];
  /** Per backend, the client addresses it saw. */
  seenAs: Record<string, string[]>;
};

/** N connections from `client` to addr:80, each telling which backend answered. */
export async function count(client: Pod, addr: string, n: number): Promise<Counts> {
  const r = await run(
    [...inNetns(ns(client)), Deno.execPath(), "run", "--quiet", "--allow-net", PEER, "count"]
      .concat([addr, "80", String(n)]),
    { check: false },
  );
  return JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}");
}

/**
 * N UDP exchanges of `size` random bytes from `client` to addr:53, each from a new source port,
 * each telling which backend answered and whether the bytes came back intact.
 */
export async function countUdp(
  client: Pod,
  addr: string,
  n: number,
  size: number,
): Promise<Counts> {
  const r = await run(
    [...inNetns(ns(client)), Deno.execPath(), "run", "--quiet", "--allow-net", UDP_PEER, "count"]
      .concat([addr, "53", String(n), String(size)]),
    { check: false },
  );
  return JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}");
}

/** Each backend answers UDP on TARGET (IPv4 and IPv6) until the test ends. */
export async function serveUdpBackends(cleanup: Cleanup, backends: Pod[]): Promise<void> {
  for (const b of backends) {
    const script = [UDP_PEER, "serve", String(TARGET), b.name, "600"];
    const server = await startReady(cleanup, ns(b), script, { what: `UDP backend ${b.name}` });
    cleanup.defer(() => server.stop());
  }
}

/** A long connection from `client` to addr:80; `name` once it knows its backend. */
export function hold(client: Pod, addr: string, seconds: number) {
  const child = new Deno.Command(inNetns(ns(client))[0], {
    args: [
      ...inNetns(ns(client)).slice(1),
      ...[Deno.execPath(), "run", "--quiet", "--allow-net", PEER, "hold", addr, "80"],
      String(seconds),
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = child.output().then((o) => new TextDecoder().decode(o.stdout));
  return {
    pid: child.pid,
    result: out.then((text) =>
      JSON.parse(text.trim().split("\n").pop() ?? "{}") as {
        name: string;
        ok: boolean;
        rounds: number;
        error?: string;
      }
    ),
  };
}

export function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

/** Each backend serves its name on TARGET until the test ends (on `host`: "::" for IPv6 too). */
export async function serveBackends(
  cleanup: Cleanup,
  backends: Pod[],
  host = "0.0.0.0",
): Promise<void> {
  for (const b of backends) {
    const script = [PEER, "serve", String(TARGET), b.name, "600", host];
    const server = await startReady(cleanup, ns(b), script, { what: `backend ${b.name}` });
    cleanup.defer(() => server.stop());
  }
}

/** The select groups of a node's br-int, as dumped. */
export async function groups(node: StackNode): Promise<string[]> {
  return [...(await new Ovs(node.sim.ovs).dumpGroups("br-int")).values()];
}

/**
 * Waits until the groups of the node's br-int for the subnet of `ips` (a /24) have exactly the
 * backends `ips` as buckets.
 */
export async function bucketsAre(node: StackNode, ips: string[]): Promise<void> {
  const want = ips.map((ip) => `nat(dst=${ip}:${TARGET})`).sort();
  const subnet = `nat(dst=${ips[0].slice(0, ips[0].lastIndexOf(".") + 1)}`;
  await waitFor(`${node.name}'s groups with buckets ${ips.join(", ")}`, async () => {
    const all = (await groups(node)).filter((g) => g.includes(subnet));
    return all.length > 0 && all.every((g) => {
      const got = [...g.matchAll(/nat\(dst=[\d.]+:\d+\)/g)].map((m) => m[0]).sort();
      return JSON.stringify(got) === JSON.stringify(want);
    });
  }, CONVERGE_MS);
}

/** The manager's ID of a pod's port on its first network. */
export async function portId(stack: Stack, pod: Pod): Promise<string> {
  const r = await api(
    stack,
    "GET",
    `ports?pod=${pod.args.K8S_POD_NAMESPACE}/${pod.name}`,
    undefined,
    200,
  );
  return r.items[0].id;
}

/** Each backend got between 15 % and 45 % of the connections, and none failed. */
export function assertSpread(c: Counts, backends: string[], n: number, what: string): void {
  assert.equal(c.failures, 0, `${what}: failures ${JSON.stringify(c)}`);
  assert.deepEqual(
    Object.keys(c.names).sort(),
    [...backends].sort(),
    `${what}: ${JSON.stringify(c)}`,
  );
  for (const b of backends) {
    const share = c.names[b] / n;
    assert.ok(share >= 0.15 && share <= 0.45, `${what}: ${b} got ${c.names[b]} of ${n}`);
  }
}
