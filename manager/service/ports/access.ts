/**
 * Who may do what to a port: the owner a request acts for, what a tenant or node token may ask of
 * a PUT, which ports a principal sees, and the port an unbind or release is about.
 */
import { monitorSees, type NetworkRef, placementRefusal, type Principal } from "../../auth.ts";
import { ApiError, notFound } from "../../errors.ts";
import { isStablePortId, type PodRef, STABLE_PREFIX } from "@knitter/common";
import { macKind } from "@knitter/common/address";
import { type ClusterRecord, keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { Entry } from "../../store/store.ts";
import type { Ctx } from "../context.ts";
import { unscoped } from "../cluster_names.ts";
import { portCluster, reachIn } from "../clusters.ts";
import { keyId, type PortBody, type PortTarget } from "./records.ts";

/** The tenant a request acts for: a tenant token always acts for its own. */
export function ownerOf(principal: Principal, tenant: string): string {
  return principal.scope === "tenant" ? principal.tenant : tenant;
}

/**
 * Refuses what the principal may not ask of a PUT (403), checks a fixed MAC, and binds a node
 * token's port to its node. Returns the port's owner and the body to act on.
 */
export function authorizePut(
  req: PortTarget & { body: PortBody },
): { owner: string; body: PortBody } {
  const { principal, id, body } = req;
  const owner = ownerOf(principal, req.tenant);
  return { owner, body: authorizedBody(principal, { owner, id }, body) };
}

function authorizedBody(
  principal: Principal,
  port: { owner: string; id: string },
  body: PortBody,
): PortBody {
  if (principal.scope === "tenant" && body.node !== undefined) {
    // Binding puts the port on that node's dataplane: only the node's agent or an admin decides it.
    throw new ApiError(
      "forbidden",
      "A tenant token may not bind a port to a node: the node's agent (its node token) or an admin does; leave out node",
      "node",
    );
  }
  if (
    principal.scope === "tenant" && body.pod !== undefined &&
    body.pod.namespace !== principal.tenant
  ) {
    // Ports are found by their pod (the monitor releases a deleted pod's ports by it).
    throw new ApiError(
      "forbidden",
      `A tenant token may bind a port only to a pod of its own namespace "${principal.tenant}"`,
      "pod.namespace",
    );
  }
  if (body.mac !== undefined) checkMac(body.mac);
  if (principal.scope === "node") {
    if (body.node !== undefined && body.node !== principal.node) {
      throw new ApiError(
        "forbidden",
        `A token of node "${principal.node}" may not bind ports to node "${body.node}"`,
        "node",
      );
    }
    checkNodePod(principal.node, port, body);
    return { ...body, node: principal.node, byNode: principal.node };
  }
  return body;
}

/**
 * What a node's agent names as a port's pod is one of the port's tenant (a pod's tenant is its
 * namespace), and a stable port's the very pod its ID names: a node token cannot put another
 * namespace's pod on a port, nor take a StatefulSet pod's stable address for another pod.
 */
function checkNodePod(node: string, port: { owner: string; id: string }, body: PortBody): void {
  const { name: id } = unscoped(port.id);
  const pod = body.pod;
  if (pod !== undefined && pod.namespace !== port.owner) {
    throw new ApiError(
      "forbidden",
      `A token of node "${node}" may bind a port of tenant "${port.owner}" only to a pod of namespace "${port.owner}" (a pod's tenant is its namespace), not "${pod.namespace}"`,
      "pod.namespace",
    );
  }
  if (!isStablePortId(id) || (pod && isStableIdOf(id, pod, body.interface))) return;
  throw new ApiError(
    "forbidden",
    `Port "${id}" is a stable port: a token of node "${node}" binds it only to the pod its ID names, with that interface (${STABLE_PREFIX}NAMESPACE:NAME-INTERFACE)${
      pod
        ? `, not to ${pod.namespace}/${pod.name}${body.interface ? ` on ${body.interface}` : ""}`
        : ""
    }`,
    "pod",
  );
}

/** The most characters of a port ID (schemas.ts PortId): the agent cuts longer stable IDs. */
const MAX_PORT_ID = 200;

/**
 * Whether `id` is the stable port ID of `pod`'s interface, as the agent derives it
 * (agent/cni/pod_request.ts portIdFor): `stable:NS:NAME-IFNAME`, characters a port ID cannot hold
 * as "_", cut to the longest ID; or `stable:NS:NAME` alone.
 */
function isStableIdOf(id: string, pod: PodRef, iface: string | undefined): boolean {
  const base = `${STABLE_PREFIX}${pod.namespace}:${pod.name}`;
  if (id === base) return true;
  if (iface === undefined) return false;
  const full = `${base}-${iface}`.replace(/[^A-Za-z0-9._:-]/g, "_");
  return id === full || (id.length === MAX_PORT_ID && full.startsWith(id));
}

/**
 * A port goes only into a cluster that serves its tenant (the ID's suffix names the cluster; none:
 * the default one), whoever asks: a port of a cluster is one of its pods, which its monitor
 * manages and its deletion waits for. 403 otherwise, naming the cluster and the tenant.
 */
export async function checkPlacement(
  ctx: Ctx,
  principal: Principal,
  opts: { owner: string; id: string; net: NetworkRef; cluster: Entry<ClusterRecord> },
): Promise<void> {
  const { owner, id, net } = opts;
  const { cluster } = unscoped(id);
  const own = principal.scope === "node" || principal.scope === "monitor";
  const carried = own && principal.cluster === cluster ? principal.reach : undefined;
  const refused = (e: Entry<ClusterRecord>) => {
    const reach = carried ?? reachIn(e);
    return reach ? placementRefusal(reach, owner, net) : "the cluster is not registered";
  };
  let why = refused(opts.cluster);
  // The record may be a remembered one (portCluster): a refusal is decided on the store's.
  if (why !== null && carried === undefined) why = refused(await portCluster(ctx, id, true));
  if (why === null) return;
  throw new ApiError(
    "forbidden",
    `Port "${id}" cannot go into cluster "${cluster}": ${why}. A port belongs to a pod of a cluster that serves its tenant: an admin adds the tenant, network or physnet to the cluster (PATCH /api/v1/clusters/${cluster}), or the port ID names a cluster that serves it (ID@CLUSTER)`,
  );
}

/** A fixed MAC must be one a pod may use: unicast, locally administered, not all zero. */
function checkMac(mac: string): void {
  const why = {
    broadcast: "is the broadcast address",
    multicast: "is a multicast address (the first byte is odd)",
    zero: "is all zero",
    vendor:
      "is not locally administered (set bit 1 of the first byte, as in 02:..; other MACs belong to hardware vendors)",
    local: null,
  }[macKind(mac)];
  if (why) {
    throw new ApiError(
      "invalid_mac",
      `mac: ${mac} ${why}; a fixed MAC must be a locally administered unicast address`,
      "mac",
    );
  }
}

/**
 * A tenant token sees only its own ports (the API's and the console's feed alike), a monitor only
 * its cluster's of the tenants it serves (an agent's view across clusters is auth.ts seesPort).
 */
export function visible(
  principal: Principal,
  port: Pick<PortRecord, "tenant" | "cluster" | "networkTenant" | "network">,
): boolean {
  if (principal.scope === "monitor") return monitorSees(principal, port);
  return principal.scope !== "tenant" || port.tenant === principal.tenant;
}

/**
 * The port an unbind or release is about, as the principal may see it: 404 when it is unknown or
 * another tenant's, 403 when a node's token names another node's port.
 */
export async function portToChange(
  ctx: Ctx,
  target: PortTarget & { net: NetworkRecord; verb: "unbind" | "release" | "change" | "activate" },
): Promise<Entry<PortRecord> & { value: PortRecord }> {
  const { principal, net, id, verb } = target;
  const owner = ownerOf(principal, target.tenant);
  const e = await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, owner, id)));
  const port = e.value;
  if (!port || !visible(principal, port)) {
    throw notFound(`Port "${id}" does not exist on network "${target.network}"`);
  }
  if (principal.scope === "node" && port.node !== undefined && port.node !== principal.node) {
    throw new ApiError(
      "forbidden",
      `A token of node "${principal.node}" may not ${verb} a port of node "${port.node}"`,
    );
  }
  if (
    principal.scope === "node" && verb !== "unbind" && port.node === undefined &&
    port.madeBy !== principal.node
  ) {
    // An unbound port is kept for its pod's next incarnation, or was made by its tenant.
    throw new ApiError(
      "forbidden",
      `A token of node "${principal.node}" may not ${verb} port "${id}": it is bound to no node and this node did not make it (the monitor, the tenant or an admin does)`,
    );
  }
  return { ...e, value: port };
}
