/**
 * The manager's wire types that more than one component reads: the agent, the monitor and knitctl
 * consume these shapes, the manager produces them. The manager validates with its own schemas.
 */

import type { Bandwidth } from "./bandwidth.ts";

export type NetworkType = "vxlan" | "vlan" | "flat";

/** The one error shape every API answer uses. `code` is stable; `message` is for people. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    /** The request field that was wrong, as a dotted path, for validation errors. */
    field?: string;
  };
}

export interface Route {
  /** Destination CIDR. */
  dst: string;
  /** Next hop; absent means the destination is reached directly through the interface. */
  via?: string;
}

export interface Dns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

export interface PodRef {
  namespace: string;
  name: string;
  uid?: string;
}

/** What the agent needs to build one interface, as the manager answers a port request. */
export interface Port {
  id: string;
  tenant: string;
  network: string;
  networkTenant: string;
  networkId: string;
  type: NetworkType;
  /** VNI for vxlan, VLAN ID for vlan, absent for flat. */
  segmentId?: number;
  physnet?: string;
  ip: string;
  /** Address with prefix length, e.g. "10.1.0.5/24". */
  address: string;
  family: 4 | 6;
  gateway?: string;
  /** On a dual-stack network: the IPv6 address, with its prefix, and the IPv6 gateway. */
  ip6?: string;
  address6?: string;
  gateway6?: string;
  mac: string;
  mtu: number;
  routes: Route[];
  dns: Dns;
  ipGroup?: string;
  node?: string;
  pod?: PodRef;
  interface?: string;
  createdAt: string;
  /** The port's own bandwidth limits (REST); they win over runtimeConfig's and the network's. */
  bandwidth?: Bandwidth;
  /** The network's default bandwidth limits, for a port neither it nor the runtime limits. */
  networkBandwidth?: Bandwidth;
  /** Since when the port has no pod and node (unbound), its address kept. */
  unboundAt?: string;
  /** The security groups the port names (its tenant's); absent: its network's, if any. */
  securityGroups?: string[];
  /** Labels set when the port was made (a service's selector picks ports by them). */
  labels?: Record<string, string>;
  /** Its network's default security groups, for a port that names none. */
  networkSecurityGroups?: string[];
  /** Its network's DSCP marking (0..63) of the IP traffic the port sends; absent: none. */
  networkDscp?: number;
  /** Its network has egress (the node is on it, source NAT out); absent: off. */
  networkEgress?: true;
  /** Its network has hostAccess (the node reaches its pods); absent: off. */
  networkHostAccess?: true;
  /** Its network is advertised to the fabric by BGP (the node is on it); absent: off. */
  networkAdvertise?: true;
  /** Its network's gateway sends IPv6 router advertisements, so set; absent: none. */
  networkRouterAdvertisements?: RouterAdvertisements;
  /** Its network's data plane is another plugin's (the knitter IPAM); absent: Open vSwitch. */
  networkDataPlane?: "external";
  /** How the agent makes the interface for a pod's annotation (manager/schemas.ts Delegate). */
  networkDelegate?: NetworkDelegate;
  /** The claim whose address and MAC it has (they outlive the port: manager/README.md, Claims). */
  claim?: string;
  /**
   * False while another port of its claim (a live migration's other end) has the claim's traffic;
   * absent: active, as every port of older managers.
   */
  active?: false;
  /** The floating IPv4 address bound to it: 1:1 NAT at its node (manager/README.md). */
  floating?: string;
  /** The floating IPv6 address bound to its IPv6 address (`address6`): 1:1 NAT at its node. */
  floating6?: string;
}

/**
 * A claim: an address (and MAC) of a network that belongs to the claim, not to a pod, as the
 * manager answers it; the monitor shows it in an IPAMClaim's status.
 */
export interface Claim {
  name: string;
  tenant: string;
  network: string;
  networkTenant: string;
  ip: string;
  /** The address with its prefix length. */
  address: string;
  /** On a dual-stack network: the IPv6 address paired with `ip`, and with its prefix. */
  ip6?: string;
  address6?: string;
  mac: string;
  /** Its ports: none, one, or two during a live migration (one of them active). */
  ports: { id: string; node?: string; pod?: PodRef; active: boolean }[];
  createdAt: string;
}

/** An external network's delegate: the reference plugin the agent execs and its node interface. */
export type NetworkDelegate =
  | { plugin: "macvlan"; master: string; mode?: "bridge" | "private" | "vepa" | "passthru" }
  | { plugin: "ipvlan"; master: string; mode?: "l2" | "l3" | "l3s" }
  | { plugin: "host-device"; device: string }
  | { plugin: "sriov"; deviceID: string };

/** A tenant's router, as the manager answers it and announces it on the change feed. */
export interface RouterInfo {
  name: string;
  tenant: string;
  /**
   * The networks it connects: name, the manager's network ID, subnet and gateway (IPv4, or an
   * IPv6-only network's), and a dual-stack network's IPv6 subnet and gateway: routed too.
   */
  networks: {
    name: string;
    id: string;
    cidr: string;
    gateway: string;
    cidr6?: string;
    gateway6?: string;
  }[];
  /** Static routes: traffic for `dst` goes to the port with address `via` on a connected network. */
  routes: { dst: string; via: string }[];
  description?: string;
  createdAt: string;
  /** Every network it connects is advertised to the fabric by BGP (the admin's); absent: off. */
  advertise?: boolean;
}

/** A port a mirror names: its network (name and the manager's ID) and the port's ID. */
export interface MirrorPort {
  network: string;
  networkId: string;
  id: string;
}

/**
 * A collector over a tunnel: copies go to `ip` in GRE, ERSPAN (type II, its session ID) or VXLAN
 * (its VNI), an admin's choice (manager/README.md, "Port mirrors").
 */
export interface MirrorRemote {
  remote: { ip: string; protocol: "gre" | "erspan" | "vxlan"; session?: number; vni?: number };
}

/**
 * A tenant's port mirror, as the manager answers it and announces it on the change feed: copies of
 * what its source ports send ("out"), receive ("in") or both go to its collector port. Directions
 * are the pod's: "out" is what the pod sends.
 */
export interface MirrorInfo {
  name: string;
  tenant: string;
  sources: MirrorPort[];
  direction: "in" | "out" | "both";
  /** Copy only what matches one of these rules (direction "out"); absent: everything. */
  filter?: MirrorFilterRule[];
  collector: MirrorPort | MirrorRemote;
  createdAt: string;
}

/** A rule of a mirror's filter: what the pod sends, by protocol, destination port, remote CIDR. */
export interface MirrorFilterRule {
  protocol: "tcp" | "udp" | "icmp" | "any";
  /** "5001" or "5000-5003" (tcp, udp). */
  ports?: string;
  /** IPv4 CIDR, canonical. */
  remote?: string;
}

/** Whether a mirror's collector is a remote address rather than a port. */
export function isRemoteCollector(c: MirrorInfo["collector"]): c is MirrorRemote {
  return "remote" in c;
}

export interface Usage {
  total: number;
  used: number;
  free: number;
}

/** An extra interface as the agent made it: its answer to `POST /v1/interfaces` (knitctl attach). */
export interface ExtraInterfaceView {
  ifName: string;
  netns: string;
  kind: "network" | "bridge";
  address?: string;
  /** On a dual-stack network: the IPv6 address, with prefix. */
  address6?: string;
  mac: string;
  mtu: number;
  hostIfName: string;
  bridge: string;
  vlan?: number;
  network?: string;
  tenant?: string;
  portId?: string;
  routes: Route[];
}

/**
 * A network's IPv6 router advertisements (agent/PIPELINE.md, "Router advertisements"): `slaac`
 * lets the pods make their own address from the /64 prefix (the A flag), `managed` and
 * `otherConfig` are the M and O flags (addresses, or other settings, from DHCPv6).
 */
export interface RouterAdvertisements {
  slaac: boolean;
  managed: boolean;
  otherConfig: boolean;
}

/** A network's fields that `PATCH` may change: ports allocated afterwards get the new values. */
export const NETWORK_MUTABLE_FIELDS = [
  "description",
  "mtu",
  "routes",
  "dns",
  "bandwidth",
  "dscp",
  "egress",
  "hostAccess",
] as const;
/** Fields fixed at creation: addresses handed out and segments claimed depend on them. */
export const NETWORK_IMMUTABLE_FIELDS = [
  "type",
  "cidr",
  "gateway",
  "cidr6",
  "gateway6",
  "allocationPools",
  "excludes",
  "public",
  "physnet",
  "segmentId",
  // Ports made on one node interface would stay there.
  "delegate",
] as const;

/** One port of a service: clients reach `port` on the VIP, a backend answers on `targetPort`. */
export interface ServicePort {
  name?: string;
  protocol: "TCP" | "UDP";
  port: number;
  targetPort: number;
}

/** A service's address family, as Kubernetes names it. */
export type IpFamily = "IPv4" | "IPv6";

/** How many families a service has, as Kubernetes' `ipFamilyPolicy`. */
export type IpFamilyPolicy = "SingleStack" | "PreferDualStack" | "RequireDualStack";

/**
 * Backends of one service: named, or selected, the nodes balance at most this many (the first by
 * address); a select group's buckets each.
 */
export const MAX_SERVICE_BACKENDS = 64;

/**
 * A tenant's service on one of its networks (manager/README.md, "Services"), as the manager answers
 * it and announces it on the change feed: a virtual address of the network spread by the sending
 * node over the backend ports (by ID, on the same network) that are bound to a node.
 */
export interface ServiceInfo {
  name: string;
  tenant: string;
  network: string;
  networkId: string;
  /** The VIP of the first family (`vips[0]`). */
  vip: string;
  /**
   * One VIP per family, in `ipFamilies`' order; a dual-stack network's IPv6 VIP is its IPv4 VIP's
   * pair. Absent in records made before services had IPv6: `[vip]`.
   */
  vips?: string[];
  /** Absent in records made before: the family of `vip`. */
  ipFamilies?: IpFamily[];
  /** Absent in records made before: "SingleStack". */
  ipFamilyPolicy?: IpFamilyPolicy;
  ports: ServicePort[];
  backends: string[];
  /** Ports of the network whose labels include all of these are backends too. */
  selector?: Record<string, string>;
  /** "ClientIP": every connection of one client address goes to the same backend. */
  sessionAffinity: "None" | "ClientIP";
  createdAt: string;
}
