/**
 * The agent's API for the plugin: HTTP on a unix socket only root may use. One route per CNI
 * command; answers are CNI results or CNI error bodies, never anything else.
 */
import { Hono } from "hono";
import type { Logger } from "@knitter/common";
import type { Attacher } from "./attach.ts";
import { CNI_CODE, CniError, toCniError } from "./cni_errors.ts";
import type { ExtraInterfaces } from "./extra_interface.ts";
import { mountExtraInterfaces } from "./extra_interface_routes.ts";
import type { CniRequest } from "./pod_request.ts";

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
}

export function agentApp(api: AgentApi): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    const why = api.notReady();
    return why ? c.json({ status: "not ready", reason: why }, 503) : c.json({ status: "ready" });
  });
  if (api.extra) mountExtraInterfaces(app, api.extra, api.log);
  app.post("/v1/cni/:command", async (c) => {
    const command = c.req.param("command").toUpperCase();
    let req: CniRequest;
    try {
      req = await c.req.json();
    } catch {
      const err = new CniError(CNI_CODE.decodeFailure, "The agent got a request that is not JSON");
      return c.json(err.toBody(), 400);
    }
    const start = performance.now();
    try {
      const body = await dispatch(api, command, req);
      api.log.debug("cni", {
        command,
        container: req.containerId,
        ms: Math.round(performance.now() - start),
      });
      return c.json(body ?? {});
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
