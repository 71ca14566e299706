/**
 * What the demo builds, as data: two tenants, their networks, a router, and pods on two nodes. The
 * expected connectivity follows from it alone: an interface reaches the addresses of its own network
 * (same tenant, same network), and those of a network its tenant's router connects to its own
 * (through the gateways its default route points at); other networks and other tenants stay out of
 * reach.
 */

export const PHYSNET = "phys1";
export const NODES = ["n1", "n2"];

export interface DemoNetwork {
  tenant: string;
  name: string;
  type: "vxlan" | "vlan";
  cidr: string;
  gateway: string;
  physnet?: string;
  allocationPools?: { start: string; end: string }[];
  /** One line for the newcomer: what the network stands for. */
  role: string;
}

export interface DemoPod {
  name: string;
  tenant: string;
  node: string;
  /** In order: eth0, net1, net2, ... */
  networks: string[];
}

export const TENANTS = ["tenant-a", "tenant-b"];

export const NETWORKS: DemoNetwork[] = [
  {
    tenant: "tenant-a",
    name: "control",
    type: "vxlan",
    cidr: "10.10.0.0/24",
    gateway: "10.10.0.1",
    role: "control plane, VXLAN overlay",
  },
  {
    tenant: "tenant-a",
    name: "data",
    type: "vxlan",
    cidr: "10.20.0.0/24",
    gateway: "10.20.0.1",
    role: "data plane, VXLAN overlay",
  },
  {
    tenant: "tenant-a",
    name: "mgmt",
    type: "vlan",
    physnet: PHYSNET,
    cidr: "10.30.0.0/24",
    gateway: "10.30.0.1",
    role: `management, a VLAN on physnet ${PHYSNET}`,
  },
  {
    tenant: "tenant-b",
    name: "private",
    type: "vxlan",
    // The same CIDR as tenant-a's control network: isolation does not depend on addresses. Its
    // pool starts at .100 so that every address in the demo names one interface.
    cidr: "10.10.0.0/24",
    gateway: "10.10.0.1",
    allocationPools: [{ start: "10.10.0.100", end: "10.10.0.199" }],
    role: "another tenant, same CIDR as tenant-a/control",
  },
];

export interface DemoRouter {
  tenant: string;
  name: string;
  networks: string[];
  role: string;
}

/** tenant-a routes between its control plane and its management VLAN; data stays apart. */
export const ROUTERS: DemoRouter[] = [
  {
    tenant: "tenant-a",
    name: "oam",
    networks: ["control", "mgmt"],
    role: "control plane and management reach each other",
  },
];

/** Made one after another, in this order, so that the addresses come out the same every run. */
export const PODS: DemoPod[] = [
  { name: "edge", tenant: "tenant-a", node: "n1", networks: ["control", "data"] },
  { name: "ctl", tenant: "tenant-a", node: "n2", networks: ["control"] },
  { name: "user", tenant: "tenant-a", node: "n2", networks: ["data"] },
  { name: "oam1", tenant: "tenant-a", node: "n1", networks: ["mgmt"] },
  { name: "oam2", tenant: "tenant-a", node: "n2", networks: ["mgmt"] },
  { name: "b1", tenant: "tenant-b", node: "n1", networks: ["private"] },
  { name: "b2", tenant: "tenant-b", node: "n2", networks: ["private"] },
];

/** The name of a pod's i-th interface, as the agent names them. */
export function ifNameAt(index: number): string {
  return index === 0 ? "eth0" : `net${index}`;
}

/** One pod interface once it has its address. */
export interface Endpoint {
  pod: string;
  node: string;
  tenant: string;
  network: string;
  ifName: string;
  address: string;
  /** The pod's netns (the cni script names it NODE_NETNS-POD). */
  netns: string;
}

/**
 * Whether traffic from `from` should reach `to`: the same network of the same tenant, or two
 * networks a router of the tenant connects, between interfaces that carry their pod's default route
 * (the first: the way to the gateway, there and back).
 */
export function expectReach(from: Endpoint, to: Endpoint): boolean {
  if (from.tenant !== to.tenant) return false;
  if (from.network === to.network) return true;
  const routed = ROUTERS.some((r) =>
    r.tenant === from.tenant && r.networks.includes(from.network) && r.networks.includes(to.network)
  );
  return routed && from.ifName === ifNameAt(0) && to.ifName === ifNameAt(0);
}

/** The pairs the matrix measures: every interface to every other pod's interface. */
export function probePairs(endpoints: Endpoint[]): [Endpoint, Endpoint][] {
  return endpoints.flatMap((from) =>
    endpoints.filter((to) => to.pod !== from.pod).map((to): [Endpoint, Endpoint] => [from, to])
  );
}
