/**
 * The API as data: every route with its access rule, its schemas and its handler. app.ts serves
 * this table and openapi.ts documents it; neither knows any route by name.
 */
import { z } from "zod";
import { type Access, type Principal, seesOwned, type TokenTable } from "./auth.ts";
import { ApiError } from "./errors.ts";
import * as S from "./schemas.ts";
import type { Ctx } from "./service/context.ts";
import * as groups from "./service/ip_groups.ts";
import * as secgroups from "./service/security_groups.ts";
import * as networks from "./service/networks.ts";
import * as nodes from "./service/nodes.ts";
import * as physnets from "./service/physnets.ts";
import * as ports from "./service/ports/mod.ts";
import * as routers from "./service/routers.ts";
import * as conflicts from "./service/conflicts.ts";
import * as tenants from "./service/tenants.ts";
import * as clusters from "./service/clusters.ts";
import { cursorFor, feedFor } from "./service/cluster_view.ts";
import * as quotas from "./service/quotas.ts";
import { queryHistory } from "./service/history.ts";

export interface Request {
  ctx: Ctx;
  principal: Principal;
  params: Record<string, string>;
  // deno-lint-ignore no-explicit-any
  query: any;
  // deno-lint-ignore no-explicit-any
  body: any;
  /** The manager's tokens, for what a route tells of them (never a token itself). */
  tokens?: TokenTable;
}

export interface Reply {
  status: number;
  body?: unknown;
}

export interface RouteDef {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** OpenAPI-style template: /api/v1/tenants/{tenant} */
  path: string;
  summary: string;
  tag: string;
  access: Access;
  query?: z.ZodType;
  body?: z.ZodType;
  /** Success status and schema; error answers are documented for every route. */
  ok: { status: number; schema?: z.ZodType; description: string };
  /** Other success statuses (a PUT that found the port already there answers 200). */
  also?: { status: number; description: string }[];
  handle(req: Request): Promise<Reply>;
}

/** Path parameters and the schema each must satisfy. */
export const PARAMS: Record<string, z.ZodType> = {
  tenant: S.Name,
  network: S.Name,
  physnet: S.Name,
  group: S.Name,
  router: S.Name,
  node: S.scopedParam(S.NodeName),
  port: S.scopedParam(S.PortId),
  cluster: S.Name,
};

/**
 * What a tenant sees of the shared infrastructure: what it needs to pick a physnet or read its
 * ports' nodes, and nothing of other tenants' use of it (no usage, no flat network's name, no
 * underlay addresses).
 */
function physnetFor(principal: Principal, p: physnets.PhysnetView) {
  if (principal.scope !== "tenant") return p;
  return { name: p.name, vlanRanges: p.vlanRanges, description: p.description };
}

const ok = (body: unknown, status = 200): Reply => ({ status, body });
const items = (list: unknown[]): Reply => ok({ items: list });
const noContent: Reply = { status: 204 };
const V1 = "/api/v1";

export const ROUTES: RouteDef[] = [
  // tenants
  {
    method: "GET",
    path: `${V1}/tenants`,
    summary: "List tenants (a tenant token sees its own)",
    tag: "tenants",
    access: "any",
    ok: { status: 200, schema: S.listOf(S.Tenant), description: "the tenants" },
    handle: async ({ ctx, principal }) => {
      const all = await tenants.listTenants(ctx);
      if (principal.scope === "admin") return items(all);
      return items(
        principal.scope === "tenant" ? all.filter((t) => t.name === principal.tenant) : [],
      );
    },
  },
  {
    method: "POST",
    path: `${V1}/tenants`,
    summary: "Create a tenant",
    tag: "tenants",
    access: "admin",
    body: S.TenantCreate,
    ok: { status: 201, schema: S.Tenant, description: "created" },
    handle: async ({ ctx, body }) => ok(await tenants.createTenant(ctx, body), 201),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}`,
    summary:
      "Ensure a tenant exists (agents and the monitor: a Kubernetes namespace is a tenant from its first pod on)",
    tag: "tenants",
    access: "infra",
    ok: { status: 201, schema: S.Tenant, description: "created" },
    also: [{ status: 200, description: "it existed already" }],
    handle: async ({ ctx, params }) => {
      try {
        return ok(await tenants.createTenant(ctx, { name: params.tenant }), 201);
      } catch (err) {
        if (err instanceof ApiError && err.code === "already_exists") {
          return ok(await tenants.getTenant(ctx, params.tenant));
        }
        throw err;
      }
    },
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}`,
    summary: "Get a tenant",
    tag: "tenants",
    access: "tenant",
    ok: { status: 200, schema: S.Tenant, description: "the tenant" },
    handle: async ({ ctx, params }) => ok(await tenants.getTenant(ctx, params.tenant)),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}`,
    summary: "Delete a tenant that owns nothing (admins, and monitors when its namespace goes)",
    tag: "tenants",
    access: "operator",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, params }) => (await tenants.deleteTenant(ctx, params.tenant), noContent),
  },

  // quotas
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/quota`,
    summary: "A tenant's quota and what it uses (no limits: the use, counted now)",
    tag: "quotas",
    access: "tenant",
    ok: { status: 200, schema: S.Quota, description: "limits and use" },
    handle: async ({ ctx, params }) => ok(await quotas.getQuota(ctx, params.tenant)),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}/quota`,
    summary:
      "Set a tenant's limits (a kind left out is unlimited); exceeding one is a 403 quota_exceeded",
    tag: "quotas",
    access: "admin",
    body: S.QuotaSet,
    ok: { status: 200, schema: S.Quota, description: "the limits and the use" },
    handle: async ({ ctx, params, body }) => ok(await quotas.setQuota(ctx, params.tenant, body)),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/quota`,
    summary: "Remove a tenant's quota: nothing limited or counted any more",
    tag: "quotas",
    access: "admin",
    ok: { status: 204, description: "removed" },
    handle: async ({ ctx, params }) => (await quotas.deleteQuota(ctx, params.tenant), noContent),
  },

  // networks
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/networks`,
    summary: "List the tenant's networks and the public networks it may attach to",
    tag: "networks",
    access: "tenant",
    ok: { status: 200, schema: S.listOf(S.Network), description: "the networks, with usage" },
    handle: async ({ ctx, principal, params }) =>
      items(await networks.listNetworks(ctx, principal, params.tenant)),
  },
  {
    method: "POST",
    path: `${V1}/tenants/{tenant}/networks`,
    summary:
      "Create a network (a VNI or VLAN ID is allocated unless an admin gives segmentId; flat networks are an admin's)",
    tag: "networks",
    access: "tenant",
    body: S.NetworkCreate,
    ok: { status: 201, schema: S.Network, description: "created" },
    handle: async ({ ctx, principal, params, body }) =>
      ok(await networks.createNetwork(ctx, { principal, tenant: params.tenant, body }), 201),
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/networks/{network}`,
    summary: "Get a network with its usage (own, or public by name)",
    tag: "networks",
    access: "shared",
    ok: { status: 200, schema: S.Network, description: "the network" },
    handle: async ({ ctx, principal, params }) =>
      ok(
        await networks.getNetwork(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
        }),
      ),
  },
  {
    method: "PATCH",
    path: `${V1}/tenants/{tenant}/networks/{network}`,
    summary:
      "Change a network's description, MTU, routes or DNS (for ports allocated from then on), its default bandwidth and security groups, egress and hostAccess (at once); other fields are immutable",
    tag: "networks",
    access: "tenant",
    body: S.NetworkUpdate,
    ok: { status: 200, schema: S.Network, description: "updated" },
    handle: async ({ ctx, principal, params, body }) =>
      ok(
        await networks.updateNetwork(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          body,
        }),
      ),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/networks/{network}`,
    summary: "Delete a network with no ports and no IP groups",
    tag: "networks",
    access: "tenant",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, principal, params }) => (
      await networks.deleteNetwork(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
      }), noContent
    ),
  },

  // ports
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports`,
    summary: "List a network's ports",
    tag: "ports",
    access: "shared",
    query: S.PortQuery,
    ok: { status: 200, schema: S.listOf(S.Port), description: "the ports" },
    handle: async ({ ctx, principal, params, query }) =>
      items(
        await conflicts.withConflicts(
          ctx,
          principal,
          await ports.listNetworkPorts(ctx, {
            principal,
            tenant: params.tenant,
            network: params.network,
            query,
          }),
        ),
      ),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports/{port}`,
    summary:
      "Allocate a port idempotently: the same port ID always gets the same address. The port goes into the cluster its ID names (ID@CLUSTER; none: the default one), which must serve its tenant (403)",
    tag: "ports",
    access: "shared",
    body: S.PortRequest,
    ok: { status: 201, schema: S.Port, description: "allocated" },
    also: [{ status: 200, description: "the port already existed; the same answer again" }],
    handle: async ({ ctx, principal, params, body }) => {
      const r = await ports.putPort(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
        id: params.port,
        body,
      });
      return ok(r.port, r.created ? 201 : 200);
    },
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports/{port}`,
    summary: "Get a port",
    tag: "ports",
    access: "shared",
    ok: { status: 200, schema: S.Port, description: "the port" },
    handle: async ({ ctx, principal, params }) =>
      ok(
        await conflicts.withConflictsOne(
          ctx,
          principal,
          await ports.getPort(ctx, {
            principal,
            tenant: params.tenant,
            network: params.network,
            id: params.port,
          }),
        ),
      ),
  },
  {
    method: "PATCH",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports/{port}`,
    summary:
      "Change an existing port's security groups only: never allocates (404 for an unknown port), 409 when the path's network is not networkId",
    tag: "ports",
    access: "shared",
    body: S.PortGroupsUpdate,
    ok: { status: 200, schema: S.Port, description: "the port, with those groups" },
    handle: async ({ ctx, principal, params, body }) =>
      ok(
        await ports.patchPortGroups(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          id: params.port,
          body,
        }),
      ),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports/{port}`,
    summary: "Release a port (404 for an unknown port: callers treat it as done)",
    tag: "ports",
    access: "shared",
    ok: { status: 204, description: "released" },
    handle: async ({ ctx, principal, params }) => (
      await ports.deletePort(ctx, {
        principal,
        tenant: params.tenant,
        network: params.network,
        id: params.port,
      }), noContent
    ),
  },
  {
    method: "POST",
    path: `${V1}/tenants/{tenant}/networks/{network}/ports/{port}/unbind`,
    summary:
      "Take a port off its pod and node, keeping its address, in one step (a stable port whose pod is gone)",
    tag: "ports",
    access: "shared",
    ok: { status: 200, schema: S.Port, description: "the port, unbound (unboundAt set)" },
    handle: async ({ ctx, principal, params }) =>
      ok(
        await ports.unbindPort(ctx, {
          principal,
          tenant: params.tenant,
          network: params.network,
          id: params.port,
        }),
      ),
  },
  {
    method: "GET",
    path: `${V1}/ports`,
    summary: "List ports across networks, by node or pod",
    tag: "ports",
    access: "any",
    query: S.PortQuery,
    ok: { status: 200, schema: S.listOf(S.Port), description: "the ports" },
    handle: async ({ ctx, principal, query }) =>
      items(
        await conflicts.withConflicts(ctx, principal, await ports.listPorts(ctx, principal, query)),
      ),
  },

  // address history
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/history`,
    summary:
      "Who of the tenant's ports held an address or MAC when: at a time (at), over a range (from, to), or all kept",
    tag: "history",
    access: "owner",
    query: S.HistoryQuery,
    ok: { status: 200, schema: S.listOf(S.HistoryEntry), description: "the holders, oldest first" },
    handle: async ({ ctx, params, query }) => {
      if (query.tenant !== undefined && query.tenant !== params.tenant) {
        throw new ApiError(
          "invalid_request",
          "query.tenant: the path names the tenant here; GET /api/v1/history takes tenant",
          "query.tenant",
        );
      }
      return items(await queryHistory(ctx, params.tenant, query));
    },
  },
  {
    method: "GET",
    path: `${V1}/history`,
    summary: "Who held an address or MAC when, across tenants (admin)",
    tag: "history",
    access: "admin",
    query: S.HistoryQuery,
    ok: { status: 200, schema: S.listOf(S.HistoryEntry), description: "the holders, oldest first" },
    handle: async ({ ctx, query }) => items(await queryHistory(ctx, query.tenant, query)),
  },

  // IP groups
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/ipgroups`,
    summary: "List the tenant's IP groups",
    tag: "ipgroups",
    access: "tenant",
    ok: { status: 200, schema: S.listOf(S.IpGroup), description: "the groups" },
    handle: async ({ ctx, params }) =>
      items((await groups.listIpGroups(ctx, params.tenant)).map(groups.groupView)),
  },
  {
    method: "POST",
    path: `${V1}/tenants/{tenant}/ipgroups`,
    summary: "Create an IP group from a list of addresses or a size",
    tag: "ipgroups",
    access: "tenant",
    body: S.IpGroupCreate,
    ok: { status: 201, schema: S.IpGroup, description: "created" },
    handle: async ({ ctx, principal, params, body }) =>
      ok(
        groups.groupView(
          await groups.createIpGroup(ctx, { principal, tenant: params.tenant, body }),
        ),
        201,
      ),
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/ipgroups/{group}`,
    summary: "Get an IP group",
    tag: "ipgroups",
    access: "tenant",
    ok: { status: 200, schema: S.IpGroup, description: "the group" },
    handle: async ({ ctx, params }) =>
      ok(groups.groupView(await groups.getIpGroup(ctx, params.tenant, params.group))),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}/ipgroups/{group}`,
    summary: "Grow or shrink an IP group (addresses in use stay)",
    tag: "ipgroups",
    access: "tenant",
    body: S.IpGroupUpdate,
    ok: { status: 200, schema: S.IpGroup, description: "updated" },
    handle: async ({ ctx, principal, params, body }) =>
      ok(
        groups.groupView(
          await groups.updateIpGroup(ctx, {
            principal,
            tenant: params.tenant,
            name: params.group,
            body,
          }),
        ),
      ),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/ipgroups/{group}`,
    summary: "Delete an IP group none of whose addresses is in use",
    tag: "ipgroups",
    access: "tenant",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, principal, params }) => (
      await groups.deleteIpGroup(ctx, { principal, tenant: params.tenant, name: params.group }),
        noContent
    ),
  },

  // routers
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/routers`,
    summary: "List the tenant's routers",
    tag: "routers",
    access: "tenant",
    ok: { status: 200, schema: S.listOf(S.Router), description: "the routers" },
    handle: async ({ ctx, params }) =>
      items((await routers.listRouters(ctx, params.tenant)).map(routers.routerView)),
  },
  {
    method: "POST",
    path: `${V1}/tenants/{tenant}/routers`,
    summary: "Route between some of the tenant's networks (and through static routes)",
    tag: "routers",
    access: "tenant",
    body: S.RouterCreate,
    ok: { status: 201, schema: S.Router, description: "created" },
    handle: async ({ ctx, params, body }) =>
      ok(routers.routerView(await routers.createRouter(ctx, params.tenant, body)), 201),
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/routers/{router}`,
    summary: "Get a router",
    tag: "routers",
    access: "tenant",
    ok: { status: 200, schema: S.Router, description: "the router" },
    handle: async ({ ctx, params }) =>
      ok(routers.routerView(await routers.getRouter(ctx, params.tenant, params.router))),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}/routers/{router}`,
    summary: "Replace what a router connects and routes",
    tag: "routers",
    access: "tenant",
    body: S.RouterUpdate,
    ok: { status: 200, schema: S.Router, description: "updated" },
    handle: async ({ ctx, params, body }) =>
      ok(
        routers.routerView(
          await routers.updateRouter(ctx, { tenant: params.tenant, name: params.router, body }),
        ),
      ),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/routers/{router}`,
    summary: "Delete a router: its networks are isolated again",
    tag: "routers",
    access: "tenant",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, params }) => (
      await routers.deleteRouter(ctx, params.tenant, params.router), noContent
    ),
  },
  {
    method: "GET",
    path: `${V1}/routers`,
    summary:
      "Every tenant's routers (nodes and admins: the agents compute their flows); a cluster's tokens get its tenants' only",
    tag: "routers",
    access: "infra",
    ok: { status: 200, schema: S.listOf(S.Router), description: "the routers" },
    handle: async ({ ctx, principal }) =>
      items(
        (await routers.listRouters(ctx)).filter((r) => seesOwned(principal, r))
          .map(routers.routerView),
      ),
  },

  // security groups
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/security-groups`,
    summary: "List the tenant's security groups",
    tag: "security-groups",
    access: "tenant",
    ok: { status: 200, schema: S.listOf(S.SecurityGroup), description: "the groups" },
    handle: async ({ ctx, params }) =>
      items(await secgroups.listSecurityGroups(ctx, params.tenant)),
  },
  {
    method: "POST",
    path: `${V1}/tenants/{tenant}/security-groups`,
    summary: "Create a security group: stateful ingress and egress rules that ports name",
    tag: "security-groups",
    access: "tenant",
    body: S.SecurityGroupCreate,
    ok: { status: 201, schema: S.SecurityGroup, description: "created" },
    handle: async ({ ctx, params, body }) =>
      ok(await secgroups.createSecurityGroup(ctx, params.tenant, body), 201),
  },
  {
    method: "GET",
    path: `${V1}/tenants/{tenant}/security-groups/{group}`,
    summary: "Get a security group",
    tag: "security-groups",
    access: "tenant",
    ok: { status: 200, schema: S.SecurityGroup, description: "the group" },
    handle: async ({ ctx, params }) =>
      ok(await secgroups.getSecurityGroup(ctx, params.tenant, params.group)),
  },
  {
    method: "PUT",
    path: `${V1}/tenants/{tenant}/security-groups/{group}`,
    summary:
      "Replace a security group's rules; every port that names it follows at once (established connections stay)",
    tag: "security-groups",
    access: "tenant",
    body: S.SecurityGroupUpdate,
    ok: { status: 200, schema: S.SecurityGroup, description: "updated" },
    handle: async ({ ctx, params, body }) =>
      ok(
        await secgroups.updateSecurityGroup(ctx, {
          tenant: params.tenant,
          name: params.group,
          body,
        }),
      ),
  },
  {
    method: "DELETE",
    path: `${V1}/tenants/{tenant}/security-groups/{group}`,
    summary: "Delete a security group no port, network or other group names",
    tag: "security-groups",
    access: "tenant",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, params }) => (
      await secgroups.deleteSecurityGroup(ctx, params.tenant, params.group), noContent
    ),
  },
  {
    method: "GET",
    path: `${V1}/security-groups`,
    summary:
      "Every tenant's security groups (what agents compile into flows); a cluster's tokens get its tenants' only",
    tag: "security-groups",
    access: "infra",
    ok: { status: 200, schema: S.listOf(S.SecurityGroup), description: "the groups" },
    handle: async ({ ctx, principal }) =>
      items((await secgroups.listSecurityGroups(ctx)).filter((g) => seesOwned(principal, g))),
  },

  // physnets
  {
    method: "GET",
    path: `${V1}/physnets`,
    summary: "List physical networks",
    tag: "physnets",
    access: "any",
    ok: { status: 200, schema: S.listOf(S.Physnet), description: "the physnets" },
    handle: async ({ ctx, principal }) =>
      items((await physnets.listPhysnets(ctx)).map((p) => physnetFor(principal, p))),
  },
  {
    method: "POST",
    path: `${V1}/physnets`,
    summary: "Create a physical network with its VLAN ID ranges",
    tag: "physnets",
    access: "admin",
    body: S.PhysnetCreate,
    ok: { status: 201, schema: S.Physnet, description: "created" },
    handle: async ({ ctx, body }) => ok(await physnets.createPhysnet(ctx, body), 201),
  },
  {
    method: "GET",
    path: `${V1}/physnets/{physnet}`,
    summary: "Get a physical network",
    tag: "physnets",
    access: "any",
    ok: { status: 200, schema: S.Physnet, description: "the physnet" },
    handle: async ({ ctx, principal, params }) =>
      ok(physnetFor(principal, await physnets.getPhysnet(ctx, params.physnet))),
  },
  {
    method: "DELETE",
    path: `${V1}/physnets/{physnet}`,
    summary: "Delete a physical network no network uses",
    tag: "physnets",
    access: "admin",
    ok: { status: 204, description: "deleted" },
    handle: async (
      { ctx, params },
    ) => (await physnets.deletePhysnet(ctx, params.physnet), noContent),
  },

  // nodes
  {
    method: "GET",
    path: `${V1}/nodes`,
    summary: "List registered nodes and their tunnel endpoints",
    tag: "nodes",
    access: "any",
    ok: { status: 200, schema: S.listOf(S.Node), description: "the nodes" },
    handle: async ({ ctx, principal }) =>
      items((await nodes.listNodes(ctx)).map((n) => nodes.nodeFor(principal, n))),
  },
  {
    method: "PUT",
    path: `${V1}/nodes/{node}`,
    summary: "Register a node (or refresh its record)",
    tag: "nodes",
    access: "node",
    body: S.NodeRegister,
    ok: { status: 201, schema: S.Node, description: "registered" },
    also: [{ status: 200, description: "updated" }],
    handle: async ({ ctx, params, body }) => {
      const r = await nodes.registerNode(ctx, params.node, body);
      return ok(r.node, r.created ? 201 : 200);
    },
  },
  {
    method: "GET",
    path: `${V1}/nodes/{node}`,
    summary: "Get a node",
    tag: "nodes",
    access: "any",
    ok: { status: 200, schema: S.Node, description: "the node" },
    handle: async ({ ctx, principal, params }) =>
      ok(nodes.nodeFor(principal, await nodes.getNode(ctx, params.node))),
  },
  {
    method: "DELETE",
    path: `${V1}/nodes/{node}`,
    summary: "Forget a node",
    tag: "nodes",
    access: "admin",
    ok: { status: 204, description: "deleted" },
    handle: async ({ ctx, params }) => {
      await nodes.deleteNode(ctx, params.node);
      return noContent;
    },
  },
  {
    method: "PUT",
    path: `${V1}/nodes/{node}/conflicts`,
    summary:
      "Report the ports this node leaves out of its flows now (agent/PIPELINE.md, Conflicting entries): replaces the node's last report; an empty list clears it",
    tag: "nodes",
    access: "node",
    body: S.ConflictReport,
    ok: {
      status: 200,
      schema: S.NodeConflicts,
      description:
        "what is kept: entries naming a port bound to another node that holds the MAC or address",
    },
    handle: async ({ ctx, principal, params, body }) =>
      ok(await conflicts.reportConflicts(ctx, { node: params.node, report: body, principal })),
  },
  {
    method: "GET",
    path: `${V1}/nodes/{node}/conflicts`,
    summary: "The ports a node last reported leaving out of its flows",
    tag: "nodes",
    access: "node",
    ok: { status: 200, schema: S.NodeConflicts, description: "the node's record" },
    handle: async ({ ctx, params }) => ok(await conflicts.nodeConflicts(ctx, params.node)),
  },

  // clusters
  {
    method: "GET",
    path: `${V1}/clusters`,
    summary: "List clusters and what each may use (a node or monitor token sees its own)",
    tag: "clusters",
    access: "infra",
    ok: { status: 200, schema: S.listOf(S.Cluster), description: "the clusters" },
    handle: async ({ ctx, principal }) => {
      const all = await clusters.listClusters(ctx);
      if (principal.scope === "admin") return items(all);
      return items(all.filter((c) => "cluster" in principal && c.name === principal.cluster));
    },
  },
  {
    method: "POST",
    path: `${V1}/clusters`,
    summary:
      "Register a cluster: its node and monitor tokens (cluster in the manager's tokens) reach what it lists",
    tag: "clusters",
    access: "admin",
    body: S.ClusterCreate,
    ok: { status: 201, schema: S.Cluster, description: "created" },
    handle: async ({ ctx, body }) => ok(await clusters.createCluster(ctx, body), 201),
  },
  {
    method: "GET",
    path: `${V1}/clusters/{cluster}`,
    summary: "Get a cluster with its registered nodes and which tokens it has",
    tag: "clusters",
    access: "admin",
    ok: { status: 200, schema: S.Cluster, description: "the cluster" },
    handle: async ({ ctx, params, tokens }) =>
      ok({
        ...await clusters.getCluster(ctx, params.cluster),
        ...(tokens ? { credentials: tokens.ofCluster(params.cluster) } : {}),
      }),
  },
  {
    method: "PATCH",
    path: `${V1}/clusters/{cluster}`,
    summary:
      "Change which tenants, networks and physnets a cluster may use (from its next request on)",
    tag: "clusters",
    access: "admin",
    body: S.ClusterUpdate,
    ok: { status: 200, schema: S.Cluster, description: "updated" },
    handle: async ({ ctx, params, body }) =>
      ok(await clusters.updateCluster(ctx, params.cluster, body)),
  },
  {
    method: "DELETE",
    path: `${V1}/clusters/{cluster}`,
    summary: "Delete a cluster with no ports, and its nodes (409 while it has ports)",
    tag: "clusters",
    access: "admin",
    ok: { status: 204, description: "deleted, with its nodes" },
    handle: async (
      { ctx, params },
    ) => (await clusters.deleteCluster(ctx, params.cluster), noContent),
  },

  // change feed
  {
    method: "GET",
    path: `${V1}/feed`,
    summary: "Follow port and node changes: long-poll from a cursor; 410 means list again",
    tag: "feed",
    access: "infra",
    query: S.FeedQuery,
    ok: {
      status: 200,
      schema: S.FeedPage,
      description: "the events after the cursor (maybe none)",
    },
    handle: async ({ ctx, principal, query }) => {
      if (query.after === undefined) {
        return ok({ cursor: cursorFor(principal, ctx.feed.cursor()), events: [] });
      }
      const page = await feedFor(ctx, principal, {
        after: query.after,
        timeoutMs: query.timeout * 1000,
      });
      if (page === "expired") {
        throw new ApiError(
          "feed_expired",
          "The cursor is too old, from before a manager restart, or from before a change of this token's cluster: take a new cursor (this route without 'after'), list ports and nodes again, then follow from that cursor",
        );
      }
      return ok(page);
    },
  },
];

export const EMPTY_QUERY = z.strictObject({});
