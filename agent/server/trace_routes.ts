/**
 * The agent's routes for `knitctl trace` and `knitctl verify node`, beside the flow routes (on the
 * same root-only socket):
 *
 *   POST /v1/trace  {from, packet, target?} -> a TraceHop: what this node's switch does with it
 *   GET  /v1/verify -> {node, bridge, flows, missingPorts, extraPorts, state}
 */
import type { Hono } from "hono";
import { z } from "zod";
import { formatIp, parseIp, parseMac } from "@knitter/common/address";
import {
  NodeInspector,
  type TraceDeps,
  TraceRefused,
  type TraceRequest,
} from "../dataplane/trace.ts";
import { jsonBody } from "./json_body.ts";

/** A MAC as the rest of knitter reads it (common/address.ts), canonical once parsed. */
const Mac = z.string().max(64).refine((s) => parseMac(s) !== null, "a MAC xx:xx:xx:xx:xx:xx")
  .transform((s) => parseMac(s)!);
/** An IPv4 or IPv6 address, canonical once parsed (as the flows spell it). */
const Ip = z.string().max(64).refine((s) => parseIp(s) !== null, "an IPv4 or IPv6 address")
  .transform((s) => formatIp(parseIp(s)!));

const TraceBody = z.strictObject({
  from: z.discriminatedUnion("kind", [
    z.strictObject({
      kind: z.literal("port"),
      portId: z.string().min(1).max(512),
      tenant: z.string().min(1).max(253).optional(),
    }),
    z.strictObject({ kind: z.literal("tunnel"), vni: z.int().min(1).max(0xffffff) }),
    z.strictObject({
      kind: z.literal("physnet"),
      physnet: z.string().min(1).max(253),
      vlan: z.int().min(1).max(4094).optional(),
    }),
  ]),
  packet: z.strictObject({
    proto: z.enum(["tcp", "udp", "icmp", "arp"]),
    dlSrc: Mac,
    dlDst: Mac,
    ipSrc: Ip,
    ipDst: Ip,
    dstPort: z.int().min(0).max(65535).optional(),
  }).refine(
    // One family: the packet's (ARP is IPv4's).
    (p) =>
      p.ipSrc.includes(":") === p.ipDst.includes(":") &&
      (p.proto !== "arp" || !p.ipDst.includes(":")),
    { message: "ipSrc and ipDst of one family (IPv4 for ARP)", path: ["ipDst"] },
  ),
  target: z.strictObject({
    ip: z.string().max(64),
    owner: z.strictObject({
      label: z.string().max(1024),
      network: z.string().max(1024),
      node: z.string().max(253).optional(),
    }).optional(),
  }).optional(),
});

export function mountTraceRoutes(app: Hono, deps: TraceDeps): void {
  const inspector = new NodeInspector(deps);
  app.post("/v1/trace", async (c) => {
    const body = await jsonBody(c, TraceBody, "trace request");
    if ("refused" in body) return body.refused;
    try {
      return c.json(await inspector.trace(body.data as TraceRequest));
    } catch (err) {
      const message = `Cannot trace the packet: ${(err as Error).message ?? err}`;
      if (err instanceof TraceRefused) {
        return c.json({ error: { code: "bad_request", message } }, 400);
      }
      return c.json({ error: { code: "failed", message } }, 500);
    }
  });
  app.get("/v1/verify", async (c) => {
    try {
      return c.json(await inspector.verify());
    } catch (err) {
      const message = `Cannot verify the node: ${(err as Error).message ?? err}`;
      return c.json({ error: { code: "failed", message } }, 500);
    }
  });
}
