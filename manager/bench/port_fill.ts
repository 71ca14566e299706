/**
 * Fills a network with many ports quickly, for the start-up benchmark. The allocation path commits
 * at most 46 ports at a time (one fsync each: about 4,400 ports/s on this machine), so a million
 * would take minutes. Here the first port goes through the allocation path (putPort) and is the
 * template; the others are its record with their own ID, address, pool index, MAC, node and time,
 * written with their node index and address-history stint (when history is kept), the addresses
 * taken from the network's pool as an allocation takes them, in commits as large as a commit may
 * be (Deno KV's limits). port_fill_test.ts proves the store is the one the allocation path leaves.
 */
import { formatIp } from "@knitter/common/address";
import { macFor } from "../ipam/derived_mac.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import { now } from "../service/context.ts";
import { stintStart } from "../service/history.ts";
import { resolveNetwork } from "../service/network_lookup.ts";
import { keyId, portKeyId, putPort } from "../service/ports/mod.ts";
import { COMMIT_LIMITS, type Key } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import type { Ctx } from "../service/context.ts";

export interface FillOptions {
  /** The ports' tenant: the network's own, or another on a public network. */
  tenant: string;
  network: string;
  count: number;
  /** Ports are spread over nodes "n0".."n<nodes-1>", the j-th on n<j % nodes>. */
  nodes: number;
  /** Ports a commit holds at most (default: as many as a commit's writes allow). */
  perCommit?: number;
  /** Called after each commit with the ports written so far. */
  progress?: (done: number) => void;
}

/** A port's record key and index keys: on another tenant's network, its tenant's. */
function portKeys(net: NetworkRecord, port: PortRecord): Key[] {
  const id = portKeyId(port);
  const out = [keys.port(net.id, id)];
  if (port.tenant !== net.tenant) out.push(keys.portOfForeignNetwork(port.tenant, net.id, id));
  return out;
}

/** Room a commit keeps for the pool's head and the chunks the commit's addresses fall in. */
const POOL_WRITES = 8;
/** Deno KV's cap on the total size of one commit's keys (bytes), with room to spare. */
const KEY_BYTES = 81_920 * 0.8;

/**
 * Ports one commit holds: within a commit's writes (the keys of a port) and Deno KV's total key
 * size (the longest ID's keys, as JSON: longer than encoded).
 */
function portsPerCommit(net: NetworkRecord, sample: PortRecord): number {
  const written = portKeys(net, sample);
  const bytes = written.reduce((n, k) => n + JSON.stringify(k).length, 0);
  return Math.min(
    Math.floor((COMMIT_LIMITS.mutations - POOL_WRITES) / written.length),
    Math.floor(KEY_BYTES / bytes),
  );
}

/** Ports "fill-0".."fill-<count-1>" on the network, each bound to a node. */
export async function fillPorts(ctx: Ctx, opts: FillOptions): Promise<void> {
  const { tenant, network, count, nodes } = opts;
  if (count === 0) return;
  const principal = { scope: "admin" as const };
  await putPort(ctx, { principal, tenant, network, id: "fill-0", body: { node: "n0" } });
  const net = await resolveNetwork(ctx, { principal, tenant, network });
  const template =
    (await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, tenant, "fill-0"))))
      .value!;
  const longest = { ...template, id: `fill-${count}`, ip: "255.255.255.255", node: `n${nodes}` };
  const perCommit = opts.perCommit ?? portsPerCommit(net, longest);
  for (let from = 1; from < count; from += perCommit) {
    await commitPorts(ctx, { net, template, from, to: Math.min(count, from + perCommit), nodes });
    opts.progress?.(Math.min(count, from + perCommit));
  }
}

/** Ports from..to-1 in one commit, checked against the pool's head like every allocation. */
async function commitPorts(
  ctx: Ctx,
  opts: { net: NetworkRecord; template: PortRecord; from: number; to: number; nodes: number },
): Promise<void> {
  const { net, template, from, to, nodes } = opts;
  const pool = ctx.pools.addresses(net);
  const space = ctx.pools.space(net);
  const tx = new Tx();
  const edit = await pool.edit(tx);
  const createdAt = now();
  for (let j = from; j < to; j++) {
    const index = await edit.allocate(ctx.pools.allowed(net));
    if (index === null) throw new Error(`network "${net.name}" is full after ${j} ports`);
    const port: PortRecord = {
      ...template,
      id: `fill-${j}`,
      ip: formatIp({ family: net.family, value: space.valueAt(index) }),
      mac: macFor(net.id, index),
      index,
      node: `n${j % nodes}`,
      createdAt,
    };
    // The record is its live holding in the address history, as an allocation's (history.ts).
    const stintFrom = stintStart(ctx);
    if (stintFrom === undefined) delete port.stintFrom;
    else port.stintFrom = stintFrom;
    const [record, ...indexes] = portKeys(net, port);
    tx.set(record, port);
    for (const k of indexes) tx.set(k, true);
  }
  edit.flush();
  if (!(await tx.commit(ctx.store))) {
    throw new Error(
      `ports ${from}..${to - 1}: the pool changed under the fill (nothing else may write)`,
    );
  }
}
