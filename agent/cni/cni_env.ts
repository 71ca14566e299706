/**
 * The CNI_* environment the runtime gave the plugin, which forwards it as it is: which variables
 * each command needs and the spec's rules for their values (the rules libcni applies before it
 * execs a plugin).
 */
import {
  CNI_COMMANDS,
  CNI_NAME_RE,
  type CniCommand,
  ifNameProblem,
} from "@knitter/plugin/contract";
import { invalidEnv } from "./cni_errors.ts";

export interface CniEnv {
  command: CniCommand;
  /** "" when unset (allowed for VERSION, GC and STATUS). */
  containerId: string;
  /** "" when unset (allowed for DEL: the netns may already be gone). */
  netns: string;
  ifName: string;
  args: Record<string, string>;
  path: string;
}

export type Getenv = (name: string) => string | undefined;

const REQUIRED: Record<CniCommand, string[]> = {
  ADD: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  CHECK: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  DEL: ["CNI_CONTAINERID", "CNI_IFNAME"],
  GC: [],
  STATUS: [],
  VERSION: [],
};

/** `K=V;K2=V2` → object. A value may itself contain "="; empty segments are ignored. */
export function parseCniArgs(raw: string): Record<string, string> | string {
  const args: Record<string, string> = {};
  for (const pair of raw.split(";")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    if (eq <= 0) return `"${pair}" is not KEY=VALUE`;
    args[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return args;
}

/** Reads and checks the environment, reporting every bad variable at once. */
export function readCniEnv(getenv: Getenv): CniEnv {
  const command = getenv("CNI_COMMAND") ?? "";
  if (!(CNI_COMMANDS as readonly string[]).includes(command)) {
    const problem = command === ""
      ? "CNI_COMMAND is not set"
      : `CNI_COMMAND "${command}" is not one of ${CNI_COMMANDS.join(", ")}`;
    throw invalidEnv(["CNI_COMMAND"], [problem]);
  }
  const cmd = command as CniCommand;
  const names: string[] = [];
  const problems: string[] = [];
  const bad = (name: string, problem: string) => {
    names.push(name);
    problems.push(problem);
  };
  for (const name of REQUIRED[cmd]) {
    if (!getenv(name)) bad(name, `${name} is required for ${cmd}`);
  }
  const containerId = getenv("CNI_CONTAINERID") ?? "";
  if (containerId && !CNI_NAME_RE.test(containerId)) {
    bad("CNI_CONTAINERID", `CNI_CONTAINERID "${containerId}" must match ${CNI_NAME_RE.source}`);
  }
  const ifName = getenv("CNI_IFNAME") ?? "";
  const ifProblem = ifName ? ifNameProblem(ifName) : undefined;
  if (ifProblem) bad("CNI_IFNAME", `CNI_IFNAME ${ifProblem}`);
  const args = parseCniArgs(getenv("CNI_ARGS") ?? "");
  if (typeof args === "string") bad("CNI_ARGS", `CNI_ARGS: ${args}`);
  if (names.length > 0) throw invalidEnv(names, problems);
  return {
    command: cmd,
    containerId,
    netns: getenv("CNI_NETNS") ?? "",
    ifName,
    args: args as Record<string, string>,
    path: getenv("CNI_PATH") ?? "",
  };
}
