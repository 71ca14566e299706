/**
 * What a port is: its stored record, the key it is stored under, the indexes that find it, and the
 * port as answered (the record joined with its network).
 */
import type { Port } from "@knitter/common";
import type { z } from "zod";
import type { Principal } from "../../auth.ts";
import { keys, type NetworkRecord, type PodRef, type PortRecord } from "../../model.ts";
import type { PortRequest } from "../../schemas.ts";
import type { Key } from "../../store/store.ts";
import type { Tx } from "../../store/tx.ts";
import { now } from "../context.ts";
import { DEFAULT_CLUSTER, scoped, unscoped } from "../cluster_names.ts";
import { pairedIp6 } from "../dual_stack.ts";
import { macFor } from "../../ipam/derived_mac.ts";
import { keyId } from "../port_key_id.ts";

/**
 * A PUT's body as the handlers read it. `byNode` is never sent (the schema is strict): it is set
 * for a node token's request (access.ts authorizePut), so that its new port records who made
 * it and a second PUT knows who binds.
 */
export type PortBody = z.infer<typeof PortRequest> & { byNode?: string };

/** The port a request names: who asks, the path's tenant and network, and the port's ID. */
export interface PortTarget {
  principal: Principal;
  /** The path's tenant: the port's owner unless a tenant token asks (access.ts ownerOf). */
  tenant: string;
  /** The path's network: the tenant's own, else a public one of that name. */
  network: string;
  id: string;
}

export interface PutResult {
  port: Port;
  created: boolean;
  /** Created, or bound to a node / pod / interface it did not have: followers must hear of it. */
  changed: boolean;
}

/** A new port's record, from the request and the address it was given. */
export function portRecord(opts: {
  net: NetworkRecord;
  owner: string;
  id: string;
  body: PortBody;
  ip: string;
  index: number;
  /** When its live holding begins (history.ts stintStart); undefined: history off. */
  stintFrom: number | undefined;
}): PortRecord {
  const { net, owner, id, body, ip, index, stintFrom } = opts;
  const port: PortRecord = {
    id,
    tenant: owner,
    network: net.name,
    networkTenant: net.tenant,
    networkId: net.id,
    ip,
    mac: body.mac ?? macFor(net.id, index),
    index,
    createdAt: now(),
  };
  const ip6 = pairedIp6(net, ip);
  if (ip6 !== undefined) port.ip6 = ip6;
  if (body.ipGroup !== undefined) port.ipGroup = body.ipGroup;
  if (body.node !== undefined) port.node = body.node;
  if (body.pod !== undefined) port.pod = body.pod;
  if (body.interface !== undefined) port.interface = body.interface;
  if (body.bandwidth !== undefined) port.bandwidth = body.bandwidth;
  // The ID is scoped by its cluster (service/cluster_names.ts); the field saves parsing it.
  const { cluster } = unscoped(id);
  if (cluster !== DEFAULT_CLUSTER) port.cluster = cluster;
  if (body.securityGroups?.length) port.securityGroups = body.securityGroups;
  if (body.labels !== undefined) port.labels = body.labels;
  if (body.byNode !== undefined) port.madeBy = body.byNode;
  if (stintFrom !== undefined) port.stintFrom = stintFrom;
  return port;
}

/** A port's pod as the pod index knows it: the namespace scoped by the port's cluster. */
function indexedPod(port: Pick<PortRecord, "pod" | "cluster">): PodRef | undefined {
  if (!port.pod) return undefined;
  return { ...port.pod, namespace: scoped(port.pod.namespace, port.cluster ?? DEFAULT_CLUSTER) };
}

/** "namespace/name" of a port's pod as the pod index (and GET /ports?pod=) names it. */
export function podKey(port: Pick<PortRecord, "pod" | "cluster">): string | undefined {
  const pod = indexedPod(port);
  return pod && `${pod.namespace}/${pod.name}`;
}

/**
 * Whether what a network's ports carry of it (portView: default groups, DSCP, egress,
 * hostAccess and advertise) changed: its ports are then news to the agents again.
 */
export function carriedChange(before: NetworkRecord, after: NetworkRecord): boolean {
  return JSON.stringify(after.securityGroups) !== JSON.stringify(before.securityGroups) ||
    after.dscp !== before.dscp || after.egress !== before.egress ||
    after.hostAccess !== before.hostAccess || after.advertise !== before.advertise;
}

/** A port as answered: the record joined with what its network says, less the pool index. */
export function portView(net: NetworkRecord, p: PortRecord): Port {
  // Who made it is the manager's to know (access.ts), not an answer; so is its holding's start.
  const { index: _index, madeBy: _madeBy, stintFrom: _stintFrom, ...own } = p;
  const view: Port = {
    ...own,
    type: net.type,
    address: `${p.ip}/${net.cidr.slice(net.cidr.indexOf("/") + 1)}`,
    family: net.family,
    mtu: net.mtu,
    routes: net.routes,
    dns: net.dns,
  };
  if (net.segmentId !== undefined) view.segmentId = net.segmentId;
  if (net.physnet !== undefined) view.physnet = net.physnet;
  if (net.gateway !== undefined) view.gateway = net.gateway;
  if (p.ip6 !== undefined) {
    view.address6 = `${p.ip6}/${net.cidr6!.slice(net.cidr6!.indexOf("/") + 1)}`;
  }
  if (p.ip6 !== undefined && net.gateway6 !== undefined) view.gateway6 = net.gateway6;
  if (net.bandwidth !== undefined) view.networkBandwidth = net.bandwidth;
  if (net.securityGroups !== undefined) view.networkSecurityGroups = net.securityGroups;
  if (net.dscp !== undefined) view.networkDscp = net.dscp;
  if (net.egress === true) view.networkEgress = true;
  if (net.hostAccess === true) view.networkHostAccess = true;
  if (net.advertise === true) view.networkAdvertise = true;
  if (net.ipv6RouterAdvertisements) {
    view.networkRouterAdvertisements = net.ipv6RouterAdvertisements;
  }
  if (net.dataPlane === "external") view.networkDataPlane = "external";
  if (net.delegate !== undefined) view.networkDelegate = net.delegate;
  return view;
}

export { keyId };

export function portKeyId(port: PortRecord): string {
  return keyId(port.networkTenant, port.tenant, port.id);
}

/** Stores a new port, its record and the indexes that find it, and answers it as viewed. */
export function storeNewPort(tx: Tx, net: NetworkRecord, port: PortRecord): Port {
  tx.set(keys.port(net.id, portKeyId(port)), port);
  writeIndexes(tx, port, "set");
  return portView(net, port);
}

/**
 * Sets or deletes the index entries that find `port` by foreign network and pod. A port is found by
 * node by listing (reads.ts): no node key is written (issue 32: one inserted key fewer per
 * allocation); the one an older manager wrote goes with its port's release or rebinding.
 */
export function writeIndexes(tx: Tx, port: PortRecord, op: "set" | "delete"): void {
  const idx: Key[] = [];
  const id = portKeyId(port);
  // A tenant's ports on its own networks are found through those networks; only ports on another
  // tenant's (public) network need an index of their own.
  if (port.tenant !== port.networkTenant) {
    idx.push(keys.portOfForeignNetwork(port.tenant, port.networkId, id));
  }
  if (port.node && op === "delete") idx.push(keys.portOfNode(port.node, port.networkId, id));
  const pod = indexedPod(port);
  if (pod) idx.push(keys.portOfPod(pod, port.networkId, id));
  for (const k of idx) op === "set" ? tx.set(k, true) : tx.delete(k);
}
