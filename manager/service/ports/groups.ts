/**
 * A port's security groups changed alone (PATCH): the monitor's way to attach and detach policy
 * groups. Unlike a PUT it never allocates: an unknown port is 404, so a port released meanwhile
 * stays released (a PUT would make it again, an address with no pod and no node). The body names
 * the network the caller saw the port on: a path that resolves to another network (a tenant's own
 * network shadowing the public one of that name) is 409, not a change to the wrong port.
 */
import type { Port } from "@knitter/common";
import { ApiError } from "../../errors.ts";
import type { PortRecord } from "../../model.ts";
import { type Ctx, retry } from "../context.ts";
import { resolveNetworkRef } from "../network_lookup.ts";
import { ownerOf, portToChange } from "./access.ts";
import { type PortTarget, portView } from "./records.ts";
import { refuseFlowsOnly } from "../network_fields.ts";
import { checkNetwork, portGuards } from "./guards.ts";

export interface PortGroupsBody {
  networkId: string;
  /** [] for none of its own: its network's defaults. */
  securityGroups: string[];
}

export async function patchPortGroups(
  ctx: Ctx,
  req: PortTarget & { body: PortGroupsBody },
): Promise<Port> {
  const { principal, tenant, id, body } = req;
  const owner = ownerOf(principal, tenant);
  const { port, changed } = await retry(ctx, async (tx) => {
    // Read afresh on every attempt: the network, the port and the groups it will name.
    const ref = await resolveNetworkRef(ctx, { ...req, fresh: true });
    if (ref.net.id !== body.networkId) {
      throw new ApiError(
        "conflict",
        `Network "${req.network}" of tenant "${tenant}" is network ${ref.net.id}, not ${body.networkId} that the request names; nothing changed. Read the port again and name the network it is on`,
        "networkId",
      );
    }
    const e = await portToChange(ctx, { ...req, net: ref.net, verb: "change" });
    refuseFlowsOnly(ref.net.dataPlane, { securityGroups: body.securityGroups });
    const guards = await portGuards(ctx, { owner, id, body }, true);
    const next: PortRecord = { ...e.value };
    if (body.securityGroups.length > 0) next.securityGroups = body.securityGroups;
    else delete next.securityGroups;
    if (JSON.stringify(next.securityGroups) === JSON.stringify(e.value.securityGroups)) {
      return { port: { net: ref.net, record: e.value }, changed: false };
    }
    checkNetwork(tx, ref);
    for (const g of guards) tx.check(g);
    // Groups are in no index: the record alone changes.
    tx.check(e).set(e.key, next);
    return { port: { net: ref.net, record: next }, changed: true };
  });
  const view = portView(port.net, port.record);
  if (changed) ctx.feed.publish({ type: "port", op: "put", port: view });
  return view;
}
