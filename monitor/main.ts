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
    // SIGUSR2: one line of counters and memory (after a collection when V8 exposes gc).
    Deno.addSignalListener("SIGUSR2", () => {
      (globalThis as { gc?: () => void }).gc?.();
      const m = Deno.memoryUsage();
      const mb = (n: number) => Math.round(n / 1048576);
      console.error(JSON.stringify({
        time: new Date().toISOString(),
        level: "info",
        component: "monitor",
        msg: "stats",
        ...monitor.stats(),
        rssMb: mb(m.rss),
        heapUsedMb: mb(m.heapUsed),
        externalMb: mb(m.external),
      }));
    });
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
