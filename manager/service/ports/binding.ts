/**
 * Stable bindings: a port keeps its address while its pod comes and goes. A second PUT binds the
 * node, pod and interface it did not have yet; an unbind takes them off and keeps the address.
 */
import { isStablePortId, type PodRef, type Port } from "@knitter/common";
import { unscoped } from "../cluster_names.ts";
import { ApiError } from "../../errors.ts";
import { canonicalIp } from "@knitter/common/address";
import { keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { Tx } from "../../store/tx.ts";
import { rebindStint, stintStart } from "../history.ts";
import { type Ctx, now, retry } from "../context.ts";
import { resolveNetwork } from "../network_lookup.ts";
import { portToChange } from "./access.ts";
import {
  type PortBody,
  portKeyId,
  type PortTarget,
  portView,
  type PutResult,
  writeIndexes,
} from "./records.ts";

/** A second PUT of a port: the same answer, binding node / pod / interface if still unset. */
export function bindExisting(opts: {
  tx: Tx;
  net: NetworkRecord;
  port: PortRecord;
  /** The version `port` was read at: the commit goes in only while it is unchanged. */
  version: string;
  owner: string;
  body: PortBody;
  /** When a new binding's holding begins (../history.ts stintStart); undefined: history off. */
  stintFrom: number | undefined;
}): PutResult {
  const { tx, net, port, version, owner, body } = opts;
  if (port.tenant !== owner) {
    throw new ApiError("conflict", `Port "${port.id}" exists and belongs to another tenant`);
  }
  const clash = (field: string, want: unknown, have: unknown) => {
    throw new ApiError(
      "conflict",
      `Port "${port.id}" already exists with ${field} ${
        JSON.stringify(have)
      }; the request asks for ${
        JSON.stringify(want)
      }. Delete the port first or use another port ID`,
      field,
    );
  };
  if (body.ip !== undefined && canonicalIp(body.ip) !== port.ip) clash("ip", body.ip, port.ip);
  if (body.ipGroup !== undefined && body.ipGroup !== port.ipGroup) {
    clash("ipGroup", body.ipGroup, port.ipGroup);
  }
  if (body.mac !== undefined && body.mac !== port.mac) clash("mac", body.mac, port.mac);
  if (body.claim !== undefined && body.claim !== port.claim) clash("claim", body.claim, port.claim);
  if (body.node !== undefined && port.node !== undefined && body.node !== port.node) {
    clash("node", body.node, port.node);
  }
  refuseForeignUnbound(port, body);
  if (
    body.interface !== undefined && port.interface !== undefined &&
    body.interface !== port.interface
  ) {
    clash("interface", body.interface, port.interface);
  }
  if (body.pod !== undefined && port.pod !== undefined && !samePod(body.pod, port.pod)) {
    clash("pod", body.pod, port.pod);
  }
  const bound: PortRecord = {
    ...port,
    node: port.node ?? body.node,
    interface: port.interface ?? body.interface,
    pod: port.pod ?? body.pod,
  };
  if (bound.pod !== undefined) delete bound.unboundAt;
  // Security groups may change on any PUT ([]: none of its own, its network's).
  if (body.securityGroups?.length) bound.securityGroups = body.securityGroups;
  else if (body.securityGroups) delete bound.securityGroups;
  const changed = bound.node !== port.node || bound.interface !== port.interface ||
    bound.pod !== port.pod ||
    JSON.stringify(bound.securityGroups) !== JSON.stringify(port.securityGroups);
  if (changed) {
    newHolding(bound, opts.stintFrom);
    const key = keys.port(port.networkId, portKeyId(port));
    tx.check({ key, version });
    tx.set(key, bound);
    writeIndexes(tx, port, "delete");
    writeIndexes(tx, bound, "set");
  }
  return { port: portView(net, bound), created: false, changed };
}

/**
 * A port bound or unbound begins a holding of its address with its new binding, which its record
 * is. With history off none is kept: the record no longer tells the holding it began with.
 */
function newHolding(port: PortRecord, stintFrom: number | undefined): void {
  if (stintFrom === undefined) delete port.stintFrom;
  else port.stintFrom = stintFrom;
}

/**
 * A node's agent binds an unbound port only when it made the port, or the port is a stable one
 * (its ID names its pod, which authorizePut checked): a StatefulSet pod's next incarnation may run
 * on any node. Another unbound port (one its tenant made, or the admin unbound) is not its to take.
 */
function refuseForeignUnbound(port: PortRecord, body: PortBody): void {
  if (body.byNode === undefined || port.node !== undefined || port.madeBy === body.byNode) return;
  if (isStablePortId(unscoped(port.id).name)) return;
  throw new ApiError(
    "forbidden",
    `Port "${port.id}" is not bound to a node and a token of node "${body.byNode}" did not make it: a node binds only the ports it made and stable ports of its pods; the tenant or an admin binds or releases it`,
  );
}

function samePod(a: PodRef, b: PodRef): boolean {
  return a.namespace === b.namespace && a.name === b.name && (a.uid ?? b.uid) === (b.uid ?? a.uid);
}

/**
 * Takes a port off its pod and node and keeps its address: a stable port whose pod is gone, ready
 * for the pod's next incarnation on any node. One commit, so no other request can take the port
 * ID in between (as a DELETE then PUT would allow). `unboundAt` says since when; the next PUT that
 * names a pod binds it again. An unbound port stays as it is. 404 when unknown.
 */
export async function unbindPort(ctx: Ctx, target: PortTarget): Promise<Port> {
  const net = await resolveNetwork(ctx, { ...target, fresh: true });
  const { port, changed } = await retry(ctx, async (tx) => {
    const e = await portToChange(ctx, { ...target, net, verb: "unbind" });
    const port = e.value;
    if (port.node === undefined && port.pod === undefined) return { port, changed: false };
    const { node: _node, pod: _pod, ...rest } = port;
    const unbound: PortRecord = { ...rest, unboundAt: now() };
    newHolding(unbound, stintStart(ctx));
    tx.check(e).set(e.key, unbound);
    writeIndexes(tx, port, "delete");
    writeIndexes(tx, unbound, "set");
    await rebindStint(ctx, tx, { before: port, after: unbound, net });
    return { port: unbound, changed: true };
  });
  const view = portView(net, port);
  if (changed) ctx.feed.publish({ type: "port", op: "put", port: view });
  return view;
}
