/**
 * Knitter's custom resources (group knitter.io, version v1alpha1, namespaced: the namespace is the
 * tenant), as deploy/ declares them. They mirror the manager's API (manager/schemas.ts:
 * NetworkCreate, IpGroupCreate / IpGroupUpdate, RouterCreate / RouterUpdate; a Mirror names pods
 * where MirrorCreate names ports).
 */
import type {
  Bandwidth,
  Dns,
  MirrorFilterRule,
  NetworkDelegate,
  Route,
  Usage,
} from "@knitter/common";

export const GROUP = "knitter.io";
export const VERSION = "v1alpha1";
/** Held on each resource the manager has something for, until the manager's copy is gone. */
export const FINALIZER = "knitter.io/manager";

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  deletionTimestamp?: string | Date;
  finalizers?: string[];
  annotations?: Record<string, string>;
}

export interface Condition {
  type: "Ready";
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface NetworkSpec {
  type?: "vxlan" | "vlan" | "flat";
  cidr: string;
  gateway?: string;
  /** Dual stack: the IPv6 subnet of an IPv4 network, and its gateway. */
  cidr6?: string;
  gateway6?: string;
  allocationPools?: { start: string; end: string }[];
  excludes?: string[];
  public?: boolean;
  /** Its pods reach the outside through the node, source NAT to it (manager: node_reach.ts). */
  egress?: boolean;
  /** The node reaches its pods on it (kubelet probes, hostPort). */
  hostAccess?: boolean;
  /** Who carries its traffic: Knitter's switch, or another plugin with the knitter IPAM. */
  dataPlane?: "ovs" | "external";
  /** How the agent makes an external network's interfaces for a pod's annotation. */
  delegate?: NetworkDelegate;
  physnet?: string;
  segmentId?: number;
  mtu?: number;
  routes?: Route[];
  dns?: Dns;
  /** The default bandwidth limits of the network's ports (agent/README.md). */
  bandwidth?: Bandwidth;
  /** The DSCP marking (0..63) of the IP traffic its pods send (agent/PIPELINE.md). */
  dscp?: number;
  description?: string;
}

/** A stable address kept while its StatefulSet pod is gone, and until when. */
export interface HeldAddress {
  address: string;
  port: string;
  /** "namespace/name" of the pod it waits for. */
  pod: string;
  interface?: string;
  /** When its pod went (the port was unbound). */
  since: string;
  /** When it is released unless a pod of that name has come back. */
  until: string;
  reason: string;
}

export interface NetworkStatus {
  networkId?: string;
  segmentId?: number;
  usage?: Usage;
  /** Stable addresses held for StatefulSet pods that are gone, each with why and until when. */
  heldAddresses?: HeldAddress[];
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface NetworkResource {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: NetworkSpec;
  status?: NetworkStatus;
}

export interface IpGroupSpec {
  /** A network name visible to the namespace's tenant (its own or a public one). */
  network: string;
  addresses?: string[];
  size?: number;
}

export interface IpGroupStatus {
  addresses?: { ip: string; port?: string }[];
  size?: number;
  used?: number;
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface IpGroupResource {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: IpGroupSpec;
  status?: IpGroupStatus;
}

export interface RouterSpec {
  /** Names of the namespace's own networks. */
  networks: string[];
  routes?: { dst: string; via: string }[];
  description?: string;
}

export interface RouterStatus {
  networks?: { name: string; cidr: string }[];
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface RouterResource {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: RouterSpec;
  status?: RouterStatus;
}

/**
 * One end of a Mirror: a pod of the resource's namespace (its port on `network` or `interface`, or
 * its only one), or a Knitter port by ID on `network`.
 */
export interface MirrorEndpoint {
  pod?: string;
  interface?: string;
  network?: string;
  port?: string;
}

/** A remote collector (manager/README.md, "Port mirrors"): ERSPAN's session, VXLAN's VNI. */
export interface RemoteSpec {
  ip: string;
  protocol: string;
  session?: number;
  vni?: number;
}

export interface MirrorSpec {
  sources: MirrorEndpoint[];
  /** The pod's point of view: "out" is what it sends, "in" what it receives. */
  direction?: "in" | "out" | "both";
  /** Copy only what the pods send that matches one rule (the manager's filter). */
  filter?: MirrorFilterRule[];
  /** A port of the namespace's, or a remote address (an admin's: config remoteMirrorNamespaces). */
  collector: MirrorEndpoint & { remote?: RemoteSpec };
}

/** A port as the mirror names it at the manager. */
export interface MirrorPortStatus {
  network: string;
  port: string;
  pod?: string;
  interface?: string;
}

export interface MirrorStatus {
  sources?: MirrorPortStatus[];
  collector?: MirrorPortStatus | { remote: RemoteSpec };
  /** When the manager made the mirror: marks it as this resource's (one made over REST is not). */
  createdAt?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface MirrorResource {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: MirrorSpec;
  status?: MirrorStatus;
}

/**
 * The Network Plumbing Working Group's IPAMClaim (k8snetworkplumbingwg/ipamclaims): an address that
 * belongs to the claim, not to a pod, for a VM's pods across restarts and live migrations. Pods
 * name it in a network selection element's `ipam-claim-reference`; its owner (a VM) deletes it.
 */
export const IPAM_CLAIM = { group: "k8s.cni.cncf.io", version: "v1alpha1", plural: "ipamclaims" };

export interface IpamClaimSpec {
  /** The network the address is of (the namespace's own, or a public one). */
  network: string;
  /** The pod interface the allocation is for (informational here: the pods name the claim). */
  interface: string;
  /** Addresses asked for; not supported by Knitter (the manager picks one), refused if given. */
  ipRequests?: string[];
}

export interface IpamClaimStatus {
  /** The claim's addresses with their prefix (IPv4, and IPv6 on a dual-stack network). */
  ips: string[];
  /** The pod that has the address now (a name in the claim's namespace; "": none). */
  ownerPod: string;
  conditions?: Condition[];
}

export interface IpamClaimResource {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: IpamClaimSpec;
  status?: IpamClaimStatus;
}

/** The plural names, as in the API paths. */
export const PLURAL = {
  network: "networks",
  ipGroup: "ipgroups",
  router: "routers",
  mirror: "mirrors",
} as const;
