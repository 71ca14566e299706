/**
 * The API's schemas: requests are validated with them and /openapi.json is generated from them, so
 * the document cannot drift from what the server accepts.
 */
import { z } from "zod";
import { MAC_RE } from "@knitter/common/address";
import { MAX_SERVICE_BACKENDS } from "@knitter/common";
import { PLAIN_IFNAME_RE, PLAIN_IFNAME_RULE } from "@knitter/plugin/contract";
import { BandwidthSchema } from "./bandwidth_schema.ts";
import { GroupNames, PortRange, SecurityGroup } from "./security_group_schema.ts";

export {
  SecurityGroup,
  SecurityGroupCreate,
  SecurityGroupUpdate,
} from "./security_group_schema.ts";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const PORT_ID = /^[A-Za-z0-9]([A-Za-z0-9._:-]{0,198}[A-Za-z0-9])?$/;

export const Name = z.string().regex(
  DNS_LABEL,
  "must be a lowercase DNS label (a-z, 0-9, '-', 1-63)",
)
  .meta({ example: "blue" });
export const NodeName = z.string().regex(
  DNS_SUBDOMAIN,
  "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.', 1-253)",
);
/** A claim's name: a Kubernetes object's (an IPAMClaim's; KubeVirt names them VM.NETWORK). */
export const ClaimName = z.string().regex(
  DNS_SUBDOMAIN,
  "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.', 1-253), as a Kubernetes object name",
)
  .meta({ example: "vm1.blue" });
export const PortId = z.string().regex(
  PORT_ID,
  "must be 1-200 characters of A-Z, a-z, 0-9, '.', '_', ':', '-', starting and ending alphanumeric",
);
const IpText = z.string().min(1).max(64).meta({ description: "an IPv4 or IPv6 address" });
/** A floating address in a path: a dotted quad, or an IPv6 address (hex groups and colons). */
export const FloatingAddress = z.string().regex(/^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]{2,39})$/, {
  error: "is not an IPv4 or IPv6 address (a floating address: a dotted quad, or hex and colons)",
});
const CidrText = z.string().min(1).max(64).meta({ example: "10.1.0.0/24" });

export const NetworkType = z.enum(["vxlan", "vlan", "flat"]);

/**
 * Who carries a network's traffic: "ovs", knitter's own veths on Open vSwitch; "external", another
 * plugin's interfaces (macvlan, ipvlan, host-device, SR-IOV) that take their addresses from the
 * knitter IPAM, on the physnet and VLAN the network documents (agent/README.md, "Knitter as an
 * IPAM plugin").
 */
export const DataPlane = z.enum(["ovs", "external"]);

/** A Linux interface name of the node: 1-15 characters, no '/', ':' or space, not "." or "..". */
const IfName = z.string().regex(
  /^(?!\.\.?$)[A-Za-z0-9_.-]{1,15}$/,
  "must be a node's interface name: 1-15 characters of A-Z, a-z, 0-9, '_', '.', '-' (e.g. eth1)",
);

/**
 * How the agent makes an external network's interface in a pod that names the network in its
 * annotation: the reference CNI plugin it execs, on which interface of the node, with the knitter
 * IPAM for the network (agent/README.md, "Delegated interfaces"). Fixed at creation; the admin's.
 */
export const Delegate = z.discriminatedUnion("plugin", [
  z.strictObject({
    plugin: z.literal("macvlan"),
    master: IfName,
    mode: z.enum(["bridge", "private", "vepa", "passthru"]).optional(),
  }),
  z.strictObject({
    plugin: z.literal("ipvlan"),
    master: IfName,
    mode: z.enum(["l2", "l3", "l3s"]).optional(),
  }),
  z.strictObject({ plugin: z.literal("host-device"), device: IfName }),
  z.strictObject({
    plugin: z.literal("sriov"),
    deviceID: z.string().regex(
      /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/,
      "must be a virtual function's PCI address, e.g. 0000:03:02.0",
    ),
  }),
], { error: "plugin must be macvlan, ipvlan, host-device or sriov" });

export const RouteSchema = z.strictObject({
  dst: CidrText,
  via: IpText.optional().meta({ description: "next hop; absent: through the interface" }),
});

export const DnsSchema = z.strictObject({
  nameservers: z.array(IpText).max(8).optional(),
  domain: z.string().max(253).optional(),
  search: z.array(z.string().max(253)).max(8).optional(),
  options: z.array(z.string().max(64)).max(16).optional(),
});

export const PodRefSchema = z.strictObject({
  namespace: z.string().min(1).max(253),
  name: z.string().min(1).max(253),
  uid: z.string().min(1).max(64).optional(),
});

const Timestamp = z.string().meta({ format: "date-time" });

const UsageSchema = z.object({ total: z.int(), used: z.int(), free: z.int() });

// ---- tenants

export const TenantCreate = z.strictObject({ name: Name });
export const Tenant = z.object({
  name: z.string(),
  createdAt: Timestamp,
  networks: z.int(),
  ipGroups: z.int(),
});

// ---- quotas

const QuotaLimit = z.int().min(0).max(1_000_000_000);

export const QuotaSet = z.strictObject({
  networks: QuotaLimit.optional(),
  ports: QuotaLimit.optional(),
  addresses: QuotaLimit.optional().meta({
    description: "addresses held: ports' (not from a group) and IP groups'",
  }),
  vlanIds: QuotaLimit.optional(),
  vnis: QuotaLimit.optional(),
  floatingIps: QuotaLimit.optional().meta({ description: "floating addresses held" }),
}).meta({ description: "the limits; a kind left out is unlimited" });

const QuotaUsageSchema = z.object({
  networks: z.int(),
  ports: z.int(),
  addresses: z.int(),
  vlanIds: z.int(),
  vnis: z.int(),
  floatingIps: z.int(),
});

export const Quota = z.object({
  tenant: z.string(),
  limits: QuotaSet,
  used: QuotaUsageSchema,
});

// ---- networks

/**
 * Labels of a network, set when it is made: who made it and for what (the monitor marks the
 * networks its Network resources create), as Kubernetes labels say it.
 */
export const Labels = z.record(
  z.string().regex(
    /^[A-Za-z0-9]([A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?$/,
    "label keys are 1-253 characters of A-Z, a-z, 0-9, '.', '_', '/', '-'",
  ),
  z.string().max(256),
).refine((l) => Object.keys(l).length <= 32, "at most 32 labels").meta({
  description: "set at creation, e.g. who manages the network",
});

/**
 * A network's DSCP marking: the six DSCP bits every IPv4 and IPv6 packet its pods send carries
 * (agent/PIPELINE.md, "DSCP marking"); e.g. 46 (EF) for a data plane.
 */
/** A network's IPv6 router advertisements (common/api_types.ts RouterAdvertisements). */
const RouterAdvertisementsSchema = z.strictObject({
  slaac: z.boolean().default(true).meta({
    description: "the A flag: the pods make their own address from the network's /64 prefix",
  }),
  managed: z.boolean().default(false).meta({ description: "the M flag: addresses from DHCPv6" }),
  otherConfig: z.boolean().default(false).meta({
    description: "the O flag: other settings (DNS) from DHCPv6",
  }),
});

const Dscp = z.int({ error: "dscp must be an integer, the DSCP code point 0..63 (e.g. 46 for EF)" })
  .min(0, "dscp must be 0..63 (the six DSCP bits; e.g. 46 for EF)")
  .max(63, "dscp must be 0..63 (the six DSCP bits; e.g. 46 for EF, not the TOS byte 184)")
  .meta({
    description:
      "DSCP (0..63) of the IPv4 and IPv6 its pods send, e.g. 46 (EF); on VXLAN the outer header carries it too; absent: none",
  });

export const NetworkCreate = z.strictObject({
  name: Name,
  type: NetworkType.default("vxlan").meta({
    description:
      "vxlan (a VNI), vlan (a VLAN ID of its physnet) or flat (its physnet's one untagged segment: only an admin, or a cluster monitor, makes one; a tenant token gets 403)",
  }),
  cidr: CidrText,
  gateway: IpText.optional(),
  cidr6: CidrText.optional().meta({
    description:
      "dual stack: the IPv6 subnet of a network whose cidr is IPv4; a port's IPv6 address has its IPv4 address's host part",
  }),
  gateway6: IpText.optional().meta({ description: "the IPv6 gateway, in cidr6" }),
  allocationPools: z.array(z.strictObject({ start: IpText, end: IpText })).max(64).optional(),
  excludes: z.array(z.string().max(100)).max(256).optional().meta({
    description: "addresses, CIDRs or start-end ranges never handed out",
  }),
  public: z.boolean().default(false).meta({ description: "admin only: every tenant may attach" }),
  mtu: z.int().min(576).max(9216).optional(),
  routes: z.array(RouteSchema).max(64).optional(),
  dns: DnsSchema.optional(),
  bandwidth: BandwidthSchema.optional().meta({
    description: "the default bandwidth limits of the network's ports (agent/README.md)",
  }),
  physnet: Name.optional().meta({ description: "required for vlan and flat" }),
  segmentId: z.int().min(1).max(16777215).optional().meta({
    description:
      "VNI (vxlan) or VLAN ID (vlan); allocated from the ranges handed to tenants when absent. Only an admin (or a cluster monitor, within those ranges) chooses one: a tenant token gets 403",
  }),
  description: z.string().max(1024).optional(),
  labels: Labels.optional(),
  securityGroups: GroupNames.optional().meta({
    description: "the security groups of its ports that name none (of the same tenant)",
  }),
  dscp: Dscp.optional(),
  egress: z.boolean().default(false).meta({
    description:
      "its pods reach destinations outside every network their network is routed to through the node, with source NAT to the node's address (TCP, UDP, ICMP; IPv4); needs an IPv4 gateway and a cidr no other hostAccess network overlaps; only an admin (or a cluster monitor) turns it on",
  }),
  hostAccess: z.boolean().default(false).meta({
    description:
      "the node reaches the network's pods on it (kubelet probes, hostPort through the portmap plugin); needs an IPv4 gateway and a cidr no other hostAccess or egress network overlaps; only an admin (or a cluster monitor) turns it on",
  }),
  ipv6RouterAdvertisements: RouterAdvertisementsSchema.optional().meta({
    description:
      "its IPv6 gateway answers the pods' router solicitations and advertises itself, the prefix (slaac: the pods make their address from it; needs a /64) and the M/O flags (agent/PIPELINE.md, Router advertisements); needs an IPv6 subnet with a gateway; fixed at creation",
  }),
  advertise: z.boolean().default(false).meta({
    description:
      "its CIDRs (IPv4 and IPv6) are advertised to the fabric by BGP from the nodes that host its pods, and the fabric reaches its pods without NAT (agent/README.md, BGP advertisement); needs an IPv4 gateway, CIDRs within the manager's bgp.advertisableRanges and overlapping no other advertised network; only an admin turns it on",
  }),
  dataPlane: DataPlane.default("ovs").meta({
    description:
      "ovs: knitter's veths on Open vSwitch carry it; external: another plugin's interfaces (macvlan, ipvlan, host-device, SR-IOV) with the knitter IPAM, on its physnet and segment, and no agent adds flows for its ports; fixed at creation",
  }),
  delegate: Delegate.optional().meta({
    description:
      "external networks only, admin only: the plugin the agent execs for a pod that names the network in its annotation (macvlan/ipvlan on master, host-device's device, sriov's deviceID), with the knitter IPAM; fixed at creation",
  }),
});

/**
 * A network creation as the service takes it: the node settings (egress, hostAccess) may be left
 * out by direct callers (benches, checks), meaning off as the schema's default does.
 */
export type NetworkCreateBody =
  & Omit<z.infer<typeof NetworkCreate>, "egress" | "hostAccess" | "advertise" | "dataPlane">
  & {
    egress?: boolean;
    hostAccess?: boolean;
    advertise?: boolean;
    dataPlane?: z.infer<typeof DataPlane>;
  };

/**
 * A change to a network. Only what existing ports can live with changes (description, MTU, routes,
 * DNS; they reach ports allocated from then on); the other fields may be sent with their current
 * values (a whole spec, as the monitor does) and are refused when they differ.
 */
export const NetworkUpdate = z.strictObject({
  description: z.string().max(1024).optional(),
  mtu: z.int().min(576).max(9216).optional(),
  routes: z.array(RouteSchema).max(64).optional(),
  dns: DnsSchema.optional(),
  bandwidth: BandwidthSchema.nullable().optional().meta({
    description: "the ports' default limits, for ports wired from then on; null: none",
  }),
  type: NetworkType.optional(),
  cidr: CidrText.optional(),
  gateway: IpText.optional(),
  cidr6: CidrText.optional(),
  gateway6: IpText.optional(),
  allocationPools: z.array(z.strictObject({ start: IpText, end: IpText })).max(64).optional(),
  excludes: z.array(z.string().max(100)).max(256).optional(),
  public: z.boolean().optional(),
  physnet: Name.optional(),
  segmentId: z.int().min(1).max(16777215).optional(),
  securityGroups: GroupNames.nullable().optional().meta({
    description: "the default security groups of its ports that name none, at once; null: none",
  }),
  dscp: Dscp.nullable().optional().meta({
    description: "the DSCP marking of its ports' IP traffic, on every node at once; null: none",
  }),
  egress: z.boolean().optional().meta({
    description:
      "its pods reach destinations outside every network their network is routed to through the node, with source NAT to the node's address (TCP, UDP, ICMP; IPv4); needs an IPv4 gateway and a cidr no other hostAccess network overlaps; only an admin (or a cluster monitor) turns it on; at once for every node",
  }),
  hostAccess: z.boolean().optional().meta({
    description:
      "the node reaches the network's pods on it (kubelet probes, hostPort through the portmap plugin); needs an IPv4 gateway and a cidr no other hostAccess or egress network overlaps; only an admin (or a cluster monitor) turns it on; at once for every node",
  }),
  advertise: z.boolean().optional().meta({
    description:
      "its CIDRs are advertised to the fabric by BGP (see create); only an admin turns it on; at once for every node",
  }),
  delegate: Delegate.optional().meta({
    description: "may be sent with its current value only: fixed at creation",
  }),
  deleting: z.boolean().optional().meta({
    description:
      "true: the network is being deleted and takes no new ports (existing ones stay until released); false: open again",
  }),
});

export const Network = z.object({
  id: z.string(),
  tenant: z.string(),
  name: z.string(),
  type: NetworkType,
  cidr: z.string(),
  family: z.union([z.literal(4), z.literal(6)]),
  gateway: z.string().optional(),
  cidr6: z.string().optional(),
  gateway6: z.string().optional(),
  allocationPools: z.array(z.object({ start: z.string(), end: z.string() })),
  excludes: z.array(z.string()),
  public: z.boolean(),
  mtu: z.int(),
  routes: z.array(RouteSchema),
  dns: DnsSchema,
  bandwidth: BandwidthSchema.optional(),
  physnet: z.string().optional(),
  segmentId: z.int().optional(),
  description: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  deletingSince: Timestamp.optional().meta({
    description: "set while the network is being deleted: it takes no new ports",
  }),
  createdAt: Timestamp,
  usage: UsageSchema,
  securityGroups: z.array(z.string()).optional(),
  dscp: z.int().optional(),
  egress: z.boolean().meta({ description: "its pods reach the outside through the node (SNAT)" }),
  hostAccess: z.boolean().meta({ description: "the node reaches its pods on this network" }),
  advertise: z.boolean().meta({ description: "its CIDRs are advertised to the fabric by BGP" }),
  advertisedBy: z.string().optional().meta({
    description: "the router whose advertise advertises it (absent: its own setting)",
  }),
  ipv6RouterAdvertisements: RouterAdvertisementsSchema.optional().meta({
    description: "its IPv6 gateway sends router advertisements, so set",
  }),
  dataPlane: z.literal("external").optional().meta({
    description: "another plugin's interfaces carry it (the knitter IPAM); absent: Open vSwitch",
  }),
  delegate: Delegate.optional().meta({
    description: "how the agent makes its interfaces for a pod's annotation",
  }),
});

// ---- physnets

const VlanRange = z.strictObject({
  start: z.int().min(1).max(4094),
  end: z.int().min(1).max(4094),
});

export const PhysnetCreate = z.strictObject({
  name: Name,
  vlanRanges: z.array(VlanRange).max(64).default([]).meta({
    description: "VLAN IDs handed to vlan networks that do not name one",
  }),
  description: z.string().max(1024).optional(),
});

const ADMIN_VIEW = {
  description: "admin and node tokens only (a tenant sees name, vlanRanges, description)",
};

export const Physnet = z.object({
  name: z.string(),
  vlanRanges: z.array(z.object({ start: z.int(), end: z.int() })),
  description: z.string().optional(),
  createdAt: Timestamp.optional().meta(ADMIN_VIEW),
  networks: z.int().optional().meta(ADMIN_VIEW),
  flatNetwork: z.string().optional().meta(ADMIN_VIEW),
  usage: UsageSchema.optional().meta({
    description: `VLAN IDs of vlanRanges; ${ADMIN_VIEW.description}`,
  }),
});

// ---- IP groups

/** A group's addresses are written in one commit, which takes at most 1000 writes. */
export const MAX_GROUP_SIZE = 512;

export const IpGroupCreate = z.strictObject({
  name: Name,
  network: Name,
  addresses: z.array(IpText).min(1).max(MAX_GROUP_SIZE).optional(),
  size: z.int().min(1).max(MAX_GROUP_SIZE).optional(),
});

export const IpGroupUpdate = z.strictObject({
  addresses: z.array(IpText).min(1).max(MAX_GROUP_SIZE).optional().meta({
    description: "the new set of addresses; addresses in use must stay",
  }),
  size: z.int().min(1).max(MAX_GROUP_SIZE).optional().meta({
    description: "grow with any free addresses, or shrink by dropping unused ones",
  }),
});

export const IpGroup = z.object({
  name: z.string(),
  tenant: z.string(),
  network: z.string(),
  networkTenant: z.string(),
  size: z.int(),
  used: z.int(),
  addresses: z.array(z.object({ ip: z.string(), port: z.string().optional() })),
  createdAt: Timestamp,
});

// ---- claims (service/claims.ts)

export const ClaimCreate = z.strictObject({
  name: ClaimName.meta({ description: "unique among the tenant's claims on the network" }),
});

export const Claim = z.object({
  name: z.string(),
  tenant: z.string(),
  network: z.string(),
  networkTenant: z.string(),
  ip: z.string().meta({ description: "the address it holds, from its creation to its deletion" }),
  address: z.string().meta({ description: "the address with its prefix length" }),
  ip6: z.string().optional().meta({ description: "dual stack: the IPv6 address paired with ip" }),
  address6: z.string().optional().meta({ description: "dual stack: ip6 with its prefix length" }),
  mac: z.string(),
  ports: z.array(z.object({
    id: z.string(),
    node: z.string().optional(),
    pod: PodRefSchema.optional(),
    active: z.boolean().meta({ description: "whether it has the claim's traffic (one does)" }),
  })).meta({
    description: "the ports bound to it: none, one, or two during a live migration",
  }),
  createdAt: Timestamp,
});

// ---- floating addresses (service/floating_pools.ts, service/floating_ips.ts)

export const FloatingPoolCreate = z.strictObject({
  name: Name,
  cidrs: z.array(CidrText).min(1).max(16).meta({
    description:
      "CIDRs the fabric routes to the nodes (or a flat external network's), all IPv4 (each a /16 at the widest) or all IPv6 (each a /112 at the widest)",
  }),
  description: z.string().max(1024).optional(),
});

export const FloatingPool = z.object({
  name: z.string(),
  cidrs: z.array(z.string()),
  description: z.string().optional(),
  createdAt: Timestamp,
  usage: z.object({
    total: z.int(),
    held: z.int(),
    quarantined: z.int(),
    free: z.int(),
  }).optional().meta({
    description:
      "in the list, for an admin only (it counts every tenant's): addresses a tenant may get, held by tenants, in quarantine, free",
  }),
});

export const FloatingIpCreate = z.strictObject({
  pool: Name.meta({ description: "the admin's pool to take it from" }),
  address: IpText.optional().meta({ description: "this one (else the pool's first free one)" }),
});

export const FloatingIpBind = z.strictObject({
  network: Name.meta({ description: "the port's network (the tenant's own or a public one)" }),
  port: PortId.optional().meta({ description: "the port's ID (or claim)" }),
  claim: ClaimName.optional().meta({
    description: "a claim instead: its active port has the address (it follows a live migration)",
  }),
});

export const FloatingIp = z.object({
  address: z.string(),
  pool: z.string(),
  tenant: z.string(),
  createdAt: Timestamp,
  port: z.object({ network: z.string(), id: z.string() }).optional().meta({
    description: "the port it is bound to; absent: held, unbound (or bound to a claim)",
  }),
  claim: z.object({ network: z.string(), name: z.string() }).optional().meta({
    description: "the claim it is bound to",
  }),
});

export const FloatingStint = z.object({
  address: z.string(),
  pool: z.string(),
  tenant: z.string(),
  port: z.object({ network: z.string(), id: z.string() }).optional(),
  claim: z.object({ network: z.string(), name: z.string() }).optional(),
  from: Timestamp,
  to: Timestamp.optional().meta({ description: "absent while the stint goes on" }),
  ended: z.enum(["released", "unbound", "bound"]).optional().meta({
    description: "what ended it: released, unbound, or bound (to the next stint's port or claim)",
  }),
});

// ---- routers

/** A router's static route: `dst` through a pod's address on one of its networks. */
const StaticRoute = z.strictObject({
  dst: CidrText.meta({ description: "an IPv4 or IPv6 destination CIDR" }),
  via: IpText.meta({
    description: "the next hop, of dst's family: a port's address on a connected network",
  }),
});

export const RouterUpdate = z.strictObject({
  networks: z.array(Name).min(1).max(16).meta({
    description: "the tenant's own private networks with a gateway (IPv4, IPv6 or both), CIDRs " +
      "disjoint per family",
  }),
  routes: z.array(StaticRoute).max(64).optional(),
  description: z.string().max(256).optional(),
  advertise: z.boolean().optional().meta({
    description:
      "every network the router connects is advertised to the fabric by BGP, as if each had its own advertise (the same checks, all or none), and those attached later; detaching a network, turning it off or deleting the router withdraws them; only an admin turns it on; absent: unchanged (off for a new router)",
  }),
});

export const RouterCreate = RouterUpdate.extend({ name: Name });

export const Router = z.object({
  name: z.string(),
  tenant: z.string(),
  networks: z.array(z.object({
    name: z.string(),
    id: z.string(),
    cidr: z.string(),
    gateway: z.string(),
    cidr6: z.string().optional().meta({ description: "a dual-stack network's IPv6 subnet" }),
    gateway6: z.string().optional().meta({ description: "its IPv6 gateway: routed too" }),
  })),
  routes: z.array(z.object({ dst: z.string(), via: z.string() })),
  description: z.string().optional(),
  createdAt: Timestamp,
  advertise: z.boolean().meta({
    description: "every network it connects is advertised to the fabric by BGP",
  }),
});

// ---- mirrors

/** Mirrors in one tenant (each is an OVS Mirror row on the nodes of its ports). */
export const MAX_MIRRORS_PER_TENANT = 64;
/** Source ports of one mirror. */
export const MAX_MIRROR_SOURCES = 16;
/** Rules of one mirror's filter: each is a flow per source port and port block on the node. */
export const MAX_MIRROR_FILTER_RULES = 4;

const MirrorFilterRule = z.strictObject({
  protocol: z.enum(["tcp", "udp", "icmp", "any"]),
  ports: PortRange.optional().meta({
    description: "tcp and udp only: the destination port or range the pod sends to; absent: any",
  }),
  remote: z.string().min(1).max(64).optional().meta({
    description: "the IPv4 CIDR the pod sends to; absent: any",
    example: "10.1.0.0/24",
  }),
});

const MirrorPortRef = z.strictObject({
  network: Name.meta({ description: "the network of the port (the tenant's own, or public)" }),
  port: scopedParam(PortId).meta({
    description: "the port's ID (another cluster's: ID@cluster); a port of the mirror's tenant",
  }),
});

const RemoteCollector = z.strictObject({
  remote: z.strictObject({
    ip: IpText.meta({ description: "the collector's IPv4 address, reached over the underlay" }),
    protocol: z.enum(["gre", "erspan", "vxlan"]).meta({
      description: "gre (Ethernet in GRE), erspan (ERSPAN type II) or vxlan (UDP port 4789)",
    }),
    session: z.int().min(0).max(1023).optional().meta({
      description: "erspan only: the ERSPAN session ID the copies carry (0 when left out)",
    }),
    vni: z.int().min(1).max(16_777_215).optional().meta({
      description: "vxlan only, and needed there: the VNI the copies carry",
    }),
  }),
}).meta({ description: "a collector over a tunnel from each source's node: admin only" });

export const MirrorCreate = z.strictObject({
  name: Name,
  sources: z.array(MirrorPortRef).min(1).max(MAX_MIRROR_SOURCES).meta({
    description: "the ports whose traffic is copied: the tenant's own",
  }),
  direction: z.enum(["in", "out", "both"]).default("both").meta({
    description: 'the pod\'s point of view: "out" is what it sends, "in" what it receives',
  }),
  filter: z.array(MirrorFilterRule).min(1).max(MAX_MIRROR_FILTER_RULES).optional().meta({
    description:
      "copy only what matches one of these rules (direction out, a collector port): what the pod sends, by protocol, destination port and remote CIDR",
  }),
  collector: z.union([MirrorPortRef, RemoteCollector]).meta({
    description:
      "a port of the same tenant on the sources' node (a collector pod's), or a remote address (admin)",
  }),
});

const MirrorPort = z.object({ network: z.string(), networkId: z.string(), id: z.string() });

export const Mirror = z.object({
  name: z.string(),
  tenant: z.string(),
  sources: z.array(MirrorPort),
  direction: z.enum(["in", "out", "both"]),
  filter: z.array(MirrorFilterRule).optional(),
  collector: z.union([
    MirrorPort,
    z.object({
      remote: z.object({
        ip: z.string(),
        protocol: z.enum(["gre", "erspan", "vxlan"]),
        session: z.int().optional(),
        vni: z.int().optional(),
      }),
    }),
  ]),
  createdAt: Timestamp,
});

// ---- services (service/services.ts)

/** Services in one tenant. */
export const MAX_SERVICES_PER_TENANT = 64;
/** Ports of one service: one select group each on every node of the network. */
export const MAX_SERVICE_PORTS = 16;
/** Backends of one service: one bucket each in each of its groups. */
export { MAX_SERVICE_BACKENDS };

const PortNumber = z.int().min(1, "must be 1-65535").max(65535, "must be 1-65535");

const ServicePortSpec = z.strictObject({
  name: Name.optional(),
  protocol: z.enum(["TCP", "UDP"]).default("TCP"),
  port: PortNumber.meta({ description: "the port clients reach on the VIP" }),
  targetPort: PortNumber.optional().meta({
    description: "the port the backends listen on; absent: the same as port",
  }),
});

const ServiceBackends = z.array(scopedParam(PortId)).max(
  MAX_SERVICE_BACKENDS,
  `at most ${MAX_SERVICE_BACKENDS} backends`,
).meta({
  description:
    "IDs of the tenant's ports on the network; a port bound to a node is an endpoint (none: the VIP answers nothing)",
});

export const ServiceUpdate = z.strictObject({
  ports: z.array(ServicePortSpec).min(1).max(
    MAX_SERVICE_PORTS,
    `at most ${MAX_SERVICE_PORTS} ports`,
  ),
  backends: ServiceBackends.default([]),
  selector: Labels.optional().meta({
    description:
      "the tenant's ports of the network whose labels include all of these are backends too (matching none is allowed: no endpoints)",
  }),
  sessionAffinity: z.enum(["None", "ClientIP"]).default("None").meta({
    description: "ClientIP: every connection from one client address goes to the same backend",
  }),
});

const IpFamilyEnum = z.enum(["IPv4", "IPv6"]);
const IpFamilyPolicyEnum = z.enum(["SingleStack", "PreferDualStack", "RequireDualStack"]);

export const ServiceCreate = ServiceUpdate.extend({
  name: Name,
  network: Name.meta({ description: "a network of the tenant's own (IPv4, IPv6 or dual-stack)" }),
  vip: IpText.optional().meta({
    description:
      "a free address of the network's pools, of the first family of ipFamilies; absent: one is taken from the pools",
  }),
  ipFamilies: z.array(IpFamilyEnum).min(1).max(2).refine(
    (f) => new Set(f).size === f.length,
    "each family at most once",
  ).optional().meta({
    description:
      "the VIPs' families, the first the primary one (vip); absent: the network's own (\"IPv4\" on a dual-stack network)",
  }),
  ipFamilyPolicy: IpFamilyPolicyEnum.optional().meta({
    description:
      "SingleStack (default; RequireDualStack when ipFamilies has two): one VIP; PreferDualStack: one per family of the network; RequireDualStack: both, on a dual-stack network only",
  }),
});

const ServiceEndpoint = z.object({
  port: z.string(),
  ip: z.string(),
  node: z.string(),
});

export const Service = z.object({
  name: z.string(),
  tenant: z.string(),
  network: z.string(),
  networkId: z.string(),
  vip: z.string().meta({ description: "the VIP of the first family: vips[0]" }),
  vips: z.array(z.string()).meta({
    description: "one VIP per family, in ipFamilies' order (dual-stack: the IPv4 VIP's pair)",
  }),
  ipFamilies: z.array(IpFamilyEnum),
  ipFamilyPolicy: IpFamilyPolicyEnum,
  ports: z.array(z.object({
    name: z.string().optional(),
    protocol: z.enum(["TCP", "UDP"]),
    port: z.int(),
    targetPort: z.int(),
  })),
  backends: z.array(z.string()),
  selector: z.record(z.string(), z.string()).optional(),
  sessionAffinity: z.enum(["None", "ClientIP"]),
  createdAt: Timestamp,
  status: z.object({
    endpoints: z.array(ServiceEndpoint).meta({
      description:
        "the backends that are ports bound to a node: where new connections go; one per backend and family of the service (its address of that family)",
    }),
    message: z.string().optional().meta({
      description: 'why some backends or all are not endpoints (e.g. "no endpoints: ...")',
    }),
  }).optional().meta({ description: "answered to the tenant and admins, not on the feed" }),
});

// ---- ports

export const PortRequest = z.strictObject({
  ip: IpText.optional().meta({ description: "a fixed address; must be free and in the pools" }),
  ipGroup: Name.optional().meta({ description: "take the address from this IP group" }),
  mac: z.string().regex(MAC_RE, "must be a lowercase MAC address like 02:00:0a:01:00:05")
    .optional(),
  node: scopedParam(NodeName).optional().meta({
    description:
      "binds the port to this node: an admin, or the node's own token (its agent), which binds to itself and never takes a port bound to another node",
  }),
  pod: PodRefSchema.optional().meta({
    description:
      "the pod it is for: of the port's tenant's namespace (403 otherwise, for tenant and node tokens); a stable port (stable:NS:NAME-IFNAME) a node token binds only to the pod its ID names",
  }),
  interface: z.string()
    .regex(PLAIN_IFNAME_RE, `must be a Linux interface name (${PLAIN_IFNAME_RULE})`)
    .optional(),
  bandwidth: BandwidthSchema.optional().meta({
    description:
      "the port's own limits, set when it is created: they win over the runtime's and the network's",
  }),
  securityGroups: GroupNames.optional().meta({
    description:
      "security groups of the port's tenant; a later PUT may change them ([] for none: its network's)",
  }),
  claim: ClaimName.optional().meta({
    description:
      "bind it to this claim of the port's tenant on the network: it gets the claim's address and MAC, never new ones (no ip, ipGroup or mac with it); a second port of the claim is a live migration's target, made inactive; a third is 409",
  }),
  labels: Labels.optional().meta({
    description:
      "set when the port is created (later PUTs keep them): what service selectors match",
  }),
});

/** PATCH of a port: its security groups alone, on an existing port of the named network. */
export const PortGroupsUpdate = z.strictObject({
  networkId: z.string().min(1).max(64).meta({
    description:
      "the ID of the network the caller saw the port on; another is 409, nothing changed",
  }),
  securityGroups: GroupNames.meta({
    description: "security groups of the port's tenant ([] for none: its network's defaults)",
  }),
});

// ---- conflicts (service/conflicts.ts)

/** Entries one report may hold: a node leaves out few ports, and never more than it sees. */
export const MAX_CONFLICTS = 1000;

const ConflictField = z.enum(["mac", "ip"]).meta({ description: "what the two claimants share" });
const ConflictReason = z.enum(["local", "remote"]).meta({
  description:
    "local: it claims the MAC or address of a pod on the reporting node (the local pod wins there); " +
    "remote: another port of another node claims it too (all claimants are left out there)",
});
const ConflictPeer = z.strictObject({ tenant: Name, id: scopedParam(PortId) }).meta({
  description: "the other claimant, as the reporting node knows it (a local pod's port may be " +
    "one the manager released already: a lost DEL)",
});

/** One port a node leaves out of its flows, as the node reports it. */
export const ConflictReportItem = z.strictObject({
  networkId: z.string().min(1).max(64),
  tenant: Name.meta({ description: "the port's tenant" }),
  id: scopedParam(PortId).meta({ description: "the port's ID (another cluster's: ID@cluster)" }),
  field: ConflictField,
  value: z.string().min(1).max(64).meta({ description: "the shared MAC or address" }),
  reason: ConflictReason,
  with: ConflictPeer.optional(),
});

export const ConflictReport = z.strictObject({
  items: z.array(ConflictReportItem).max(MAX_CONFLICTS).meta({
    description: "every port the node leaves out now; an empty list clears the node's record",
  }),
});

export const NodeConflicts = z.object({
  node: z.string(),
  updatedAt: Timestamp,
  items: z.array(ConflictReportItem.extend({ since: Timestamp })),
  ignored: z.int().optional().meta({
    description:
      "entries of the report not kept: the port is unknown, bound to no node or to the " +
      "reporting node, or does not hold that MAC or address",
  }),
});

export const PortConflict = z.object({
  node: z.string().meta({ description: "the node that leaves this port out of its flows" }),
  field: ConflictField,
  value: z.string(),
  reason: ConflictReason,
  with: ConflictPeer.optional().meta({
    description: "the other claimant; shown to a tenant only when it is the tenant's own",
  }),
  since: Timestamp.meta({ description: "since when that node reports it" }),
});

export const Port = z.object({
  id: z.string(),
  tenant: z.string(),
  network: z.string(),
  networkTenant: z.string(),
  networkId: z.string(),
  type: NetworkType,
  segmentId: z.int().optional(),
  physnet: z.string().optional(),
  ip: z.string(),
  address: z.string().meta({ description: "address with prefix length" }),
  family: z.union([z.literal(4), z.literal(6)]),
  gateway: z.string().optional(),
  ip6: z.string().optional().meta({ description: "dual stack: the IPv6 address" }),
  address6: z.string().optional().meta({ description: "dual stack: IPv6 address with prefix" }),
  gateway6: z.string().optional(),
  mac: z.string(),
  mtu: z.int(),
  routes: z.array(RouteSchema),
  dns: DnsSchema,
  ipGroup: z.string().optional(),
  node: z.string().optional(),
  pod: PodRefSchema.optional(),
  interface: z.string().optional(),
  bandwidth: BandwidthSchema.optional().meta({ description: "the port's own limits" }),
  networkDscp: z.int().optional().meta({
    description: "its network's DSCP marking of the IP traffic the port sends",
  }),
  networkBandwidth: BandwidthSchema.optional().meta({
    description: "its network's default limits, where the port's own and the runtime's set none",
  }),
  createdAt: Timestamp,
  unboundAt: Timestamp.optional().meta({
    description: "since when the port has no pod and node (unbound), its address kept",
  }),
  securityGroups: z.array(z.string()).optional().meta({
    description: "the security groups the port names; absent: its network's",
  }),
  networkSecurityGroups: z.array(z.string()).optional().meta({
    description: "its network's default security groups",
  }),
  labels: z.record(z.string(), z.string()).optional().meta({
    description: "set when the port was created: what service selectors match",
  }),
  networkEgress: z.literal(true).optional().meta({
    description: "its network has egress: the agent puts the node on it (source NAT)",
  }),
  networkHostAccess: z.literal(true).optional().meta({
    description: "its network has hostAccess: the agent puts the node on it",
  }),
  networkAdvertise: z.literal(true).optional().meta({
    description: "its network is advertised to the fabric by BGP: the agent puts the node on it",
  }),
  networkRouterAdvertisements: RouterAdvertisementsSchema.optional().meta({
    description: "its network's gateway sends IPv6 router advertisements, so set",
  }),
  networkDataPlane: z.literal("external").optional().meta({
    description: "another plugin's interface has the port (the knitter IPAM): no agent adds flows",
  }),
  networkDelegate: Delegate.optional().meta({
    description: "its network's delegate: the plugin the agent execs for a pod's annotation",
  }),
  claim: z.string().optional().meta({
    description: "the claim whose address and MAC it has; they stay the claim's when it goes",
  }),
  floating: z.string().optional().meta({
    description: "the floating IPv4 address bound to it: 1:1 NAT at its node",
  }),
  floating6: z.string().optional().meta({
    description: "the floating IPv6 address bound to its IPv6 address: 1:1 NAT at its node",
  }),
  active: z.literal(false).optional().meta({
    description:
      "false while another port of its claim has the claim's traffic (a live migration); absent: active",
  }),
  conflicts: z.array(PortConflict).optional().meta({
    description:
      "nodes that leave this port out of their flows because another port claims its MAC or " +
      "address there (agent/PIPELINE.md, Conflicting entries); absent when none does",
  }),
});

export const PortQuery = z.strictObject({
  node: scopedParam(NodeName).optional(),
  pod: z.string().regex(/^[^/]+\/[^/]+$/, "must be namespace/name").optional(),
  tenant: Name.optional(),
});

// ---- address history (service/history.ts)

const TimeText = z.string().min(1).max(64).meta({
  description: "ISO 8601 date-time, e.g. 2026-11-25T03:00:00Z",
});

export const HistoryQuery = z.strictObject({
  ip: IpText.optional().meta({ description: "the address (this or mac)" }),
  mac: z.string().min(1).max(64).optional().meta({ description: "the MAC (this or ip)" }),
  at: TimeText.optional().meta({ description: "who held it at this time" }),
  from: TimeText.optional().meta({ description: "who held it at any time from this one" }),
  to: TimeText.optional().meta({ description: "who held it at any time up to this one" }),
  tenant: Name.optional().meta({ description: "GET /history (admin): only this tenant's" }),
}).refine((q) => (q.ip === undefined) !== (q.mac === undefined), {
  message: "give either ip or mac",
  path: ["ip"],
}).refine((q) => q.at === undefined || (q.from === undefined && q.to === undefined), {
  message: "give at, or from and/or to, not both",
  path: ["at"],
});

export const HistoryEntry = z.object({
  tenant: z.string().meta({ description: "the tenant of the port that held it" }),
  network: z.string(),
  networkTenant: z.string(),
  networkId: z.string(),
  port: z.string().meta({ description: "the port's ID" }),
  ip: z.string(),
  mac: z.string(),
  pod: PodRefSchema.optional(),
  node: z.string().optional(),
  interface: z.string().optional(),
  from: Timestamp,
  to: Timestamp.optional().meta({ description: "absent: it holds it still" }),
  ended: z.enum(["released", "unbound", "bound"]).optional().meta({
    description: "what ended the holding: the port released, unbound, or bound to a pod or node",
  }),
});

// ---- nodes

export const MAX_LABELS = 64;

export const NodeRegister = z.strictObject({
  underlayIp: IpText.meta({ description: "the node's tunnel endpoint" }),
  labels: z.record(z.string().max(317), z.string().max(63)).refine(
    (l) => Object.keys(l).length <= MAX_LABELS,
    `at most ${MAX_LABELS} labels`,
  ).optional(),
});

const INFRA_ONLY = { description: "admin and node tokens only (a tenant sees the name)" };

export const Node = z.object({
  name: z.string(),
  underlayIp: z.string().optional().meta(INFRA_ONLY),
  labels: z.record(z.string(), z.string()).optional().meta(INFRA_ONLY),
  registeredAt: Timestamp.optional().meta(INFRA_ONLY),
  updatedAt: Timestamp.optional().meta(INFRA_ONLY),
});

// ---- common

export const ErrorSchema = z.object({
  error: z.object({
    code: z.string().meta({ description: "stable, machine-readable" }),
    message: z.string(),
    field: z.string().optional(),
  }),
});

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item) });
}

// ---- change feed

export const FeedQuery = z.strictObject({
  after: z.string().regex(/^[0-9a-f]{8}:\d+(:-?\d+)?$/, "must be a cursor from an earlier answer")
    .optional()
    .meta({
      description:
        "absent: answer the current cursor at once, with no events; streamed, follow from now (the first, empty page carries the cursor)",
    }),
  timeout: z.string().regex(/^\d{1,9}$/, "must be a whole number of seconds").optional()
    .transform((v) => (v === undefined ? 25 : Number(v)))
    .pipe(z.int().min(0).max(60, "must be at most 60 seconds"))
    .meta({
      description:
        "seconds to wait for the first event (0-60, default 25); streamed, the longest a stream goes without a line (at least 1)",
    }),
  stream: z.enum(["ndjson", "websocket"]).optional().meta({
    description:
      "ndjson: one long answer (application/x-ndjson) carrying a FeedPage a line as changes come, an empty page after `timeout` seconds without one; a line {error} ends it (feed_expired: list again). websocket (with a WebSocket handshake): the same lines, one binary message each, then a close (1000 after a last {error} line, the only one for an expired cursor, 1008 when the follower read nothing of 1 MiB queued for it); 501 feed_socket_unavailable on the port of a manager behind its connection guard: open the socket on its feed socket port (GET /feed/socket; config listen.feedSocketPort). Without 'after' it follows from now.",
  }),
});

export const FeedSocketInfo = z.object({
  port: z.int().meta({
    description:
      "the port of the feed's WebSocket listener (same host and scheme as the API, ws or wss); open GET `path`?after=…&stream=websocket there",
  }),
  path: z.string(),
});

export const FeedPage = z.object({
  cursor: z.string(),
  events: z.array(z.object({
    seq: z.int(),
    type: z.enum(["port", "node", "router", "securityGroup", "mirror", "service"]),
    op: z.enum(["put", "delete"]),
    port: Port.optional(),
    node: Node.optional(),
    router: Router.optional(),
    securityGroup: SecurityGroup.optional(),
    mirror: Mirror.optional(),
    service: Service.optional(),
  })),
});

// ---- clusters (service/clusters.ts)

const SCOPED_SUFFIX = /@[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * A node or port named in a path: as its cluster's tokens name it, or, for an admin, with its
 * cluster ("worker1@east"; service/cluster_names.ts).
 */
export function scopedParam(bare: z.ZodType<string>) {
  return z.string().refine(
    (v) => bare.safeParse(v.replace(SCOPED_SUFFIX, "")).success,
    "must be a name, optionally followed by @cluster",
  );
}

const ClusterTenants = z.array(z.union([Name, z.literal("*")])).max(1000).meta({
  description:
    "tenants (namespaces) whose pods may run in it and whose networks it may use; '*': all " +
    "(with networks and physnets, at most what one stored record holds, about 64 KB)",
});
const ClusterNetworks = z.array(
  z.string().regex(/^[a-z0-9-]{1,63}\/[a-z0-9-]{1,63}$/, "must be tenant/network"),
).max(1000).meta({ description: "networks of other tenants it may use too, as tenant/network" });
const ClusterPhysnets = z.array(z.union([Name, z.literal("*")])).max(256).meta({
  description:
    "physnets its nodes are attached to: its VLAN and flat networks may only be on these; '*': all",
});

export const ClusterCreate = z.strictObject({
  name: Name,
  description: z.string().max(256).optional(),
  tenants: ClusterTenants.optional(),
  networks: ClusterNetworks.optional(),
  physnets: ClusterPhysnets.optional(),
});

export const ClusterUpdate = ClusterCreate.omit({ name: true });

export const Cluster = z.object({
  name: z.string(),
  description: z.string().optional(),
  tenants: z.array(z.string()),
  networks: z.array(z.string()),
  physnets: z.array(z.string()),
  nodes: z.array(z.string()).optional().meta({ description: "its registered nodes (GET of one)" }),
  credentials: z.object({ monitors: z.int(), nodes: z.array(z.string()) }).optional().meta({
    description: "the manager's tokens of the cluster (GET of one): monitor tokens, nodes with one",
  }),
  deletingSince: Timestamp.optional().meta({
    description: "a delete is under way: the cluster takes no new ports",
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

// ---- trace between two ports, from the model (routes/trace.ts)

const TraceEnd = z.strictObject({ network: Name, port: PortId });

export const TraceRequest = z.strictObject({
  from: TraceEnd.meta({ description: "the source port: bound to a node" }),
  to: TraceEnd.meta({ description: "the destination port: the packet goes to its address" }),
  proto: z.enum(["icmp", "tcp", "udp"]).default("icmp"),
  dport: z.int().min(0).max(65535).optional().meta({ description: "tcp or udp only" }),
}).refine((r) => r.dport === undefined || r.proto !== "icmp", {
  message: "dport goes with proto tcp or udp",
  path: ["dport"],
});

export const TraceReport = z.object({
  mode: z.literal("offline"),
  source: z.object({ port: z.string(), network: z.string(), node: z.string() }),
  packet: z.looseObject({}),
  target: z.looseObject({}),
  hops: z.array(z.looseObject({})).meta({
    description: "per node: the flows the packet matches, step by step, and its outcomes",
  }),
  result: z.string(),
  delivered: z.boolean(),
});
