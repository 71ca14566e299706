/**
 * What the wiring of an interface (wiring.ts) needs from the world, as small interfaces: links and
 * addresses in network namespaces, the switch's ports, the flows, the manager's ports and the
 * agent's store. The real implementations are the agent's own (ip_links.ts through {@link ipLinks},
 * PortPlugger, Ovs, Dataplane, ManagerClient, AgentState); in-memory fakes are in seams_fake.ts, so
 * the wiring is tested without root or Open vSwitch.
 */
import type { EffectiveBandwidth, ManagerClient, StartedCommand } from "@knitter/common";
import {
  completePodInterface,
  createPodInterface,
  deletePodInterface,
  type PodInterfaceSpec,
  type PodInterfaceState,
  podInterfaceState,
  podPairMade,
  type PodPairSpec,
  sendPodPair,
  startPodBatch,
} from "./ip_links.ts";
import { netnsIdNow, type PodNetns, podNetns } from "./netns.ts";
import type { Ovs, OvsPortSpec } from "../dataplane/ovs.ts";
import type { AgentState } from "../state.ts";
import { type RatesNow, readVethLimits, shapeVeth, unshapeVeth, type VethEnds } from "./shaper.ts";

/** Links and addresses in network namespaces: what ip_links.ts does with `ip`. */
export interface Links {
  /** An `ip -batch` in the netns, started early; its first create uses it, else abandon it. */
  startBatch(netns: string): Promise<StartedCommand>;
  /**
   * Makes the veth with its pod end configured (MAC, MTU, addresses, routes, checksums). On a
   * failure nothing of it is left, and a name that is taken already is InterfaceExistsError.
   */
  create(spec: PodInterfaceSpec, batch?: StartedCommand): Promise<void>;
  /**
   * Sends a batch the line that makes the veth pair (ip_links.ts sendPodPair), ahead of the rest:
   * `complete` sends the rest and says whether it was made; `abandon` the batch instead and it
   * may have been made or not.
   */
  sendPair(spec: PodPairSpec, batch: StartedCommand): Promise<void>;
  /**
   * Whether the pair sent to `batch` is made: true once it is (the batch goes on waiting for the
   * rest), false when the batch stopped without making it (`complete` says why).
   */
  pairMade(batch: StartedCommand): Promise<boolean>;
  /**
   * Completes the interface whose pair was sent to `batch` with MTU `madeMtu`: MAC, MTU,
   * addresses, routes, checksums. On a failure nothing of it is left, as for create.
   */
  complete(spec: PodInterfaceSpec, madeMtu: number, batch: StartedCommand): Promise<void>;
  /**
   * Deletes the veth by its host end; with `pod`, a pod end alone only when it has `pod.mac`.
   * Idempotent: false when there was nothing to delete.
   */
  remove(
    hostIfName: string,
    pod?: { netns: string; ifName: string; mac?: string },
  ): Promise<boolean>;
  /** The pod end as it is now, or null when it (or its netns) is gone. */
  state(netns: string, ifName: string): Promise<PodInterfaceState | null>;
}

/** Network namespaces by path, as netns.ts reads them. */
export interface Namespaces {
  /** CNI_NETNS of an ADD as a checked path and identity; a CNI error (code 4) saying why not. */
  pod(path: string): Promise<PodNetns>;
  /** The identity ("dev:inode") at the path now, "missing", or null when the agent cannot tell. */
  idNow(path: string): Promise<string | "missing" | null>;
}

/** The integration bridge's ports, over the switch's database (port_plugger.ts). */
export interface SwitchPorts {
  /** A free ofport, taken until release(). */
  takeOfport(): number;
  release(ofports: Iterable<number | undefined>): void;
  /** Adds the ports; a port added with an error may stay in the database (remove it). */
  add(ports: OvsPortSpec[]): Promise<Map<string, number>>;
  /** Removes the ports; names the bridge does not have are skipped. */
  remove(names: string[]): Promise<void>;
  /** Sets a port's external IDs (whose it is), replacing those it had. */
  label(name: string, externalIds: Record<string, string>): Promise<void>;
}

/** Bridges other than the integration bridge (knitctl attach --bridge), through ovs.ts. */
export interface Bridges {
  addPorts(bridge: string, ports: OvsPortSpec[]): Promise<Map<string, number>>;
  /** Names the bridge does not have are skipped. */
  delPorts(bridge: string, names: string[]): Promise<void>;
  /** The names of the switch's bridges. */
  list(): Promise<string[]>;
}

/** The flows of the integration bridge (dataplane.ts): what the wiring reads and asks of them. */
export interface Flows {
  /** The integration bridge's name. */
  readonly bridge: string;
  /** Pod ends compute their own checksums (the userspace datapath). */
  readonly softwareChecksums: boolean;
  /** The ofport of a physnet's patch port on the bridge; undefined when the node has none. */
  physnetPort(physnet: string): number | undefined;
  /** Makes the installed flows those of the state's attachments now. */
  sync(): Promise<void>;
}

/** Bandwidth limits on a veth's two ends (shaper.ts: tc tbf on each). */
export interface Shaper {
  /** Limits the veth as `limits` say (ingress: into the pod, on the host end; egress: the pod end). */
  apply(ends: VethEnds, limits: EffectiveBandwidth): Promise<void>;
  /** Removes the limits; ends already gone are not an error. */
  clear(ends: VethEnds): Promise<void>;
  /** The rates the ends are limited to now (a gone end: none). */
  read(ends: VethEnds): Promise<RatesNow>;
}

/** The real {@link Shaper}: `tc` in the agent's and the pod's netns. */
export const tcShaper: Shaper = { apply: shapeVeth, clear: unshapeVeth, read: readVethLimits };

/** The manager's ports. */
export type PortManager = Pick<ManagerClient, "putPort" | "deletePort" | "unbindPort">;

/** The agent's record of attachments (state.ts). */
export type AttachmentStore = Pick<
  AgentState,
  | "getAttachment"
  | "putAttachment"
  | "deleteAttachment"
  | "listAttachments"
  | "holdersOf"
  | "portNumbers"
>;

/** The real {@link Links}: `ip` and `ethtool` in the namespaces (ip_links.ts). */
export const ipLinks: Links = {
  startBatch: startPodBatch,
  async create(spec, batch) {
    await createPodInterface(spec, batch);
  },
  sendPair: sendPodPair,
  pairMade: podPairMade,
  complete: completePodInterface,
  remove: (hostIfName, pod) => deletePodInterface(hostIfName, pod),
  state: podInterfaceState,
};

/** The real {@link Namespaces}: stat of the nsfs files (netns.ts). */
export const procNamespaces: Namespaces = { pod: podNetns, idNow: netnsIdNow };

/** The real {@link Bridges}: ovs-vsctl (ovs.ts). */
export function ovsBridges(ovs: Ovs): Bridges {
  return {
    addPorts: (bridge, ports) => ovs.addPorts(bridge, ports),
    delPorts: (bridge, names) => ovs.delPorts(bridge, names),
    list: async () => (await ovs.vsctl(["list-br"])).split("\n").filter(Boolean),
  };
}
