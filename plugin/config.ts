/**
 * The network configuration on stdin: decoded, version-checked and checked for the keys the
 * plugin itself relies on. Everything else is the agent's to judge, so it passes through as is.
 */
import { CNI_NAME_RE, type CniVersion, isSupportedVersion } from "./contract.ts";
import { decodeFailed, incompatibleVersion, invalidConfig } from "./errors.ts";
import type { KnitterNetConf } from "./protocol.ts";

export interface PluginConfig {
  cniVersion: CniVersion;
  agentSocket: string;
  timeoutMs: number;
  /** The object as decoded, for the agent. */
  raw: KnitterNetConf;
}

const DEFAULT_TIMEOUT_S = 30;
/** STATUS is a readiness probe; a slow answer is as good as none. */
const STATUS_TIMEOUT_S = 5;

/** stdin → JSON object, or code 6. */
export function decodeConfig(text: string): Record<string, unknown> {
  if (text.trim() === "") {
    throw decodeFailed("stdin is empty; the runtime must pass the network configuration as JSON");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw decodeFailed(`stdin is not JSON: ${(e as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw decodeFailed("stdin must be a JSON object (one plugin's configuration)");
  }
  return value as Record<string, unknown>;
}

/** The config's version if it is one we speak, without failing: errors are printed in it. */
export function sniffVersion(text: string): CniVersion | undefined {
  try {
    const v = (JSON.parse(text) as { cniVersion?: unknown })?.cniVersion;
    return isSupportedVersion(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function checkNetworks(networks: unknown): void {
  if (networks === undefined) return;
  const hint = 'e.g. ["blue", {"name": "red", "interface": "net1"}]';
  if (!Array.isArray(networks)) {
    throw invalidConfig("networks must be a list of network names or objects", hint);
  }
  networks.forEach((n, i) => {
    const name = typeof n === "string" ? n : (n as { name?: unknown } | null)?.name;
    if (typeof name !== "string" || name === "") {
      throw invalidConfig(`networks[${i}] must be a network name or an object with "name"`, hint);
    }
  });
}

function timeoutSeconds(conf: Record<string, unknown>, isStatus: boolean): number {
  const t = conf.agentTimeoutSeconds;
  if (t === undefined) return isStatus ? STATUS_TIMEOUT_S : DEFAULT_TIMEOUT_S;
  if (typeof t !== "number" || !(t > 0)) {
    throw invalidConfig(
      "agentTimeoutSeconds must be a positive number",
      `got ${JSON.stringify(t)}`,
    );
  }
  return t;
}

/**
 * Checks the decoded config. `defaultSocket` applies when the config has no `agentSocket`.
 * Missing or unknown cniVersion is code 1 (the runtime then knows to pick another version);
 * other problems are code 7.
 */
export function checkConfig(
  conf: Record<string, unknown>,
  defaultSocket: string,
  isStatus = false,
): PluginConfig {
  const version = conf.cniVersion;
  if (version === undefined || (typeof version === "string" && !isSupportedVersion(version))) {
    throw incompatibleVersion(version);
  }
  if (typeof version !== "string") {
    throw invalidConfig("cniVersion must be a string", `got ${JSON.stringify(version)}`);
  }
  const name = conf.name;
  if (typeof name !== "string" || !CNI_NAME_RE.test(name)) {
    throw invalidConfig(
      name === undefined ? "the network configuration has no name" : "name is not a valid name",
      `name must be a string matching ${CNI_NAME_RE.source}; got ${JSON.stringify(name)}`,
    );
  }
  if (typeof conf.type !== "string" || conf.type === "") {
    throw invalidConfig('the plugin configuration has no type (it should be "knitter")');
  }
  // Only an absent key means the default: the wrapper reads the same key and grants that socket.
  const socket = conf.agentSocket === undefined ? defaultSocket : conf.agentSocket;
  if (typeof socket !== "string" || !socket.startsWith("/")) {
    throw invalidConfig(
      "agentSocket must be an absolute path",
      `got ${JSON.stringify(socket)}; the default is /run/knitter/agent.sock`,
    );
  }
  checkNetworks(conf.networks);
  return {
    cniVersion: version as CniVersion,
    agentSocket: socket,
    timeoutMs: timeoutSeconds(conf, isStatus) * 1000,
    raw: conf as KnitterNetConf,
  };
}
