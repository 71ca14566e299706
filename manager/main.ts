/** knitter-manager entry point. */
import { ConfigError, loadConfig, USAGE } from "./config.ts";
import { startManager } from "./server.ts";
import { StoreUnavailableError } from "./store/store.ts";

if (import.meta.main) {
  try {
    const { config, help } = await loadConfig(Deno.args);
    if (help) {
      console.log(USAGE);
      Deno.exit(0);
    }
    const manager = await startManager(config);
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        manager.shutdown().then(() => Deno.exit(0));
      });
    }
    await manager.finished;
  } catch (err) {
    if (err instanceof ConfigError || err instanceof StoreUnavailableError) {
      console.error(`knitter-manager: ${err.message}`);
      Deno.exit(2);
    }
    throw err;
  }
}
