/** Bearer tokens and their scopes, and the one function that decides what a scope may reach. */
import { ApiError } from "./errors.ts";
import type { ClusterRecord } from "./model.ts";
import { DEFAULT_CLUSTER, scoped, unscoped } from "./service/cluster_names.ts";

/**
 * What a cluster lets its nodes and monitor use (service/clusters.ts). Loaded per request
 * (app.ts), so that a change or a deleted cluster takes effect at once.
 */
export type ClusterReach = Pick<
  ClusterRecord,
  "name" | "tenants" | "networks" | "physnets" | "updatedAt"
>;

export type Principal =
  | { scope: "admin" }
  | { scope: "tenant"; tenant: string }
  /** `node` is the node's identity at the manager: its name, scoped by its cluster. */
  | { scope: "node"; node: string; cluster: string; reach?: ClusterReach }
  /** A cluster's monitor: its tenants' networks and IP groups, its cluster's ports. */
  | { scope: "monitor"; cluster: string; reach?: ClusterReach }
  /** Reads /metrics (Prometheus) and nothing else. */
  | { scope: "metrics" };

export interface TokenConfig {
  token: string;
  scope: "admin" | "tenant" | "node" | "monitor" | "metrics";
  tenant?: string;
  node?: string;
  /** The cluster of a node or monitor token; absent: "default". */
  cluster?: string;
}

/**
 * Who may call a route, before the handler looks at the resource:
 * - admin: admin only;
 * - any: every valid token;
 * - tenant: admin, or a tenant token for the path's tenant (or a monitor: see operator);
 * - owner: admin, or a tenant token for the path's tenant, never a monitor (what spans the
 *   tenant's clusters: its address history);
 * - shared: admin, node, or any tenant token; the handler lets a tenant reach another tenant's
 *   path only for public networks (and answers 404 for private ones);
 * - node: admin, or a node token for the path's node;
 * - infra: admin, any node token or a monitor (what only the system's own components read);
 * - operator: admin, or a monitor for its cluster's tenants (a namespace's tenant goes with it).
 *
 * A node or monitor token reaches only the tenants its cluster is allowed (ClusterReach).
 */
export type Access =
  | "admin"
  | "any"
  | "tenant"
  | "owner"
  | "shared"
  | "node"
  | "infra"
  | "operator";

export class TokenTable {
  private readonly byToken = new Map<string, Principal>();

  constructor(tokens: TokenConfig[]) {
    for (const t of tokens) this.byToken.set(t.token, principalOf(t));
  }

  get size(): number {
    return this.byToken.size;
  }

  /** Which tokens a cluster has (never the tokens themselves): its monitors, its nodes by name. */
  ofCluster(cluster: string): { monitors: number; nodes: string[] } {
    let monitors = 0;
    const nodes: string[] = [];
    for (const p of this.byToken.values()) {
      if (p.scope === "monitor" && p.cluster === cluster) monitors++;
      if (p.scope === "node" && p.cluster === cluster) nodes.push(unscoped(p.node).name);
    }
    return { monitors, nodes: nodes.sort() };
  }

  /** The principal of an Authorization header; 401 when it is missing or unknown. */
  authenticate(header: string | undefined): Principal {
    const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
    if (!match) {
      throw new ApiError(
        "unauthorized",
        "Missing bearer token: send 'Authorization: Bearer <token>' with a token from the manager's configuration",
      );
    }
    const principal = this.byToken.get(match[1]);
    if (!principal) throw new ApiError("unauthorized", "Unknown bearer token");
    return principal;
  }
}

function principalOf(t: TokenConfig): Principal {
  switch (t.scope) {
    case "admin":
      return { scope: "admin" };
    case "metrics":
      return { scope: "metrics" };
    case "tenant":
      if (!t.tenant) throw new Error("a tenant-scoped token needs a tenant");
      return { scope: "tenant", tenant: t.tenant };
    case "node": {
      if (!t.node) throw new Error("a node-scoped token needs a node");
      const cluster = t.cluster ?? DEFAULT_CLUSTER;
      return { scope: "node", node: scoped(t.node, cluster), cluster };
    }
    case "monitor":
      return { scope: "monitor", cluster: t.cluster ?? DEFAULT_CLUSTER };
  }
}

export function describe(p: Principal): string {
  switch (p.scope) {
    case "admin":
      return "an admin token";
    case "tenant":
      return `a token of tenant "${p.tenant}"`;
    case "node":
      return `a token of node "${p.node}"`;
    case "monitor":
      return `a monitor token of cluster "${p.cluster}"`;
    case "metrics":
      return "a metrics token";
  }
}

export function authorize(p: Principal, access: Access, params: Record<string, string>): void {
  if (p.scope === "admin") return;
  const deny = (what: string) => {
    throw new ApiError("forbidden", `${describe(p)} may not ${what}`);
  };
  if (p.scope === "metrics") return deny("use the API: it reads /metrics only");
  if (access === "any") return;
  if (p.scope === "node" || p.scope === "monitor") {
    // A network of another tenant allowed to the cluster by name: its shared routes (its ports)
    // pass here, and the handler's checkNetworkReach holds them to the rest (physnets).
    const namedNetwork = access === "shared" && params.network !== undefined &&
      p.reach?.networks.includes(`${params.tenant}/${params.network}`) === true;
    if (params.tenant !== undefined && !namedNetwork && !tenantAllowed(p, params.tenant)) {
      return deny(
        `act for tenant "${params.tenant}": cluster "${p.cluster}" is not allowed it (an admin adds it to the cluster's tenants: PATCH /api/v1/clusters/${p.cluster})`,
      );
    }
  }
  switch (access) {
    case "admin":
      return deny("use this admin-only route");
    case "tenant":
      if (p.scope === "tenant" && params.tenant === p.tenant) return;
      // A monitor makes its cluster's tenants' networks and IP groups from their resources.
      if (p.scope === "monitor") return;
      return deny(`act on tenant "${params.tenant}"`);
    case "owner":
      if (p.scope === "tenant" && params.tenant === p.tenant) return;
      return deny(`read tenant "${params.tenant}"'s history: it is the tenant's or an admin's`);
    case "shared":
      return;
    case "node":
      if (p.scope === "node" && scoped(params.node, p.cluster) === p.node) return;
      return deny(`act on node "${params.node}"`);
    case "infra":
      if (p.scope === "node" || p.scope === "monitor") return;
      return deny("read what only nodes and admins read");
    case "operator":
      if (p.scope === "monitor") return;
      return deny("use this route: it is an admin's or a cluster monitor's");
  }
}

/**
 * Whether a principal may hold addresses of another tenant's network (a public one) in an IP group
 * of a tenant: an admin, or a cluster's monitor, which makes the groups from Kubernetes resources
 * (authorize() kept it to its cluster's tenants, resolveNetworkRef to its cluster's networks).
 * Public networks and segment IDs outside the tenant ranges are the admin's alone
 * (service/networks.ts).
 */
export function actsAsOperator(p: Principal): boolean {
  return p.scope === "admin" || p.scope === "monitor";
}

/** Whether a cluster's reach lets its pods belong to `tenant`. */
function tenantAllowed(p: { reach?: ClusterReach }, tenant: string): boolean {
  const reach = p.reach;
  return reach !== undefined && (reach.tenants.includes("*") || reach.tenants.includes(tenant));
}

/** What of a network decides whether a cluster may use it (a record or a port's view). */
export interface NetworkRef {
  tenant: string;
  name: string;
  type: string;
  physnet?: string;
}

/**
 * Whether a cluster may use a network: its tenant is one of the cluster's, or the network is named
 * in its networks; a VLAN or flat network only on a physnet the cluster's nodes are attached to.
 */
export function mayUse(reach: ClusterReach, net: NetworkRef): boolean {
  const listed = tenantAllowed({ reach }, net.tenant) ||
    reach.networks.includes(`${net.tenant}/${net.name}`);
  if (!listed) return false;
  if (net.type === "vxlan" || net.physnet === undefined) return true;
  return reach.physnets.includes("*") || reach.physnets.includes(net.physnet);
}

/**
 * Whether a cluster's pods may be of tenant `owner` on `net`: the cluster serves the tenant, or
 * names the network when it is the tenant's own.
 */
function servesTenant(
  reach: ClusterReach,
  owner: string,
  net: Pick<NetworkRef, "tenant" | "name">,
): boolean {
  return tenantAllowed({ reach }, owner) ||
    (owner === net.tenant && reach.networks.includes(`${net.tenant}/${net.name}`));
}

/**
 * Why a port of tenant `owner` on `net` may not be in the cluster of `reach`, or null when it may:
 * the cluster serves the tenant (or names the network, when it is the tenant's own), and may use
 * the network (another tenant's public one by name; a VLAN or flat one only on its physnets).
 */
export function placementRefusal(
  reach: ClusterReach,
  owner: string,
  net: NetworkRef,
): string | null {
  if (!servesTenant(reach, owner, net)) {
    return `cluster "${reach.name}" does not serve tenant "${owner}"`;
  }
  if (mayUse(reach, net)) return null;
  const on = net.physnet === undefined ? "" : ` (on physnet "${net.physnet}")`;
  return `cluster "${reach.name}" may not use network "${net.tenant}/${net.name}"${on}`;
}

/** Refuses a node or monitor token a network its cluster may not use (403). */
export function checkNetworkReach(p: Principal, net: NetworkRef): void {
  if (p.scope !== "node" && p.scope !== "monitor") return;
  if (p.reach && mayUse(p.reach, net)) return;
  throw new ApiError(
    "forbidden",
    `Network "${net.tenant}/${net.name}" is not available in cluster "${p.cluster}": an admin adds its tenant or the network to the cluster (PATCH /api/v1/clusters/${p.cluster})${
      net.physnet
        ? `, and physnet "${net.physnet}" to its physnets if its nodes are attached to it`
        : ""
    }`,
  );
}

/** What a tenant owns (a router, a security group): its tenant, the networks it is on, if any. */
export interface TenantOwned {
  tenant: string;
  /** Its networks, of its tenant: names, or `{ name }` as a router lists them. */
  networks?: readonly (string | { name: string })[];
}

/**
 * Whether a token sees an object a tenant owns (the one rule for routers, security groups and
 * whatever else a tenant owns and the infra lists or feeds): a tenant only its own (an admin, and
 * the handlers' own checks, all); a node or monitor when its cluster may serve the object's tenant,
 * or one of the object's networks is allowed its cluster by name (`tenant/name`).
 */
export function seesOwned(p: Principal, obj: TenantOwned): boolean {
  if (p.scope === "tenant") return p.tenant === obj.tenant;
  if (p.scope !== "node" && p.scope !== "monitor") return p.scope === "admin";
  if (!p.reach) return false;
  if (tenantAllowed(p, obj.tenant)) return true;
  const reach = p.reach;
  return (obj.networks ?? []).some((n) =>
    reach.networks.includes(`${obj.tenant}/${typeof n === "string" ? n : n.name}`)
  );
}

/** A port as the reach rules read it: its cluster and its network. */
export interface PortRef {
  cluster?: string;
  /** The port's own tenant (on a public network, not the network's). */
  tenant: string;
  networkTenant: string;
  network: string;
  type: string;
  physnet?: string;
}

/**
 * Whether a cluster's token sees a port: a monitor only its own cluster's, of the tenants its
 * cluster serves (one left behind by a change of the cluster is not its to manage); an agent its
 * own cluster's, and those of other clusters on networks its cluster may use (its tunnels and
 * flows need them).
 */
export function seesPort(p: Principal, port: PortRef): boolean {
  if (p.scope !== "node" && p.scope !== "monitor") return true;
  if (p.scope === "monitor") return monitorSees(p, port);
  if ((port.cluster ?? DEFAULT_CLUSTER) === p.cluster) return true;
  if (!p.reach) return false;
  return mayUse(p.reach, {
    tenant: port.networkTenant,
    name: port.network,
    type: port.type,
    physnet: port.physnet,
  });
}

/** A port a cluster's monitor manages: its cluster's, of a tenant the cluster serves. */
export function monitorSees(
  p: Extract<Principal, { scope: "monitor" }>,
  port: Pick<PortRef, "cluster" | "tenant" | "networkTenant" | "network">,
): boolean {
  if ((port.cluster ?? DEFAULT_CLUSTER) !== p.cluster || !p.reach) return false;
  return servesTenant(p.reach, port.tenant, { tenant: port.networkTenant, name: port.network });
}

/**
 * Whether two clusters can share a network, so that the agents of one need the tunnel endpoints
 * of the other's nodes: a tenant or a network in common, or one lets every tenant in.
 */
export function clustersMeet(a: ClusterReach, b: ClusterReach): boolean {
  if (a.name === b.name) return true;
  const meets = (x: ClusterReach, y: ClusterReach) =>
    x.tenants.some((t) => t === "*" || tenantAllowed({ reach: y }, t)) ||
    x.networks.some((n) => y.networks.includes(n) || tenantAllowed({ reach: y }, n.split("/")[0]));
  return meets(a, b) || meets(b, a);
}
