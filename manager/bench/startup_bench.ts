/** Time from process start to a ready manager (and to its first allocation) on a full store. */
import { putPort } from "../service/ports/mod.ts";
import { ADMIN_TOKEN, benchContext, spawnManager, waitReady, withTempDir } from "./support.ts";

export interface StartupFigures {
  ports: number;
  fillSeconds: number;
  readyMs: number;
  firstAllocationMs: number;
}

export async function startupWithPorts(ports: number): Promise<StartupFigures> {
  return await withTempDir(async (dir) => {
    const path = `${dir}/startup.kv`;
    const ctx = await benchContext(path);
    const fillStart = performance.now();
    // Fill with real allocations, several networks' worth of concurrency.
    const batch = 64;
    for (let i = 0; i < ports; i += batch) {
      const jobs = [];
      for (let j = i; j < Math.min(ports, i + batch); j++) {
        jobs.push(
          putPort(ctx, {
            principal: { scope: "admin" },
            tenant: "bench",
            network: "big",
            id: `fill-${j}`,
            body: { node: `n${j % 100}` },
          }),
        );
      }
      await Promise.all(jobs);
    }
    const fillSeconds = (performance.now() - fillStart) / 1000;
    ctx.store.close();

    const since = performance.now();
    const m = await spawnManager(dir, path);
    try {
      const readyMs = await waitReady(m.url, since);
      const r = await fetch(`${m.url}/api/v1/tenants/bench/networks/big/ports/after-restart`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: "{}",
      });
      const body = await r.json();
      if (r.status !== 201) {
        throw new Error(`allocation after restart failed: ${JSON.stringify(body)}`);
      }
      return { ports, fillSeconds, readyMs, firstAllocationMs: performance.now() - since };
    } finally {
      await m.stop();
    }
  });
}
