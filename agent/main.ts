/** knitter-agent entry point. */
import { AgentConfigError, loadAgentConfig, USAGE } from "./config.ts";
import { startAgent } from "./daemon.ts";

if (import.meta.main) {
  try {
    const { config, help } = await loadAgentConfig(Deno.args);
    if (help) {
      console.log(USAGE);
      Deno.exit(0);
    }
    const agent = await startAgent(config);
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        agent.stop().then(() => Deno.exit(0));
      });
    }
  } catch (err) {
    if (err instanceof AgentConfigError) {
      console.error(`knitter-agent: ${err.message}`);
      Deno.exit(2);
    }
    throw err;
  }
}
