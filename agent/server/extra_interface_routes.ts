/** The agent's routes for knitctl attach / detach: JSON in, the interface or an error body out. */
import type { Hono } from "hono";
import type { Logger } from "@knitter/common";
import type { z } from "zod";
import { ExtraInterfaceError, type ExtraInterfaces } from "../extra/extra_interface.ts";
import { AttachSchema, DetachSchema, firstIssue } from "../extra/extra_interface_request.ts";

export function mountExtraInterfaces(app: Hono, extra: ExtraInterfaces, log: Logger): void {
  app.get("/v1/interfaces", async (c) => c.json({ items: await extra.list() }));
  app.post("/v1/interfaces", async (c) => {
    const body = await parse(AttachSchema, await c.req.text());
    if (body instanceof Response) return body;
    return await answer(log, "attach", async () => {
      const r = await extra.attach(body);
      return c.json(r.view, r.created ? 201 : 200);
    });
  });
  app.delete("/v1/interfaces", async (c) => {
    const body = await parse(DetachSchema, await c.req.text());
    if (body instanceof Response) return body;
    return await answer(log, "detach", async () => c.json(await extra.detach(body)));
  });
}

function parse<T extends z.ZodType>(schema: T, text: string): z.infer<T> | Response {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return errorResponse(new ExtraInterfaceError(400, "bad_request", "The body is not JSON"));
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    return errorResponse(new ExtraInterfaceError(400, "bad_request", firstIssue(r.error)));
  }
  return r.data;
}

async function answer(log: Logger, what: string, fn: () => Promise<Response>): Promise<Response> {
  try {
    return await fn();
  } catch (err) {
    const e = err instanceof ExtraInterfaceError
      ? err
      : new ExtraInterfaceError(500, "failed", `${what} failed: ${(err as Error).message}`);
    log.warn(`${what} failed`, { status: e.status, msg: e.message });
    return errorResponse(e);
  }
}

function errorResponse(e: ExtraInterfaceError): Response {
  return Response.json({ error: { code: e.code, message: e.message } }, { status: e.status });
}
