/**
 * Bandwidth limits on a pod's veth with Linux traffic control: a token bucket (`tc qdisc ... tbf`)
 * as the root qdisc of each end. The host end's limits what the switch sends into the pod (the
 * ingress limit), the pod end's what the pod sends (the egress limit). Measured on Open vSwitch's
 * userspace datapath (agent/README.md, "Bandwidth limits"): both hold 20 Mbit/s within 5 %, where
 * OVS ingress policing has no effect (it reads the host end with a packet socket, before any tc
 * ingress hook) and an OpenFlow meter drops TCP to half its rate.
 */
import { run } from "@knitter/common";
import type { EffectiveBandwidth, RateLimit } from "@knitter/common";

/** Where a veth's two ends are. */
export interface VethEnds {
  /** The pod's netns path and the pod end's name in it. */
  netns: string;
  ifName: string;
  /** The host end, in the agent's netns. */
  hostIfName: string;
}

/** tbf's latency: how long a packet may wait for tokens before it is dropped (as the reference plugin). */
const LATENCY = "25ms";

/** Applies `limits` (replacing what either end had); a direction without a limit is cleared. */
export async function shapeVeth(ends: VethEnds, limits: EffectiveBandwidth): Promise<void> {
  await Promise.all([
    shapeEnd(ends.hostIfName, undefined, limits.ingress),
    shapeEnd(ends.ifName, ends.netns, limits.egress),
  ]);
}

/** Removes the limits of both ends; ends or a netns already gone are not an error. */
export async function unshapeVeth(ends: VethEnds): Promise<void> {
  await Promise.all([shapeEnd(ends.hostIfName), shapeEnd(ends.ifName, ends.netns)]);
}

/** The rates (bit/s) each end of a veth is limited to now: a tbf root qdisc's; absent without one. */
export interface RatesNow {
  ingress?: number;
  egress?: number;
}

/** What limits the veth now, as tc reports it (CNI CHECK compares it with what ADD set). */
export async function readVethLimits(ends: VethEnds): Promise<RatesNow> {
  const [ingress, egress] = await Promise.all([
    rateOf(ends.hostIfName),
    rateOf(ends.ifName, ends.netns),
  ]);
  return {
    ...(ingress === undefined ? {} : { ingress }),
    ...(egress === undefined ? {} : { egress }),
  };
}

async function rateOf(ifName: string, netns?: string): Promise<number | undefined> {
  const r = await run(["tc", "-j", "qdisc", "show", "dev", ifName, "root"], {
    netns,
    check: false,
  });
  if (r.code !== 0) return undefined; // The end is gone: it limits nothing.
  const qdiscs = JSON.parse(r.stdout || "[]") as { kind: string; options?: { rate?: number } }[];
  const tbf = qdiscs.find((q) => q.kind === "tbf");
  // tc reports a tbf's rate in bytes per second.
  return tbf?.options?.rate === undefined ? undefined : tbf.options.rate * 8;
}

async function shapeEnd(ifName: string, netns?: string, limit?: RateLimit): Promise<void> {
  const argv = limit
    ? [
      "tc",
      "qdisc",
      "replace",
      "dev",
      ifName,
      "root",
      "tbf",
      "rate",
      `${limit.rate}bit`,
      "burst",
      `${Math.ceil(limit.burst / 8)}b`,
      "latency",
      LATENCY,
    ]
    : ["tc", "qdisc", "del", "dev", ifName, "root"];
  const r = await run(argv, { netns, check: false });
  if (r.code === 0) return;
  const gone = /Cannot find device|No such device|Cannot open network namespace|No such file/i
    .test(r.stderr);
  // Deleting a root qdisc that is the default one: nothing to undo.
  const nothing = !limit &&
    /Cannot delete qdisc with handle of zero|Invalid handle/i.test(r.stderr);
  if ((gone && !limit) || nothing) return;
  const where = netns ? `${ifName} in ${netns}` : ifName;
  throw new Error(`Cannot ${limit ? "limit" : "unlimit"} ${where}: ${r.stderr.trim()}`);
}
