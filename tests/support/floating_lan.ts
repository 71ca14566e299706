/**
 * What the floating address tests (e2e_floating_test.ts, e2e_floating6_test.ts) look at on the
 * nodes' LAN and the router: who answers for an address, and a pod's one port ID on either node.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { type StackNode, waitFor } from "../../devstack/stack.ts";
import type { Fabric } from "./bgp_fabric.ts";
import { startCapture } from "./capture.ts";
import { tcpExchange } from "./traffic.ts";

/** Generous: BGP sessions take a few seconds to come up; speed is the benchmark's. */
export const LEARN_MS = 60_000;

/**
 * The same container and pod UID on either node: the same port ID (agent/cni/pod_request.ts), so
 * a pod made again on the other node is the same port.
 */
export function oneSandbox(containerId: string, podUid: string) {
  return { sandbox: { containerId, podUid }, portId: `${podUid}-${containerId}-eth0` };
}

/** The MAC the router has for `ip` on the LAN (none: not answered). */
export async function neighbourOwner(fabric: Fabric, ip: string): Promise<string | undefined> {
  const r = await run(["ip", "-n", fabric.router, "-j", "neigh", "show", "to", ip, "dev", "eth0"]);
  const entries: { lladdr?: string }[] = JSON.parse(r.stdout || "[]");
  return entries.find((e) => e.lladdr)?.lladdr;
}

/** Whether a node has a proxy neighbour entry (ARP or NDP) for `ip`. */
export async function proxies(node: StackNode, ip: string): Promise<boolean> {
  const family = ip.includes(":") ? "-6" : "-4";
  const r = await run(["ip", "-n", node.sim.netns, family, "neigh", "show", "proxy", "to", ip]);
  return r.stdout.trim() !== "";
}

/** A node's MAC on the LAN (its underlay interface). */
export async function macOf(node: StackNode): Promise<string> {
  const r = await run(["ip", "-n", node.sim.netns, "-j", "link", "show", "br-phy"]);
  return JSON.parse(r.stdout)[0].address;
}

/** Waits until the host behind the router reaches `fip` by TCP (a server in `podNs`). */
export async function untilHostReaches(
  cleanup: Cleanup,
  fabric: Fabric,
  podNs: string,
  fip: string,
): Promise<void> {
  await waitFor(
    "the host reaches the floating address",
    async () => (await tcpExchange(cleanup, fabric.host, podNs, fip, 1000, { seconds: 2 })).ok,
    LEARN_MS,
  );
}

/**
 * The pod (its netns `podNs`) opens a TCP connection to the host (`host`: its IPv4 or IPv6
 * address); the host sees it come from `from`.
 */
export async function podToHost(
  cleanup: Cleanup,
  fabric: Fabric,
  podNs: string,
  addrs: { host: string; from: string },
): Promise<void> {
  const { host, from } = addrs;
  const cap = await startCapture(cleanup, fabric.host, "eth0", `tcp and dst host ${host}`, {
    count: 1,
    timeoutMs: 20_000,
  });
  const tcp = await tcpExchange(cleanup, podNs, fabric.host, host, 10_000);
  assert.ok(tcp.ok, `${podNs} to the host: ${JSON.stringify(tcp)}`);
  const seen = await cap.done(1000);
  assert.equal(seen.length, 1, `the host saw the connection: ${seen}`);
  assert.ok(seen[0].includes(` ${from}.`) && seen[0].includes(`> ${host}.`), seen[0]);
}
