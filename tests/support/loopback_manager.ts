/** A manager process's worth in this process: loopback, a Deno KV file in a temp dir, given tokens. */
import { ConfigSchema, type TokenConfig } from "../../manager/config.ts";
import { startManager } from "../../manager/mod.ts";
import type { RunningManager } from "../../manager/server.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";

/** Starts it (`more`: further settings of the manager's); `cleanup` shuts it down. */
export async function startLoopbackManager(
  cleanup: Cleanup,
  tokens: TokenConfig[],
  more: Record<string, unknown> = {},
): Promise<RunningManager> {
  const dir = await cleanup.tempDir();
  const manager = await startManager(ConfigSchema.parse({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens,
    vniRanges: ["5000-5999"],
    logLevel: "error",
    ...more,
  }));
  cleanup.defer(() => manager.shutdown());
  return manager;
}
