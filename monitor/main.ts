/** knitter-monitor entry point. */
import { runDaemon } from "@knitter/common/daemon_start";
import { loadMonitorConfig, USAGE } from "./config.ts";
import { type RunningMonitor, startMonitor } from "./monitor.ts";

if (import.meta.main) {
  await runDaemon({
    name: "knitter-monitor",
    usage: USAGE,
    load: (args) => loadMonitorConfig(args),
    start: (config) => startMonitor(config),
    running: statsOnSignal,
  });
}

/** SIGUSR2: one line of counters and memory (after a collection when V8 exposes gc). */
function statsOnSignal(monitor: RunningMonitor): void {
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
}
