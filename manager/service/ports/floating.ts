/**
 * A new port's floating address (../floating_ips.ts): the one bound to its ID, if any. The binding
 * is kept under the port's ID, so a port made again (a pod on another node) carries it.
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
  const index = await ctx.store.get<{ address: string }>(
    keys.floatingOfPort(port.networkId, portKeyId(port)),
  );
  tx.check(index);
  return index.value ? { ...port, floating: index.value.address } : port;
}
