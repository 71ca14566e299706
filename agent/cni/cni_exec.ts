/**
 * One CNI call as the plugin forwards it: the runtime's CNI_* variables and stdin as they came in,
 * the text for the plugin to print and its exit status out. Everything a CNI plugin decides is
 * decided here (the checks, the version of the answer, the error codes, DEL of the unknown as
 * success), so the native forwarder on the node (plugin/knitter.c) never has to change with it.
 * The wire around it (POST /v1/cni/exec) is the server's; see "The plugin's wire" in README.md.
 */
import {
  CNI_CODE,
  CNI_VERSIONS,
  CniError,
  convertResult,
  LATEST_CNI_VERSION,
} from "@knitter/plugin/contract";
import type { AgentCommand, CniRequest } from "@knitter/plugin/protocol";
import { checkConfig, decodeConfig, sniffVersion } from "./cni_config.ts";
import { readCniEnv } from "./cni_env.ts";
import { toCniError } from "./cni_errors.ts";

/** What the plugin prints and how it exits; `code` is the CNI error code when it failed. */
export interface ExecAnswer {
  stdout: string;
  exitCode: number;
  command: string;
  code?: number;
}

/** Runs one command (the agent's attacher, or STATUS): a result for ADD, nothing else. */
export type CniHandler = (req: CniRequest) => Promise<unknown>;

/** The VERSION answer: echoes the asked version (as the spec says) and never fails. */
export function versionReply(stdin: string): string {
  let asked: unknown;
  try {
    asked = (JSON.parse(stdin) as { cniVersion?: unknown } | null)?.cniVersion;
  } catch { /* an empty or odd probe still gets an answer */ }
  const cniVersion = typeof asked === "string" && asked !== "" ? asked : LATEST_CNI_VERSION;
  return JSON.stringify({ cniVersion, supportedVersions: CNI_VERSIONS });
}

function isResult(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

async function answer(
  env: Record<string, string>,
  stdin: string,
  handle: CniHandler,
): Promise<string> {
  const cni = readCniEnv((name) => env[name]);
  if (cni.command === "VERSION") return versionReply(stdin);
  const command = cni.command as AgentCommand;
  const config = checkConfig(decodeConfig(stdin));
  const request: CniRequest = { ...cni, command, config };
  const result = await handle(request);
  // DEL, CHECK, GC and STATUS print nothing on success.
  if (command !== "ADD") return "";
  if (!isResult(result)) {
    throw new CniError(CNI_CODE.internal, "ADD finished without a result");
  }
  return JSON.stringify(convertResult(result, config.cniVersion));
}

/** The call from the runtime's input to the plugin's output; never throws. */
export async function execCni(
  env: Record<string, string>,
  stdin: string,
  handle: CniHandler,
): Promise<ExecAnswer> {
  const command = env.CNI_COMMAND ?? "";
  try {
    const out = await answer(env, stdin, handle);
    return { stdout: out === "" ? "" : `${out}\n`, exitCode: 0, command };
  } catch (err) {
    const e = toCniError(err, `${command || "the CNI call"} failed`);
    // DEL of something already gone is success by the spec, whoever noticed it was gone.
    if (command === "DEL" && e.code === CNI_CODE.unknownContainer) {
      return { stdout: "", exitCode: 0, command };
    }
    // Errors are printed in the config's version when it has a usable one.
    const version = sniffVersion(stdin) ?? LATEST_CNI_VERSION;
    return {
      stdout: `${JSON.stringify(e.toBody(version))}\n`,
      exitCode: 1,
      command,
      code: e.code,
    };
  }
}
