/**
 * Drives CNI plugins the way a container runtime does: env + stdin config per plugin of a
 * conflist, ADD in order passing each result on as prevResult, the final result cached for CHECK
 * and DEL, DEL in reverse order. Plugins run inside the node's netns, as kubelet runs them on the
 * host; our plugin is the built forwarder (plugin/build/knitter), as a node has it in /opt/cni/bin.
 */
import { run } from "@knitter/common";
import { buildPlugin } from "../../plugin/build.ts";

const PLUGIN = await buildPlugin();
/** Where the runtime finds plugins: ours first, then Debian's reference plugins. */
export const CNI_BIN_DIR = PLUGIN.slice(0, PLUGIN.lastIndexOf("/"));
export const REFERENCE_PLUGINS = "/usr/lib/cni";

export interface ConfList {
  cniVersion: string;
  name: string;
  plugins: Record<string, unknown>[];
}

export interface CniCall {
  code: number;
  // deno-lint-ignore no-explicit-any
  out: any;
  stderr: string;
}

export interface Attachment {
  containerId: string;
  netns: string;
  ifName: string;
  args?: Record<string, string>;
  /** What the runtime knows per capability (e.g. portMappings), given to plugins that ask. */
  runtimeConfig?: Record<string, unknown>;
}

/** No plugin call may hang a test: the plugin's own agent timeout is 30 s. */
const PLUGIN_TIMEOUT_MS = 45_000;

export class CniRuntime {
  private readonly cache = new Map<string, unknown>();

  constructor(
    /** The node's netns name (plugins run there). */
    private readonly nodeNetns: string,
    private readonly agentSocket: string,
  ) {}

  /** Runs one plugin binary for one command; `conf` goes to stdin (a string as it is). */
  async exec(
    command: string,
    att: Partial<Attachment>,
    conf: Record<string, unknown> | string,
    extraEnv: Record<string, string> = {},
    type = typeof conf === "string" ? "knitter" : String(conf.type),
  ): Promise<CniCall> {
    const bin = type === "knitter" ? `${CNI_BIN_DIR}/knitter` : `${REFERENCE_PLUGINS}/${type}`;
    const env: Record<string, string> = {
      CNI_COMMAND: command,
      CNI_PATH: `${CNI_BIN_DIR}:${REFERENCE_PLUGINS}`,
      KNITTER_AGENT_SOCKET: this.agentSocket,
      PATH: Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      ...extraEnv,
    };
    if (att.containerId !== undefined) env.CNI_CONTAINERID = att.containerId;
    if (att.netns !== undefined) env.CNI_NETNS = att.netns;
    if (att.ifName !== undefined) env.CNI_IFNAME = att.ifName;
    if (att.args) env.CNI_ARGS = Object.entries(att.args).map(([k, v]) => `${k}=${v}`).join(";");
    const r = await run([
      "ip",
      "netns",
      "exec",
      this.nodeNetns,
      "env",
      "-i",
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      bin,
    ], {
      stdin: typeof conf === "string" ? conf : JSON.stringify(conf),
      check: false,
      timeoutMs: PLUGIN_TIMEOUT_MS,
    });
    let out: unknown = null;
    if (r.stdout.trim()) {
      try {
        out = JSON.parse(r.stdout);
      } catch {
        out = r.stdout;
      }
    }
    return { code: r.code, out, stderr: r.stderr };
  }

  /** ADD through the whole list; the final result is cached for CHECK and DEL. */
  async add(list: ConfList, att: Attachment): Promise<CniCall> {
    let prev: unknown;
    let last: CniCall = { code: 0, out: null, stderr: "" };
    for (const plugin of list.plugins) {
      last = await this.exec("ADD", att, this.pluginConf(list, plugin, prev, att));
      if (last.code !== 0) return last;
      prev = last.out;
    }
    this.cache.set(key(list, att), prev);
    return last;
  }

  async check(list: ConfList, att: Attachment): Promise<CniCall> {
    const prev = this.cache.get(key(list, att));
    let last: CniCall = { code: 0, out: null, stderr: "" };
    for (const plugin of list.plugins) {
      last = await this.exec("CHECK", att, this.pluginConf(list, plugin, prev, att));
      if (last.code !== 0) return last;
    }
    return last;
  }

  /** DEL in reverse order with the cached result; the cache goes when every plugin succeeded. */
  async del(list: ConfList, att: Attachment): Promise<CniCall> {
    const prev = this.cache.get(key(list, att));
    let last: CniCall = { code: 0, out: null, stderr: "" };
    for (const plugin of [...list.plugins].reverse()) {
      last = await this.exec("DEL", att, this.pluginConf(list, plugin, prev, att));
      if (last.code !== 0) return last;
    }
    this.cache.delete(key(list, att));
    return last;
  }

  cached(list: ConfList, att: Attachment): unknown {
    return this.cache.get(key(list, att));
  }

  private pluginConf(
    list: ConfList,
    plugin: Record<string, unknown>,
    prev: unknown,
    att: Attachment,
  ) {
    const conf: Record<string, unknown> = {
      ...plugin,
      cniVersion: list.cniVersion,
      name: list.name,
    };
    // As libcni does: a plugin gets runtimeConfig only for the capabilities it declares.
    const caps = (plugin.capabilities ?? {}) as Record<string, boolean>;
    const rc = Object.entries(att.runtimeConfig ?? {}).filter(([k]) => caps[k] === true);
    if (rc.length > 0) conf.runtimeConfig = Object.fromEntries(rc);
    if (prev !== undefined) conf.prevResult = prev;
    return conf;
  }
}

function key(list: ConfList, att: Attachment): string {
  return `${list.name}/${att.containerId}/${att.ifName}`;
}
