/**
 * A CNI call as the agent handles it: the runtime's CNI_* variables, checked, and the network
 * config from stdin (agent/cni/cni_exec.ts makes it from what the plugin forwards). It is also the
 * body of wire 0, `POST /v1/cni/<command>`, which the Deno plugin of earlier releases sent and the
 * agent still takes. The agent imports these types from "@knitter/plugin/protocol".
 */
import type { CniCommand } from "./contract.ts";

/** VERSION is answered by the plugin itself; everything else is the agent's. */
export type AgentCommand = Exclude<CniCommand, "VERSION">;

/** One entry of the config's `networks` list: a network name or a detailed request. */
export type NetworkSelection = string | {
  name: string;
  /** Interface name inside the pod; absent: the agent picks one. */
  interface?: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute?: boolean;
};

/**
 * The network configuration as the runtime passed it on stdin. Only the keys knitter reads are
 * typed; everything else (including unknown keys) reaches the agent unchanged.
 */
export interface KnitterNetConf {
  cniVersion: string;
  name: string;
  type: string;
  agentSocket?: string;
  agentTimeoutSeconds?: number;
  /** The pods' tenant where the runtime passes no K8S_POD_NAMESPACE (README.md, "The tenant"). */
  tenant?: string;
  networks?: NetworkSelection[];
  /**
   * Injected by the runtime from the `capabilities` the conflist enables: `ips`, `mac`,
   * `bandwidth` (rates in bits per second, bursts in bits, as the reference bandwidth plugin reads
   * them); forwarded to the agent as they are, which checks and applies them.
   */
  runtimeConfig?: {
    ips?: string[];
    mac?: string;
    bandwidth?: {
      ingressRate?: number;
      ingressBurst?: number;
      egressRate?: number;
      egressBurst?: number;
    };
    [key: string]: unknown;
  };
  /** Always on CHECK and DEL (may be empty on DEL); on ADD when knitter is not first in a chain. */
  prevResult?: Record<string, unknown>;
  /** GC only: the attachments the runtime still knows; libcni sends both spellings. */
  "cni.dev/valid-attachments"?: { containerID: string; ifname: string }[];
  "cni.dev/attachments"?: { containerID: string; ifname: string }[];
  [key: string]: unknown;
}

/** One call: the checked CNI_* variables and the config. */
export interface CniRequest {
  command: AgentCommand;
  /** CNI_CONTAINERID; "" for GC and STATUS when the runtime sets none. */
  containerId: string;
  /** CNI_NETNS; "" when absent, which DEL, GC and STATUS allow. */
  netns: string;
  /** CNI_IFNAME; "" for GC and STATUS when the runtime sets none. */
  ifName: string;
  /** CNI_ARGS split into keys, e.g. K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID. */
  args: Record<string, string>;
  /** CNI_PATH as given (an OS path list); "" when absent. */
  path: string;
  /** The stdin config, unchanged: prevResult and the result in it keep their cniVersion. */
  config: KnitterNetConf;
}
