/** knitter-monitor entry point. */
import { loadMonitorConfig, MonitorConfigError, USAGE } from "./config.ts";
import { startMonitor } from "./monitor.ts";

if (import.meta.main) {
  try {
    const { config, help } = await loadMonitorConfig(Deno.args);
    if (help) {
      console.log(USAGE);
      Deno.exit(0);
    }
    const monitor = await startMonitor(config);
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        monitor.stop().then(() => Deno.exit(0));
      });
    }
  } catch (err) {
    if (err instanceof MonitorConfigError) {
      console.error(`knitter-monitor: ${err.message}`);
      Deno.exit(2);
    }
    throw err;
  }
}
