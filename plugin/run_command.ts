/**
 * One plugin invocation, free of process I/O so tests can drive it: environment and stdin in,
 * stdout text, exit code and an optional debug line out.
 */
import { type AgentCall, callAgent } from "./agent_client.ts";
import { checkConfig, decodeConfig, sniffVersion } from "./config.ts";
import { type CniEnv, type Getenv, readCniEnv } from "./env.ts";
import { CNI_CODE, CniError, convertResult, LATEST_CNI_VERSION } from "./contract.ts";
import { fromAgentError, toCniError } from "./errors.ts";
import {
  type AgentCommand,
  agentRoute,
  type CniRequest,
  DEFAULT_AGENT_SOCKET,
} from "./protocol.ts";
import { versionReply } from "./version.ts";

export interface PluginOutput {
  stdout: string;
  exitCode: number;
  /** One line for stderr, present only when debug logging is on. */
  log?: string;
}

function parseAgentJson(text: string): Record<string, unknown> | undefined {
  if (text.trim() === "") return undefined;
  const v = JSON.parse(text);
  return typeof v === "object" && v !== null && !Array.isArray(v) ? v : undefined;
}

/** Set as early as possible so that failures are logged too. */
interface CallState {
  debug: boolean;
}

/** Everything but VERSION: check the config, ask the agent, return what to print. */
async function forward(
  env: CniEnv & { command: AgentCommand },
  stdin: string,
  getenv: Getenv,
  call: AgentCall,
  state: CallState,
): Promise<string> {
  const raw = decodeConfig(stdin);
  state.debug ||= raw.logLevel === "debug";
  const conf = checkConfig(
    raw,
    getenv("KNITTER_AGENT_SOCKET") || DEFAULT_AGENT_SOCKET,
    env.command === "STATUS",
  );
  const request: CniRequest = {
    command: env.command,
    containerId: env.containerId,
    netns: env.netns,
    ifName: env.ifName,
    args: env.args,
    path: env.path,
    config: conf.raw,
  };
  const reply = await call(
    conf.agentSocket,
    agentRoute(env.command),
    JSON.stringify(request),
    conf.timeoutMs,
  );
  if (reply.status < 200 || reply.status > 299) {
    const err = fromAgentError(env.command, conf.agentSocket, reply.status, reply.body);
    // DEL of something already gone is success by the spec, whoever noticed it was gone.
    if (env.command === "DEL" && err.code === CNI_CODE.unknownContainer) return "";
    throw err;
  }
  // DEL, CHECK, GC and STATUS print nothing on success.
  if (env.command !== "ADD") return "";
  let result: Record<string, unknown> | undefined;
  try {
    result = parseAgentJson(reply.body);
  } catch { /* reported below */ }
  if (!result) {
    throw new CniError(
      CNI_CODE.internal,
      `the knitter agent at ${conf.agentSocket} answered ADD without a result`,
      `expected a CNI result object, got ${JSON.stringify(reply.body.slice(0, 200))}`,
    );
  }
  return JSON.stringify(convertResult(result, conf.cniVersion));
}

function debugLine(env: Partial<CniEnv>, started: number, outcome: string): string {
  return JSON.stringify({
    time: new Date().toISOString(),
    level: "debug",
    component: "knitter-plugin",
    msg: env.command ?? "?",
    containerId: env.containerId,
    ifName: env.ifName,
    netns: env.netns,
    outcome,
    ms: Math.round((performance.now() - started) * 10) / 10,
  });
}

export async function runCommand(
  getenv: Getenv,
  stdin: string,
  call: AgentCall = callAgent,
): Promise<PluginOutput> {
  const started = performance.now();
  const state: CallState = { debug: getenv("KNITTER_PLUGIN_DEBUG") === "1" };
  let env: Partial<CniEnv> = { command: getenv("CNI_COMMAND") as CniEnv["command"] };
  // Errors are printed in the config's version when it has a usable one.
  const replyVersion = sniffVersion(stdin) ?? LATEST_CNI_VERSION;
  try {
    const checked = readCniEnv(getenv);
    env = checked;
    if (checked.command === "VERSION") {
      return { stdout: versionReply(stdin), exitCode: 0 };
    }
    const command = checked as CniEnv & { command: AgentCommand };
    const stdout = await forward(command, stdin, getenv, call, state);
    return { stdout, exitCode: 0, log: state.debug ? debugLine(env, started, "ok") : undefined };
  } catch (e) {
    const err = toCniError(e, env.command ?? "ADD");
    return {
      stdout: JSON.stringify(err.toBody(replyVersion)),
      exitCode: 1,
      log: state.debug ? debugLine(env, started, `error ${err.code}: ${err.message}`) : undefined,
    };
  }
}
