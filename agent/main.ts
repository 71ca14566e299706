/** knitter-agent entry point. */
import { runDaemon } from "@knitter/common/daemon_start";
import { loadAgentConfig, USAGE } from "./config.ts";
import { startAgent } from "./daemon.ts";

if (import.meta.main) {
  await runDaemon({
    name: "knitter-agent",
    usage: USAGE,
    load: (args) => loadAgentConfig(args),
    start: startAgent,
  });
}
