/**
 * `/healthz` and `/readyz` over plain HTTP on a TCP address (loopback by default), for the
 * kubelet's liveness and readiness probes: 200 `{"status":"ok"}` / `{"status":"ready"}`, else 503
 * with the reasons; with `metrics`, also `/metrics` for Prometheus (common/metrics.ts). Nothing
 * else is served there: no token, no API, no data beyond the reasons and the metrics.
 */

/**
 * The text exposition format prom-client writes (its `Registry.PROMETHEUS_CONTENT_TYPE`), written
 * out so that a probe listener never loads prom-client for it.
 */
const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export interface ProbeAddress {
  hostname: string;
  /** 0: any free port (the server's `url` says which). */
  port: number;
}

export interface ProbeChecks {
  /** Why the process should be restarted; empty when healthy. */
  healthz(): Promise<string[]> | string[];
  /** Why it should get no work yet; empty when ready. */
  readyz(): Promise<string[]> | string[];
  /** The Prometheus text exposition of the component's registry; absent: no `/metrics`. */
  metrics?(): Promise<string>;
}

export interface ProbeServer {
  url: string;
  shutdown(): Promise<void>;
}

export function serveProbes(address: ProbeAddress, checks: ProbeChecks): ProbeServer {
  const server = Deno.serve(
    { hostname: address.hostname, port: address.port, onListen: () => {} },
    async (req) => {
      const path = new URL(req.url).pathname;
      if (req.method !== "GET" && req.method !== "HEAD") return answer(405, { status: "GET only" });
      if (path === "/metrics" && checks.metrics) return await metrics(checks.metrics);
      const check = path === "/healthz"
        ? checks.healthz
        : path === "/readyz"
        ? checks.readyz
        : null;
      if (!check) {
        const paths = ["/healthz", "/readyz", ...(checks.metrics ? ["/metrics"] : [])];
        return answer(404, { status: "not found", paths });
      }
      let reasons: string[];
      try {
        reasons = await check();
      } catch (err) {
        reasons = [`the check failed: ${(err as Error)?.message ?? err}`];
      }
      if (reasons.length > 0) {
        return answer(503, {
          status: path === "/healthz" ? "unhealthy" : "not ready",
          reasons,
        });
      }
      return answer(200, { status: path === "/healthz" ? "ok" : "ready" });
    },
  );
  const addr = server.addr as Deno.NetAddr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return { url: `http://${host}:${addr.port}`, shutdown: () => server.shutdown() };
}

async function metrics(render: () => Promise<string>): Promise<Response> {
  try {
    return new Response(await render(), {
      headers: { "content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store" },
    });
  } catch (err) {
    return answer(500, { status: `the metrics failed: ${(err as Error)?.message ?? err}` });
  }
}

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}
