/** What the manager stores, and under which keys. API shapes derive from these in schemas.ts. */
import type { RouterAdvertisements } from "@knitter/common";
import type {
  Bandwidth,
  Dns,
  MirrorInfo,
  NetworkDelegate,
  NetworkType,
  PodRef,
  Route,
  RouterInfo,
  SecurityGroup,
  ServiceInfo,
} from "@knitter/common";
import type { Key } from "./store/store.ts";

export interface TenantRecord {
  name: string;
  createdAt: string;
  /** Kept in the record so that a delete and a concurrent create conflict on one version. */
  networks: number;
  ipGroups: number;
}

export interface PoolRange {
  start: string;
  end: string;
}

export interface NetworkRecord {
  id: string;
  tenant: string;
  name: string;
  type: NetworkType;
  cidr: string;
  family: 4 | 6;
  gateway?: string;
  /** A dual-stack network's IPv6 subnet (its `cidr` is IPv4): service/dual_stack.ts. */
  cidr6?: string;
  gateway6?: string;
  /** The effective pools: the request's, or the whole CIDR less network and broadcast (IPv4). */
  allocationPools: PoolRange[];
  excludes: string[];
  public: boolean;
  mtu: number;
  routes: Route[];
  dns: Dns;
  /** The default bandwidth limits of its ports. */
  bandwidth?: Bandwidth;
  physnet?: string;
  segmentId?: number;
  description?: string;
  /** Set at creation (the monitor marks the networks its Network resources make). */
  labels?: Record<string, string>;
  /** While set, the network is being deleted and takes no new ports. */
  deletingSince?: string;
  createdAt: string;
  /** Addresses in the pools, and how many of them the gateway and excludes take. */
  poolSize: number;
  reserved: number;
  /**
   * The pool indexes the gateway and the excludes take, as merged [start, end) ranges: never handed
   * out, and never set in the bitmap. Absent on networks created before ranges were kept: their
   * reserved addresses are set bits instead.
   */
  reservedRanges?: [number, number][];
  /** The security groups of its ports that name none (service/security_groups.ts). */
  securityGroups?: string[];
  /** The DSCP marking of the IP traffic its ports send (agent/PIPELINE.md); absent: none. */
  dscp?: number;
  /** Another plugin's interfaces carry it (schemas.ts DataPlane); absent: Open vSwitch. */
  dataPlane?: "external";
  /** How the agent makes its interfaces for a pod's annotation (schemas.ts Delegate). */
  delegate?: NetworkDelegate;
  /** Its pods reach what lies outside through the node, source NAT to it (service/node_reach.ts). */
  egress?: boolean;
  /** The node reaches its pods on this network (kubelet probes, hostPort). */
  hostAccess?: boolean;
  /** Its CIDRs are advertised to the fabric by BGP (service/advertise.ts). */
  advertise?: boolean;
  /** The router whose `advertise` turned it on (service/router_advertise.ts); absent: its own. */
  advertisedBy?: string;
  /** Its IPv6 gateway sends router advertisements, so set (agent/PIPELINE.md); absent: none. */
  ipv6RouterAdvertisements?: RouterAdvertisements;
}

export interface PhysnetRecord {
  name: string;
  vlanRanges: { start: number; end: number }[];
  description?: string;
  createdAt: string;
  networks: number;
  /** A physnet carries at most one flat (untagged) network. */
  flatNetwork?: string;
}

export interface IpGroupAddress {
  ip: string;
  /** Pool index of the address in its network. */
  index: number;
  /**
   * The port holding it, when in use: stored under its own key, the record says only `held`
   * (service/ip_group_members.ts); records of older managers have it here.
   */
  port?: string;
  /** As stored: in use, by the port its member key names. */
  held?: true;
}

export interface IpGroupRecord {
  name: string;
  tenant: string;
  network: string;
  networkTenant: string;
  networkId: string;
  addresses: IpGroupAddress[];
  cursor: number;
  createdAt: string;
}

/**
 * A port as stored: what is the port's own. What it shares with its network (type, segment, MTU,
 * gateway, routes, DNS) is joined in when it is answered, so there is one place that says it.
 */
export interface PortRecord {
  id: string;
  /** The tenant the port belongs to (for a public network, not necessarily the network's). */
  tenant: string;
  network: string;
  networkTenant: string;
  networkId: string;
  ip: string;
  /** On a dual-stack network: the IPv6 address paired with `ip` (service/dual_stack.ts). */
  ip6?: string;
  mac: string;
  /** Pool index of the address in its network. */
  index: number;
  createdAt: string;
  ipGroup?: string;
  node?: string;
  pod?: PodRef;
  interface?: string;
  /** The port's own bandwidth limits, from its creation. */
  bandwidth?: Bandwidth;
  /** Since when the port has no pod and node, its address kept (POST .../unbind). */
  unboundAt?: string;
  /** Its cluster, also the suffix of its ID (service/cluster_names.ts); absent: "default". */
  cluster?: string;
  /** The security groups it names, of its own tenant. */
  securityGroups?: string[];
  /** Set at creation: what a service's selector matches (service/services.ts). */
  labels?: Record<string, string>;
  /** The node whose token made it (scoped); absent when another token did. Never answered. */
  madeBy?: string;
  /** The claim whose address and MAC it has (service/claims.ts); they stay the claim's. */
  claim?: string;
  /**
   * False while another port of its claim has the claim's traffic (a live migration's target, or
   * its source once the target was activated); absent: active.
   */
  active?: false;
  /**
   * The floating address bound to the port's ID (service/floating_ips.ts): 1:1 NAT at its node.
   * Copied from the binding when the port is made, so it follows the port to any node.
   */
  floating?: string;
  /** The same for its IPv6 address (`ip6`): the IPv6 floating address bound to the port's ID. */
  floating6?: string;
  /**
   * Since when (ms) it holds its address with this binding: the record is its live holding in the
   * address history (service/history.ts), stored as a holding only when it ends. Absent: allocated
   * while history was off, or by an older manager (whose open holding is stored). Never answered.
   */
  stintFrom?: number;
}

/** The port field that carries a floating address of each family (service/floating_ips.ts). */
export const FLOATING_FIELD = { 4: "floating", 6: "floating6" } as const;

/** An admin's pool of external addresses (IPv4 or IPv6) that tenants take floating addresses from. */
export interface FloatingPoolRecord {
  name: string;
  cidrs: string[];
  description?: string;
  createdAt: string;
}

/**
 * A floating address: held by a tenant (bound to one of its ports or not), or, released, in
 * quarantine until `quarantineUntil` (no tenant then).
 */
export interface FloatingIpRecord {
  address: string;
  pool: string;
  tenant?: string;
  createdAt: string;
  /** The port it is bound to: the port's network and ID (its key's). */
  port?: { network: string; networkId: string; id: string };
  /** Or the claim it is bound to: its ports carry it, the active one has its traffic. */
  claim?: { network: string; networkId: string; name: string };
  releasedAt?: string;
  quarantineUntil?: string;
  /** When its open stint of the history began (service/floating_history.ts); absent: none. */
  stintFrom?: number;
}

/**
 * An address and MAC that belong to a claim, not to a pod (service/claims.ts): held from the
 * claim's creation to its deletion, handed to each port bound to it.
 */
export interface ClaimRecord {
  name: string;
  tenant: string;
  network: string;
  networkTenant: string;
  networkId: string;
  ip: string;
  /** On a dual-stack network: the IPv6 address paired with `ip`. */
  ip6?: string;
  mac: string;
  /** Pool index of the address in its network. */
  index: number;
  /** Its ports' IDs, at most two (a live migration's source and target); one is active. */
  ports: string[];
  createdAt: string;
}

/** A tenant's router (service/routers.ts): stored as the API answers it. */
export type RouterRecord = RouterInfo;

/**
 * A tenant's port mirror (service/mirrors.ts): stored as the API answers it. Its key's first part
 * sorts between "network" and "secgroup", so the etcd feed's watch covers it (etcd_feed.ts).
 */
export type MirrorRecord = MirrorInfo;

/**
 * A tenant's service (service/services.ts): what the API answers without its status, and the pool
 * index of its VIP. Its key's first part sorts between "port_mirror" and "secgroup", so the etcd
 * feed's watch covers it (etcd_feed.ts).
 */
export type ServiceRecord = ServiceInfo & { vipIndex: number };

export interface NodeRecord {
  /** Its name scoped by its cluster (service/cluster_names.ts). */
  name: string;
  /** Absent: "default". */
  cluster?: string;
  underlayIp: string;
  labels: Record<string, string>;
  registeredAt: string;
  updatedAt: string;
}

/** A Kubernetes cluster whose agents and monitor use this manager (service/clusters.ts). */
export interface ClusterRecord {
  name: string;
  description?: string;
  /** Tenants (namespaces) whose pods may run in it and whose networks it may use; "*": every one. */
  tenants: string[];
  /** Networks of other tenants it may use too, as "tenant/name". */
  networks: string[];
  /** Physnets its nodes are attached to: where its VLAN and flat networks may be; "*": every one. */
  physnets: string[];
  /** While set, a delete is checking that it has no port: it takes no new ones. */
  deletingSince?: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * A security group as stored: what the API answers (groupView), and while a delete looks for the
 * group's users, its mark (`deletingSince`, `deletingBy`): nothing may name the group meanwhile.
 */
export type SecurityGroupRecord = SecurityGroup & { deletingSince?: string; deletingBy?: string };

export type { Dns, PodRef, Route };

export const keys = {
  tenant: (name: string): Key => ["tenant", name],
  tenants: (): Key => ["tenant"],
  network: (tenant: string, name: string): Key => ["network", tenant, name],
  networks: (tenant?: string): Key => tenant === undefined ? ["network"] : ["network", tenant],
  /** Public network names are unique across tenants: pods resolve them by name. */
  publicNetwork: (name: string): Key => ["public_network", name],
  publicNetworks: (): Key => ["public_network"],
  physnet: (name: string): Key => ["physnet", name],
  physnets: (): Key => ["physnet"],
  ipGroup: (tenant: string, name: string): Key => ["ipgroup", tenant, name],
  ipGroups: (tenant: string): Key => ["ipgroup", tenant],
  ipGroupOfNetwork: (networkId: string, tenant: string, name: string): Key => [
    "ipgroup_by_network",
    networkId,
    tenant,
    name,
  ],
  ipGroupsOfNetwork: (networkId: string): Key => ["ipgroup_by_network", networkId],
  /** The port that holds an address of an IP group, by pool index (service/ip_group_members.ts). */
  ipGroupMember: (tenant: string, name: string, index: number): Key => [
    "ipgroup_member",
    tenant,
    name,
    index,
  ],
  ipGroupMembers: (tenant: string, name: string): Key => ["ipgroup_member", tenant, name],
  router: (tenant: string, name: string): Key => ["router", tenant, name],
  routers: (tenant?: string): Key => tenant === undefined ? ["router"] : ["router", tenant],
  /** The router a network is on ({tenant, name}): one at most. */
  routerOfNetwork: (networkId: string): Key => ["router_by_network", networkId],
  mirror: (tenant: string, name: string): Key => ["port_mirror", tenant, name],
  /**
   * How many mirrors a tenant has: every create and delete writes it, so concurrent ones are
   * serialised (the cap, and a port never both a source and a collector).
   */
  mirrorCount: (tenant: string): Key => ["mirror_count", tenant],
  mirrors: (tenant?: string): Key =>
    tenant === undefined ? ["port_mirror"] : ["port_mirror", tenant],
  service: (tenant: string, name: string): Key => ["port_service", tenant, name],
  services: (tenant?: string): Key =>
    tenant === undefined ? ["port_service"] : ["port_service", tenant],
  /** How many services a tenant has: every create and delete writes it (the cap, serialised). */
  serviceCount: (tenant: string): Key => ["service_count", tenant],
  /** The services whose VIP a network's pool holds (check, holders, delete). */
  serviceOfNetwork: (networkId: string, tenant: string, name: string): Key => [
    "service_by_network",
    networkId,
    tenant,
    name,
  ],
  servicesOfNetwork: (networkId: string): Key => ["service_by_network", networkId],
  securityGroup: (tenant: string, name: string): Key => ["secgroup", tenant, name],
  /** One tenant's security groups; without a tenant, every tenant's. */
  securityGroups: (tenant?: string): Key =>
    tenant === undefined ? ["secgroup"] : ["secgroup", tenant],
  port: (networkId: string, id: string): Key => ["port", networkId, id],
  ports: (networkId?: string): Key => networkId === undefined ? ["port"] : ["port", networkId],
  /** Ports a tenant holds on networks of other tenants (public ones). */
  portOfForeignNetwork: (tenant: string, networkId: string, id: string): Key => [
    "port_of_tenant_on_foreign_network",
    tenant,
    networkId,
    id,
  ],
  portsOfForeignNetworks: (tenant: string): Key => ["port_of_tenant_on_foreign_network", tenant],
  portOfNode: (node: string, networkId: string, id: string): Key => [
    "port_by_node",
    node,
    networkId,
    id,
  ],
  portsOfNode: (node: string): Key => ["port_by_node", node],
  portOfPod: (pod: PodRef, networkId: string, id: string): Key => [
    "port_by_pod",
    pod.namespace,
    pod.name,
    networkId,
    id,
  ],
  portsOfPod: (namespace: string, name: string): Key => ["port_by_pod", namespace, name],
  /** A tenant's claim on a network (service/claims.ts). */
  claim: (tenant: string, networkId: string, name: string): Key => [
    "claim",
    tenant,
    networkId,
    name,
  ],
  /** A tenant's claims: all of them, or those of one network. */
  claims: (tenant: string, networkId?: string): Key =>
    networkId === undefined ? ["claim", tenant] : ["claim", tenant, networkId],
  /** Finds the claims of a network, of every tenant (its delete, who holds an address). */
  claimOfNetwork: (networkId: string, tenant: string, name: string): Key => [
    "claim_by_network",
    networkId,
    tenant,
    name,
  ],
  claimsOfNetwork: (networkId: string): Key => ["claim_by_network", networkId],
  ipam: (networkId: string): Key => ["ipam", networkId],
  /** The port that holds a fixed MAC in a network ({tenant, id}); derived MACs have no key. */
  mac: (networkId: string, mac: string): Key => ["mac", networkId, mac],
  macs: (networkId: string): Key => ["mac", networkId],
  /**
   * A released address in quarantine, by the end of its quarantine (ms) and pool index: listed in
   * the order they end (service/quarantine.ts).
   */
  quarantine: (networkId: string, untilMs: number, index: number): Key => [
    "quarantine_until",
    networkId,
    untilMs,
    index,
  ],
  quarantines: (networkId: string): Key => ["quarantine_until", networkId],
  /**
   * The old shape, by pool index only: ending them meant listing them all, in one commit (issue 33).
   * Still read and ended; `check --repair` moves them to the new shape.
   */
  legacyQuarantine: (networkId: string, index: number): Key => ["quarantine", networkId, index],
  legacyQuarantines: (networkId: string): Key => ["quarantine", networkId],
  /**
   * A released fixed MAC in quarantine, by the end of its quarantine (ms), the same as its
   * address's record's: ending that record ends this one (service/quarantine.ts).
   */
  macQuarantine: (networkId: string, mac: string, untilMs: number): Key => [
    "quarantine_mac",
    networkId,
    mac,
    untilMs,
  ],
  /** How many quarantine records a network has, and when they end (service/quarantine_count.ts). */
  quarantineCount: (networkId: string): Key => ["quarantine_count", networkId],
  /** A MAC's quarantines; as a key of its own, the old shape (by MAC only, never ended). */
  macQuarantinesOf: (networkId: string, mac: string): Key => ["quarantine_mac", networkId, mac],
  macQuarantines: (networkId: string): Key => ["quarantine_mac", networkId],
  vniPool: (): Key => ["segment", "vxlan"],
  vlanPool: (physnet: string): Key => ["segment", "vlan", physnet],
  /** Which network holds a VNI, or a VLAN ID / the untagged segment of a physnet. */
  segmentOwner: (
    type: string,
    physnet: string,
    id: number,
  ): Key => ["segment_owner", type, physnet, id],
  /** A tenant's quota and use (service/quotas.ts); absent: no limits, nothing counted. */
  quota: (tenant: string): Key => ["quota", tenant],
  /** A share of a counted tenant's use and room, one per lane (a network's ID, "" the rest). */
  quotaShare: (tenant: string, lane: string): Key => ["quota_share", tenant, lane],
  quotaShares: (tenant: string): Key => ["quota_share", tenant],
  cluster: (name: string): Key => ["cluster", name],
  clusters: (): Key => ["cluster"],
  node: (name: string): Key => ["node", name],
  nodes: (): Key => ["node"],
  /**
   * The ports a node leaves out of its flows, as it last reported them (service/conflicts.ts): the
   * head, naming the generation whose entries are the report (service/conflict_records.ts).
   */
  conflicts: (node: string): Key => ["conflict", node],
  allConflicts: (): Key => ["conflict"],
  /** One entry of a node's report, of one generation. */
  conflictEntry: (node: string, generation: string, seq: number): Key => [
    "conflict_entry",
    node,
    generation,
    seq,
  ],
  conflictEntries: (...prefix: string[]): Key => ["conflict_entry", ...prefix],
  /** A generation being written, not yet named by the head: deleted by the commit that names it. */
  conflictDraft: (node: string, generation: string): Key => ["conflict_draft", node, generation],
  conflictDrafts: (...prefix: string[]): Key => ["conflict_draft", ...prefix],
  /**
   * Written (blind) by every commit that changes a node's conflicts record: its version tells a
   * reader whether the records it holds in memory are still the store's (service/conflicts.ts).
   */
  conflictsChanged: (): Key => ["conflict_changed"],
  /**
   * Who held an address or MAC when (service/history.ts): a stint under
   * `["history", "ip" | "mac", value, tenant, networkId, fromMs, stint]`; shorter keys are prefixes.
   */
  historyOf: (kind: string, value: string, ...rest: (string | number)[]): Key => [
    "history",
    kind,
    value,
    ...rest,
  ],
  /**
   * A network whose derived MACs (ipam/derived_mac.ts) held addresses, by its MAC block: what a
   * MAC query reads to find such a MAC's stints under their address (service/history.ts). Kept
   * after the network is deleted, as its stints are.
   */
  historyNetwork: (block: string, networkId: string): Key => ["history_network", block, networkId],
  historyNetworks: (block: string): Key => ["history_network", block],
  /** An ended stint, by the time it ended: what pruning deletes once it is past the retention. */
  historyExpiry: (toMs: number, stint: string): Key => ["history_expiry", toMs, stint],
  historyExpiries: (): Key => ["history_expiry"],
  /** An admin's pool of floating addresses (service/floating_pools.ts). */
  floatingPool: (name: string): Key => ["floating_pool", name],
  floatingPools: (): Key => ["floating_pool"],
  /** A floating address, held or in quarantine, unique across tenants (service/floating_ips.ts). */
  floatingIp: (address: string): Key => ["floating_ip", address],
  floatingIps: (): Key => ["floating_ip"],
  /** The tenant's floating addresses (its listing and its quota count). */
  floatingIpOfTenant: (tenant: string, address: string): Key => [
    "floating_ip_by_tenant",
    tenant,
    address,
  ],
  floatingIpsOfTenant: (tenant: string): Key => ["floating_ip_by_tenant", tenant],
  /**
   * Set by every binding of a floating address on the network: a new port of a network without it
   * reads no binding (ports/floating.ts), and a bind racing the port's commit makes it try again.
   */
  floatingMarked: (networkId: string): Key => ["floating_marked", networkId],
  /**
   * The floating address bound to a port ID (kept while the port is deleted and made again), one
   * per family of the port's addresses.
   */
  floatingOfPort: (networkId: string, portKeyId: string, family: 4 | 6 = 4): Key => [
    family === 4 ? "floating_by_port" : "floating6_by_port",
    networkId,
    portKeyId,
  ],
  /** A stint of a floating address: one tenant holding it, bound to one port or claim or none. */
  floatingStint: (address: string, tenant: string, fromMs: number): Key => [
    "floating_history",
    address,
    tenant,
    fromMs,
  ],
  floatingStints: (address: string, tenant?: string): Key =>
    tenant === undefined ? ["floating_history", address] : ["floating_history", address, tenant],
  /** The floating address bound to a claim: every port of the claim carries it (the active NATs). */
  floatingOfClaim: (networkId: string, tenant: string, claim: string, family: 4 | 6 = 4): Key => [
    family === 4 ? "floating_by_claim" : "floating6_by_claim",
    networkId,
    tenant,
    claim,
  ],
  /** Written once an upgrade step that scans is done (service/upgrade.ts): later starts skip it. */
  upgraded: (step: string): Key => ["upgraded", step],
};
