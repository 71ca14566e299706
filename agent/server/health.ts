/**
 * The agent's probes for the kubelet (`/healthz`, `/readyz` on a loopback TCP port, see
 * ../common/probes.ts). Each asks the agent's own unix socket, the plugin's way in, so a probe
 * passes only when the plugin would be answered: healthy when the socket serves, ready when the
 * agent is registered and synced with the manager.
 */
import type { ProbeChecks } from "@knitter/common";

const TIMEOUT_MS = 3000;

export function agentProbeChecks(socket: string): ProbeChecks & { close(): void } {
  const client = Deno.createHttpClient({ proxy: { transport: "unix", path: socket } });
  const ask = async (path: string): Promise<string[]> => {
    let r: Response;
    try {
      r = await fetch(`http://agent${path}`, { client, signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (err) {
      const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
      return [`the plugin's socket ${socket} does not answer (${why})`];
    }
    const body = await r.json().catch(() => ({})) as { reason?: string };
    if (r.ok) return [];
    return [body.reason ?? `the plugin's socket answers ${r.status}`];
  };
  return {
    healthz: () => ask("/healthz"),
    readyz: () => ask("/readyz"),
    close: () => client.close(),
  };
}
