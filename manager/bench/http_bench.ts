/** Allocations over HTTP against a manager in its own process, from C concurrent clients. */
import {
  ADMIN_TOKEN,
  benchContext,
  percentile,
  spawnManager,
  waitReady,
  withTempDir,
} from "./support.ts";

export interface HttpFigures {
  clients: number;
  requests: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

/** `more`: manager configuration over the bench's own (e.g. the history's retention). */
export async function httpAllocations(
  clients: number,
  requests: number,
  more: Record<string, unknown> = {},
): Promise<HttpFigures> {
  return await withTempDir(async (dir) => {
    const path = `${dir}/http.kv`;
    // Every client allocates from the same network: the contended case, not one network each.
    (await benchContext(path)).store.close();
    const m = await spawnManager(dir, path, more);
    try {
      await waitReady(m.url, performance.now());
      const { ms, latencies, errors } = await putPorts(m.url, { clients, requests, first: 0 });
      const seconds = ms / 1000;
      latencies.sort((a, b) => a - b);
      return {
        clients,
        requests,
        perSecond: requests / seconds,
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
        errors,
      };
    } finally {
      await m.stop();
    }
  });
}

export interface PortsRun {
  ms: number;
  /** Each request's, in the order they ended. */
  latencies: number[];
  /** Answers other than 201. */
  errors: number;
}

/** `requests` PUTs of new ports p-{first}... from `clients` concurrent clients, timed. */
export async function putPorts(
  url: string,
  run: { clients: number; requests: number; first: number },
): Promise<PortsRun> {
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const body = JSON.stringify({ node: "n1", interface: "eth0" });
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const worker = async () => {
    while (next < run.requests) {
      const i = run.first + next++;
      const t = performance.now();
      const r = await fetch(`${url}/api/v1/tenants/bench/networks/big/ports/p-${i}`, {
        method: "PUT",
        headers,
        body,
      });
      await r.arrayBuffer();
      latencies.push(performance.now() - t);
      if (r.status !== 201) errors++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: run.clients }, worker));
  return { ms: performance.now() - start, latencies, errors };
}
