/**
 * The agent's route for `knitctl capture` (on the root-only socket):
 *
 *   POST /v1/capture {tenant, network, port, packets?, seconds?, filter?, direction?}
 *     or {tenant, mirror, packets?, seconds?, filter?}: the mirror's copies this node sends
 *     with `Authorization: Bearer <the caller's manager token>`
 *     -> the pcap file (application/vnd.tcpdump.pcap), or an error body that says why not
 */
import type { Hono } from "hono";
import { z } from "zod";
import { jsonBody } from "./json_body.ts";
import { ManagerUnavailableError } from "@knitter/common";
import {
  capture,
  CAPTURE_LIMITS as L,
  type CaptureDeps,
  CaptureRefused,
  type CaptureRequest,
} from "../capture/capture.ts";

const Name = z.string().min(1).max(253);

const CaptureBody = z.strictObject({
  tenant: Name,
  network: Name.optional(),
  port: z.string().min(1).max(512).optional(),
  mirror: Name.optional(),
  packets: z.int().min(L.packets.min).max(L.packets.max).default(L.packets.default),
  seconds: z.int().min(L.seconds.min).max(L.seconds.max).default(L.seconds.default),
  filter: z.string().max(L.filterBytes).refine(
    (f) => ![...f].some((ch) => ch.charCodeAt(0) < 0x20),
    "no control characters",
  )
    .optional(),
  direction: z.enum(["both", "in", "out"]).optional(),
}).refine(
  (b) => b.mirror === undefined ? b.network && b.port : !b.network && !b.port && !b.direction,
  {
    path: ["port"],
    message:
      "name a port (network and port, and a direction if you like) or a mirror (mirror alone)",
  },
).transform((b) => ({ ...b, direction: b.direction ?? "both" }));

export function mountCaptureRoutes(app: Hono, deps: CaptureDeps): void {
  app.post("/v1/capture", async (c) => {
    const token = /^Bearer (\S+)$/.exec(c.req.header("authorization") ?? "")?.[1];
    if (!token) {
      const message =
        "A capture needs the caller's manager token (Authorization: Bearer TOKEN): the manager decides whose ports it may see";
      return c.json({ error: { code: "unauthorized", message } }, 401);
    }
    const body = await jsonBody(c, CaptureBody, "capture request");
    if ("refused" in body) return body.refused;
    try {
      const pcap = await capture(deps, token, body.data as CaptureRequest);
      return c.body(pcap as Uint8Array<ArrayBuffer>, 200, {
        "content-type": "application/vnd.tcpdump.pcap",
      });
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      if (err instanceof CaptureRefused) {
        const code = err.status === 403 ? "forbidden" : "bad_request";
        return c.json({ error: { code, message } }, err.status);
      }
      if (err instanceof ManagerUnavailableError) {
        return c.json(
          { error: { code: "unavailable", message: `Cannot capture: ${message}` } },
          503,
        );
      }
      deps.log.warn("capture failed", { err: message });
      return c.json({ error: { code: "failed", message: `Cannot capture: ${message}` } }, 500);
    }
  });
}
