/**
 * A new port's floating addresses (../floating_ips.ts), one per family of its addresses: the one
 * bound to its ID, else the one bound to its claim, if any. The binding is kept under the port's ID (or claim), so a port made again (a pod
 * on another node, a live migration's target) carries it.
 */
import { FLOATING_FIELD, keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { Entry } from "../../store/store.ts";
import type { Tx } from "../../store/tx.ts";
import type { Ctx } from "../context.ts";
import { portKeyId } from "./records.ts";

/** The port with its floating address; its commit checks the binding (a racing bind reads again). */
export async function floatingForNewPort(
  ctx: Ctx,
  tx: Tx,
  made: { net: NetworkRecord; port: PortRecord },
): Promise<PortRecord> {
  const { net, port } = made;
  if (!await everBound(ctx, tx, net)) return port;
  let out = port;
  for (const family of port.ip6 === undefined ? [4 as const] : [4 as const, 6 as const]) {
    const address = await boundTo(ctx, tx, { port, family });
    if (address !== undefined) out = { ...out, [FLOATING_FIELD[family]]: address };
  }
  return out;
}

/** The floating address of `family` bound to the port's ID, else to its claim (each checked). */
async function boundTo(
  ctx: Ctx,
  tx: Tx,
  at: { port: PortRecord; family: 4 | 6 },
): Promise<string | undefined> {
  const { port, family } = at;
  const byId = keys.floatingOfPort(port.networkId, portKeyId(port), family);
  const byClaim = port.claim === undefined
    ? []
    : [keys.floatingOfClaim(port.networkId, port.tenant, port.claim, family)];
  for (const key of [byId, ...byClaim]) {
    const index = await ctx.store.get<{ address: string }>(key);
    tx.check(index);
    if (index.value) return index.value.address;
  }
  return undefined;
}

/** Per commit: whether each network has had a binding (checked once per commit). */
const marks = new WeakMap<Tx, Map<string, Promise<boolean>>>();

/**
 * Whether a floating address was ever bound on the network (its marker, checked in the commit): a
 * batch of new ports on a network without one reads no binding key per port.
 */
function everBound(ctx: Ctx, tx: Tx, net: NetworkRecord): Promise<boolean> {
  const known = marks.get(tx) ?? new Map<string, Promise<boolean>>();
  marks.set(tx, known);
  let mark = known.get(net.id);
  if (!mark) {
    mark = markerOf(ctx, tx, net).then((e) => e.value !== null);
    known.set(net.id, mark);
  }
  return mark;
}

/**
 * The network's marker as this process last read it, checked in the commit: an allocation reads
 * nothing for it (issue 32). A bind since (here or on another replica) fails the commit on the
 * check, which forgets the remembered entry, and the retry reads the store.
 */
async function markerOf(ctx: Ctx, tx: Tx, net: NetworkRecord): Promise<Entry<unknown>> {
  const memo = ctx.pools.perNetwork(net, "floating-marker", () => ({
    known: undefined as Entry<unknown> | undefined,
  }));
  const e = memo.known ?? await ctx.store.get(keys.floatingMarked(net.id));
  memo.known = e;
  tx.check(e);
  tx.onAbort(() => memo.known = undefined);
  return e;
}
