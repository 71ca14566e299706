/**
 * The network configuration the runtime gave the plugin on stdin (forwarded as it is): decoded,
 * version-checked and checked for the keys knitter reads at this step. Everything else is judged
 * where it is used (pod_request.ts), so it passes through as is.
 */
import { CNI_NAME_RE, type CniVersion, isSupportedVersion } from "@knitter/plugin/contract";
import type { KnitterNetConf } from "@knitter/plugin/protocol";
import { decodeFailed, incompatibleVersion, invalidConfig } from "./cni_errors.ts";

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

/** The keys the plugin reads to reach the agent: it uses a default for a bad one, the agent says so. */
function checkPluginKeys(conf: Record<string, unknown>): void {
  const socket = conf.agentSocket;
  if (socket !== undefined && (typeof socket !== "string" || !socket.startsWith("/"))) {
    throw invalidConfig(
      "agentSocket must be an absolute path",
      `got ${JSON.stringify(socket)}; the default is /run/knitter/agent.sock`,
    );
  }
  const t = conf.agentTimeoutSeconds;
  if (t !== undefined && (typeof t !== "number" || !(t > 0) || t > 86400)) {
    throw invalidConfig(
      "agentTimeoutSeconds must be a positive number of seconds, at most 86400",
      `got ${JSON.stringify(t)}`,
    );
  }
}

/**
 * Checks the decoded config. Missing or unknown cniVersion is code 1 (the runtime then knows to
 * pick another version); other problems are code 7.
 */
export function checkConfig(conf: Record<string, unknown>): KnitterNetConf & {
  cniVersion: CniVersion;
} {
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
  checkPluginKeys(conf);
  checkNetworks(conf.networks);
  return conf as KnitterNetConf & { cniVersion: CniVersion };
}
