/**
 * Delegated interfaces: a pod's annotation names an external network whose delegate (manager
 * schemas.ts Delegate) says how its interfaces are made, e.g. macvlan on master eth1. The agent
 * then runs that reference plugin from the CNI bin dir as a runtime would (ADD, CHECK, DEL, the
 * CNI_* variables, the config on stdin), with the knitter IPAM for the network, so the address is
 * the manager's port like any other; that plugin's result joins the pod's. The plugin runs in the
 * agent's own network namespace, the node's, where its master is.
 */
import { ManagerError, type NetworkDelegate, run, type RunResult } from "@knitter/common";
import { CNI_CODE, CniError, type CniResult } from "@knitter/plugin/contract";
import type { AgentRequest, PodRequest } from "./pod_request.ts";
import { KNITTER_TYPE } from "./ipam_call.ts";
import type { DelegatedInterface } from "../state.ts";

export type { DelegatedInterface };

/** The version the reference plugins are spoken to in (Debian's speak 0.1.0 to 1.0.0). */
export const DELEGATE_CNI_VERSION = "1.0.0";
/** Where plugins are looked for after the runtime's CNI_PATH: the usual bin dirs. */
export const FALLBACK_BIN_DIRS = ["/opt/cni/bin", "/usr/lib/cni"];
/** No plugin may hang an ADD: the forwarder's own limit on the agent is 30 s. */
const PLUGIN_TIMEOUT_MS = 25_000;

export interface DelegatesDeps {
  /** The network's data plane and delegate, from the manager. */
  plane(tenant: string, network: string): Promise<{ delegate?: NetworkDelegate }>;
  /** The agent's socket, for the knitter IPAM the plugin runs. */
  socket: string;
  nodeName: string;
}

/** The CNI network name a delegate's config carries: its IPAM records go by it. */
export function delegateCniName(network: string): string {
  return `knitter-${network}`;
}

/** The config the delegate plugin gets: its type and fields, and the knitter IPAM of the network. */
export function delegateConfig(d: DelegatedInterface): Record<string, unknown> {
  const { plugin, ...fields } = d.delegate;
  return {
    cniVersion: DELEGATE_CNI_VERSION,
    name: delegateCniName(d.network),
    type: plugin,
    ...fields,
    ipam: {
      type: KNITTER_TYPE,
      network: d.network,
      tenant: d.tenant,
      ...(d.ip ? { ip: d.ip } : {}),
      ...(d.ipGroup ? { ipGroup: d.ipGroup } : {}),
      ...(d.claim ? { claim: d.claim } : {}),
    },
  };
}

/** The pod's result with the delegates' interfaces, addresses and routes after its own. */
export function withDelegates(main: CniResult, delegated: DelegatedInterface[]): CniResult {
  const interfaces = [...(main.interfaces ?? [])];
  const ips = [...(main.ips ?? [])];
  const routes = [...(main.routes ?? [])];
  for (const d of delegated) {
    const base = interfaces.length;
    interfaces.push(...(d.result?.interfaces ?? []));
    for (const ip of d.result?.ips ?? []) {
      ips.push(ip.interface === undefined ? ip : { ...ip, interface: ip.interface + base });
    }
    routes.push(...(d.result?.routes ?? []));
  }
  return { ...main, interfaces, ips, routes };
}

/** Runs the delegate plugins of a pod's external networks. */
export class Delegates {
  constructor(private readonly d: DelegatesDeps) {}

  /**
   * Takes out of `want` the interfaces of networks with a delegate (the annotation's, never the
   * runtime's own interface), and answers them. Only in Kubernetes mode: a plain CNI config names
   * its other plugins itself.
   */
  async split(req: AgentRequest, want: PodRequest): Promise<DelegatedInterface[]> {
    if (!req.kubePod) return [];
    const out: DelegatedInterface[] = [];
    for (const w of [...want.interfaces]) {
      if (w.ifName === req.ifName) continue;
      const delegate = await this.delegateOf(want.tenant, w.network);
      if (!delegate) continue;
      if (w.mac) {
        throw new CniError(
          CNI_CODE.invalidConfig,
          `${w.ifName} on network "${w.network}" asks for MAC ${w.mac}, but the ${delegate.plugin} plugin of the network's delegate makes that interface and its MAC`,
          "leave the MAC out of the annotation's entry for this network",
        );
      }
      want.interfaces.splice(want.interfaces.indexOf(w), 1);
      out.push({
        ifName: w.ifName,
        network: w.network,
        tenant: want.tenant,
        delegate,
        ...(w.ip ? { ip: w.ip } : {}),
        ...(w.ipGroup ? { ipGroup: w.ipGroup } : {}),
        ...(w.claim ? { claim: w.claim } : {}),
        path: req.path,
      });
    }
    return out;
  }

  /** ADD: the plugin makes the interface in the pod; its result is kept in `d`. */
  async add(
    at: { containerId: string; netns: string; args: Record<string, string> },
    d: DelegatedInterface,
  ): Promise<void> {
    const r = await this.exec("ADD", at, d, delegateConfig(d));
    d.result = JSON.parse(r.stdout) as CniResult;
  }

  /** CHECK: the plugin compares the pod with its ADD result. */
  async check(at: { containerId: string; netns: string }, d: DelegatedInterface): Promise<void> {
    await this.exec("CHECK", { ...at, args: {} }, d, {
      ...delegateConfig(d),
      ...(d.result ? { prevResult: d.result } : {}),
    });
  }

  /** DEL: the plugin removes the interface (if the netns still has it) and its address. */
  async del(at: { containerId: string; netns: string }, d: DelegatedInterface): Promise<void> {
    await this.exec("DEL", { ...at, args: {} }, d, {
      ...delegateConfig(d),
      ...(d.result ? { prevResult: d.result } : {}),
    });
  }

  private async delegateOf(tenant: string, network: string) {
    try {
      return (await this.d.plane(tenant, network)).delegate;
    } catch (err) {
      // An unknown network is the port request's to refuse, saying why.
      if (err instanceof ManagerError && err.status === 404) return undefined;
      throw err;
    }
  }

  private async exec(
    command: "ADD" | "CHECK" | "DEL",
    at: { containerId: string; netns: string; args: Record<string, string> },
    d: DelegatedInterface,
    config: Record<string, unknown>,
  ): Promise<RunResult> {
    const dirs = binDirs(d.path);
    const bin = await findPlugin(d.delegate.plugin, dirs);
    if (!bin) {
      throw new CniError(
        CNI_CODE.notAvailable,
        `Network "${d.network}": its delegate's ${d.delegate.plugin} plugin is not on node ${this.d.nodeName} (looked in ${
          dirs.join(", ")
        })`,
        `install the reference CNI plugins there (Debian: containernetworking-plugins), or put ${d.delegate.plugin} in the runtime's CNI bin dir`,
      );
    }
    const args = Object.entries(at.args).filter(([k]) => k !== "KNITTER_NETWORKS");
    const r = await run([bin], {
      stdin: JSON.stringify(config),
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: at.containerId,
        CNI_NETNS: at.netns,
        CNI_IFNAME: d.ifName,
        CNI_PATH: dirs.join(":"),
        CNI_ARGS: args.map(([k, v]) => `${k}=${v}`).join(";"),
        KNITTER_AGENT_SOCKET: this.d.socket,
      },
      check: false,
      timeoutMs: PLUGIN_TIMEOUT_MS,
    });
    if (r.code !== 0) throw pluginError(command, d, r, this.d.nodeName);
    return r;
  }
}

/** The runtime's CNI_PATH first, then the usual bin dirs. */
function binDirs(path: string): string[] {
  return [...new Set([...path.split(":").filter((p) => p.startsWith("/")), ...FALLBACK_BIN_DIRS])];
}

async function findPlugin(plugin: string, dirs: string[]): Promise<string | undefined> {
  for (const dir of dirs) {
    try {
      if ((await Deno.stat(`${dir}/${plugin}`)).isFile) return `${dir}/${plugin}`;
    } catch { /* not in this one */ }
  }
  return undefined;
}

/** Where the delegate makes its interface, for messages: "master eth1", "device hd0". */
function onWhat(delegate: NetworkDelegate): string {
  switch (delegate.plugin) {
    case "macvlan":
    case "ipvlan":
      return `master "${delegate.master}"`;
    case "host-device":
      return `device "${delegate.device}"`;
    case "sriov":
      return `VF ${delegate.deviceID}`;
  }
}

/** The plugin's own error (its code and message), said as the network's delegate failing. */
function pluginError(command: string, d: DelegatedInterface, r: RunResult, node: string) {
  let body: { code?: unknown; msg?: unknown; details?: unknown } = {};
  try {
    body = JSON.parse(r.stdout);
  } catch { /* not a CNI error: its output is the message */ }
  const said = typeof body.msg === "string"
    ? `${body.msg}${typeof body.details === "string" && body.details ? ` (${body.details})` : ""}`
    : (r.stdout.trim() || r.stderr.trim() || `exit ${r.code}`);
  const code = typeof body.code === "number" && body.code > 0 ? body.code : CNI_CODE.internal;
  const where = onWhat(d.delegate);
  return new CniError(
    code,
    `Network "${d.network}": ${command} of ${d.ifName} by its delegate, the ${d.delegate.plugin} plugin on ${where}, failed on node ${node}: ${said}`,
    `the network's delegate names ${where}; check that node ${node} has it (ip link show), or ask the admin for a network whose delegate names what the nodes have`,
  );
}
