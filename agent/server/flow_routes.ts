/**
 * The agent's flow routes for `knitctl flows diff`: the bridge's flows against the computed set,
 * on demand, with what self-healing did so far.
 *
 *   GET /v1/flows/diff -> {bridge, computed, installed, missing: [line], extra: [line], ...stats}
 */
import type { Hono } from "hono";
import type { Healer } from "../dataplane/healer.ts";

export function mountFlowRoutes(app: Hono, healer: Healer): void {
  app.get("/v1/flows/diff", async (c) => {
    try {
      const diff = await healer.diff();
      return c.json({ ...diff, ...healer.stats });
    } catch (err) {
      const message = `Cannot compare the flows: ${(err as Error).message ?? err}`;
      return c.json({ error: { code: "failed", message } }, 500);
    }
  });
}
