/**
 * A new port's floating address (../floating_ips.ts): the one bound to its ID, else the one bound to
 * its claim, if any. The binding is kept under the port's ID (or claim), so a port made again (a pod
 * on another node, a live migration's target) carries it.
 */
import { keys, type PortRecord } from "../../model.ts";
import type { Tx } from "../../store/tx.ts";
import type { Ctx } from "../context.ts";
import { portKeyId } from "./records.ts";

/** The port with its floating address; its commit checks the binding (a racing bind reads again). */
export async function floatingForNewPort(
  ctx: Ctx,
  tx: Tx,
  port: PortRecord,
): Promise<PortRecord> {
  if (!await everBound(ctx, tx, port.networkId)) return port;
  const byId = keys.floatingOfPort(port.networkId, portKeyId(port));
  const byClaim = port.claim === undefined
    ? []
    : [keys.floatingOfClaim(port.networkId, port.tenant, port.claim)];
  for (const key of [byId, ...byClaim]) {
    const index = await ctx.store.get<{ address: string }>(key);
    tx.check(index);
    if (index.value) return { ...port, floating: index.value.address };
  }
  return port;
}

/** Per commit: whether each network has had a binding (read and checked once per commit). */
const marks = new WeakMap<Tx, Map<string, Promise<boolean>>>();

/**
 * Whether a floating address was ever bound on the network (its marker, checked in the commit): a
 * batch of new ports on a network without one reads one key, not one per port.
 */
function everBound(ctx: Ctx, tx: Tx, networkId: string): Promise<boolean> {
  const known = marks.get(tx) ?? new Map<string, Promise<boolean>>();
  marks.set(tx, known);
  let mark = known.get(networkId);
  if (!mark) {
    mark = ctx.store.get(keys.floatingMarked(networkId)).then((e) => {
      tx.check(e);
      return e.value !== null;
    });
    known.set(networkId, mark);
  }
  return mark;
}
