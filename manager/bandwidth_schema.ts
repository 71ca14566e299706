/**
 * Bandwidth limits in the API (a network's default, a port's own), in the shape of the CNI
 * `bandwidth` capability: rates in bits per second, bursts in bits (common/bandwidth.ts). The
 * agent applies them to the pod's veth; which limit wins is in agent/README.md.
 */
import { z } from "zod";
import { MAX_BURST, MAX_RATE, MIN_BURST, MIN_RATE } from "@knitter/common";

const Rate = z.int().min(MIN_RATE).max(MAX_RATE);
const Burst = z.int().min(MIN_BURST).max(MAX_BURST);

export const BandwidthSchema = z.strictObject({
  ingressRate: Rate.optional().meta({ description: "traffic into the pod, bits per second" }),
  ingressBurst: Burst.optional().meta({
    description: "bits sent at once above the rate; default 100 ms at the rate, at least 64 KiB",
  }),
  egressRate: Rate.optional().meta({ description: "traffic out of the pod, bits per second" }),
  egressBurst: Burst.optional(),
}).refine((b) => b.ingressBurst === undefined || b.ingressRate !== undefined, {
  message: "ingressBurst needs ingressRate",
  path: ["ingressBurst"],
}).refine((b) => b.egressBurst === undefined || b.egressRate !== undefined, {
  message: "egressBurst needs egressRate",
  path: ["egressBurst"],
});
