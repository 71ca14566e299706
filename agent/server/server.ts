/**
 * The agent's API for the plugin: HTTP on a unix socket only root may use. The plugin's one route,
 * `POST /v1/cni/exec` (the wire, versioned: "The plugin's wire" in ../README.md), takes the
 * runtime's call as it came and answers what the plugin prints and its exit status. The routes of
 * wire 0, one per command (`POST /v1/cni/add`, ...) with a CniRequest, stay for the Deno plugin of
 * earlier releases; they answer CNI results or CNI error bodies, never anything else.
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import type { Logger } from "@knitter/common";
import type { Attacher } from "../cni/attach.ts";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";
import { toCniError } from "../cni/cni_errors.ts";
import { execCni } from "../cni/cni_exec.ts";
import { type ExecReply, execReply, parseExec, tooLarge } from "./exec_wire.ts";
import type { ExtraInterfaces } from "../extra/extra_interface.ts";
import { mountExtraInterfaces } from "./extra_interface_routes.ts";
import type { CniRequest } from "../cni/pod_request.ts";
import type { AgentMetrics } from "../metrics.ts";

/** HTTP status of a CNI error: the plugin only relays the body, this is for people and logs. */
function statusOf(code: number): 400 | 500 | 503 {
  if (
    code === CNI_CODE.tryAgainLater || code === CNI_CODE.notAvailable ||
    code === CNI_CODE.limitedConnectivity
  ) {
    return 503;
  }
  return code < 100 && code !== CNI_CODE.ioFailure ? 400 : 500;
}

export interface AgentApi {
  attacher: Attacher;
  /** null when ready for ADD; else why not (STATUS answers it). */
  notReady(): string | null;
  log: Logger;
  /** knitctl attach / detach (/v1/interfaces); absent: those routes are not served. */
  extra?: ExtraInterfaces;
  /** Counts each CNI call: its time and its error code (metrics.ts). */
  metrics?: AgentMetrics;
}

/** Requests on the socket are a CNI config and a few variables, or an attach: far below this. */
export const MAX_AGENT_BODY_BYTES = 1 << 20;

const Attachment = z.looseObject({ containerID: z.string().max(1024), ifname: z.string().max(64) });

/**
 * The shape of a CNI request as the plugin sends it (plugin/protocol.ts): every field the agent
 * reads has its type, so a malformed one is a 400 here, never a TypeError (a 500) deeper in.
 * What the fields mean is checked where they are used, so the lengths here only stop what no
 * request could mean (the body is capped too): a long container ID or a long network list is for
 * the attacher to refuse with the code that says why (4, 7), and a DEL of one still succeeds.
 */
const CniRequestShape = z.looseObject({
  command: z.string().max(16).optional(),
  containerId: z.string().max(4096),
  netns: z.string().max(4096),
  ifName: z.string().max(64),
  args: z.record(z.string().max(256), z.string().max(65536)).refine(
    (a) => Object.keys(a).length <= 64,
    "at most 64 CNI_ARGS",
  ),
  path: z.string().max(65536),
  config: z.looseObject({
    cniVersion: z.string().max(32),
    name: z.string().max(1024).optional(),
    type: z.string().max(1024).optional(),
    tenant: z.string().max(253).optional(),
    network: z.string().max(253).optional(),
    networks: z.array(z.union([
      z.string().max(253),
      z.looseObject({
        name: z.string().max(253),
        interface: z.string().max(64).optional(),
        ip: z.string().max(64).optional(),
        ipGroup: z.string().max(253).optional(),
        mac: z.string().max(64).optional(),
        defaultRoute: z.boolean().optional(),
        claim: z.string().max(253).optional(),
      }),
    ])).max(4096).optional(),
    runtimeConfig: z.looseObject({
      ips: z.array(z.string().max(64)).max(16).optional(),
      mac: z.string().max(64).optional(),
    }).optional(),
    prevResult: z.record(z.string(), z.unknown()).optional(),
    "cni.dev/valid-attachments": z.array(Attachment).optional(),
    "cni.dev/attachments": z.array(Attachment).optional(),
  }),
});

/** The body as a CNI request, or the CNI error (a 400) that says what is wrong with it. */
function cniRequest(text: string): CniRequest | CniError {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return new CniError(CNI_CODE.decodeFailure, "The agent got a request that is not JSON");
  }
  return shapedRequest(raw);
}

/** A request (wire 0's body, or what the plugin's call of wire 1 became) checked for its shape. */
function shapedRequest(raw: unknown): CniRequest | CniError {
  const r = CniRequestShape.safeParse(raw);
  if (r.success) return r.data as unknown as CniRequest;
  const issue = r.error.issues[0];
  const field = issue.path.join(".");
  return new CniError(
    CNI_CODE.decodeFailure,
    `The agent got a malformed request: ${field ? `${field}: ` : ""}${issue.message}`,
  );
}

export function agentApp(api: AgentApi): Hono {
  const app = new Hono();
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_AGENT_BODY_BYTES,
      onError: (c) => {
        const msg = `The request body exceeds ${MAX_AGENT_BODY_BYTES} bytes`;
        if (c.req.path === "/v1/cni/exec") return wireReply(c, execReply(tooLarge(msg), 400));
        if (c.req.path.startsWith("/v1/cni/")) {
          return c.json(new CniError(CNI_CODE.decodeFailure, msg).toBody(), 400);
        }
        return c.json({ error: { code: "bad_request", message: msg } }, 400);
      },
    }),
  );
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    const why = api.notReady();
    return why ? c.json({ status: "not ready", reason: why }, 503) : c.json({ status: "ready" });
  });
  if (api.extra) mountExtraInterfaces(app, api.extra, api.log);
  app.post("/v1/cni/exec", async (c) => {
    let text: string;
    try {
      text = await c.req.text();
    } catch (err) {
      api.log.info("cni request not read: the client went away", { err: String(err) });
      return c.body(null, 400);
    }
    const exec = parseExec(text, c.req.header("Knitter-Wire"));
    if ("refused" in exec) {
      api.log.warn("cni request refused", { msg: exec.refused.stdout });
      return wireReply(c, execReply(exec.refused, 400));
    }
    let ran = false;
    const out = await execCni(exec.env, exec.stdin, async (req) => {
      const shaped = shapedRequest(req);
      if (shaped instanceof CniError) throw shaped;
      ran = true;
      return await handle(api, req.command, shaped);
    });
    // A call refused before it ran (bad variables or config) is counted as an error, untimed.
    if (!ran && out.code !== undefined) api.metrics?.cniCall(out.command, null, out.code);
    if (out.code !== undefined) {
      api.log.warn("cni failed", {
        command: out.command,
        container: exec.env.CNI_CONTAINERID,
        code: out.code,
        msg: out.stdout.trim(),
      });
    }
    return wireReply(c, execReply(out));
  });
  app.post("/v1/cni/:command", async (c) => {
    const command = c.req.param("command").toUpperCase();
    let text: string;
    try {
      text = await c.req.text();
    } catch (err) {
      // The plugin went away mid-request (the runtime killed it): nothing to answer, nothing done.
      api.log.info("cni request not read: the client went away", { command, err: String(err) });
      return c.body(null, 400);
    }
    const req = cniRequest(text);
    if (req instanceof CniError) {
      api.log.warn("cni request refused", { command, msg: req.message });
      api.metrics?.cniCall(command, null, req.code);
      return c.json(req.toBody(), 400);
    }
    try {
      return c.json(await handle(api, command, req) ?? {});
    } catch (err) {
      const e = toCniError(err, `${command} failed`);
      api.log.warn("cni failed", {
        command,
        container: req.containerId,
        code: e.code,
        msg: e.message,
      });
      return c.json(e.toBody(), statusOf(e.code));
    }
  });
  return app;
}

function wireReply(c: Context, r: ExecReply): Response {
  return c.body(r.body, r.status, r.headers);
}

/** Runs one command, counted in the metrics (time and error code) and logged at debug. */
async function handle(api: AgentApi, command: string, req: CniRequest): Promise<unknown> {
  const start = performance.now();
  try {
    const body = await dispatch(api, command, req);
    api.metrics?.cniCall(command, (performance.now() - start) / 1000);
    api.log.debug("cni", {
      command,
      container: req.containerId,
      ms: Math.round(performance.now() - start),
    });
    return body;
  } catch (err) {
    const e = toCniError(err, `${command} failed`);
    api.metrics?.cniCall(command, (performance.now() - start) / 1000, e.code);
    throw e;
  }
}

async function dispatch(api: AgentApi, command: string, req: CniRequest): Promise<unknown> {
  switch (command) {
    case "ADD":
      return await api.attacher.add(req);
    case "DEL":
      return await api.attacher.del(req);
    case "CHECK":
      return await api.attacher.check(req);
    case "GC":
      return await api.attacher.gc(req);
    case "STATUS": {
      const why = api.notReady();
      if (why) throw new CniError(CNI_CODE.notAvailable, `The knitter agent is not ready: ${why}`);
      return {};
    }
    default:
      throw new CniError(CNI_CODE.invalidEnvironment, `Unknown CNI command "${command}"`);
  }
}
