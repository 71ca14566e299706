/**
 * `/healthz` and `/readyz` over plain HTTP on a TCP address (loopback by default), for the
 * kubelet's liveness and readiness probes: 200 `{"status":"ok"}` / `{"status":"ready"}`, else 503
 * with the reasons. Nothing else is served there: no token, no API, no data beyond the reasons.
 */

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
      const check = path === "/healthz"
        ? checks.healthz
        : path === "/readyz"
        ? checks.readyz
        : null;
      if (!check) return answer(404, { status: "not found", paths: ["/healthz", "/readyz"] });
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

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}
