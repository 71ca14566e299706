/**
 * Address history: who held each address and MAC when. A stint is one port holding one address
 * and MAC with one pod and node (or none, while unbound), from one time to another; it is written
 * in the commit of the allocation, release, unbind or bind that opens or ends it, so the history
 * is exactly what the ports were, on Deno KV and etcd alike.
 *
 * Keys (model.ts): a stint is stored under its address, and under its MAC when that is a fixed one,
 * each `[kind, value, tenant, networkId, fromMs, stint]`, so that a tenant's query reads only its
 * own stints of that address (a tenant never sees another's, also on a public network). A MAC the
 * network derived from the address (ipam/derived_mac.ts) names its network's block and the
 * address's pool index, so its stints are found under their address: the network's pools are kept
 * once per network under `keys.historyNetwork(block, networkId)`, and an allocation writes one key
 * of history, not two (issue 32; stints of older managers under such MACs are still read, and
 * their copy goes when they end). An ended stint
 * also has `["history_expiry", toMs, stint]`, ordered by end time: each commit that ends a stint
 * deletes a few expired ones, and a query never answers one past `settings.historyMs`.
 *
 * @module
 */
import { parseIsoTime, type PodRef } from "@knitter/common";
import { formatIp, parseIp, parseMac } from "@knitter/common/address";
import { invalid } from "../errors.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import { macBlock, macIndex } from "../ipam/derived_mac.ts";
import { IndexSpace } from "../ipam/index_space.ts";
import type { Entry, Key } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { clockMs as clock, type Ctx } from "./context.ts";
import { getTenant } from "./tenants.ts";
import { keyId } from "./port_key_id.ts";

/** One stint, as stored and answered. */
export interface HistoryEntry {
  /** The tenant of the port that held it (on a public network, not the network's). */
  tenant: string;
  network: string;
  networkTenant: string;
  networkId: string;
  port: string;
  ip: string;
  /** A dual-stack port's IPv6 address: its stint is found under it too. */
  ip6?: string;
  mac: string;
  pod?: PodRef;
  node?: string;
  interface?: string;
  from: string;
  /** Absent while the stint goes on. */
  to?: string;
  /** What ended it: the port released, taken off its pod (unbind), or bound to a pod or node. */
  ended?: Ended;
}

export type Ended = "released" | "unbound" | "bound";

/** What a stint is made of: a port record or a port as answered (they share these fields). */
export type Holder =
  & Pick<
    PortRecord,
    | "id"
    | "tenant"
    | "network"
    | "networkTenant"
    | "networkId"
    | "ip"
    | "ip6"
    | "mac"
    | "pod"
    | "node"
  >
  & { interface?: string };

interface ExpiryRecord {
  keys: Key[];
}

/** Expired stints a commit that ends one deletes at most: the pruning keeps pace with the ends. */
const PRUNE_PER_COMMIT = 8;
/** Stints one answer holds at most (the oldest are left out beyond). */
export const MAX_ANSWER = 1000;

/** Whether history is kept (its retention is not 0). */
export function keepingHistory(ctx: Ctx): boolean {
  return ctx.settings.historyMs > 0;
}

/** What a MAC query needs of a network to find its derived MACs' stints: its pools. */
type HistoryNetwork = Pick<NetworkRecord, "id" | "family" | "allocationPools">;

/** Whether `mac` is one the network derives from an address: its stints are found through it. */
function derivedIn(networkId: string, mac: string): boolean {
  return mac.startsWith(macBlock(networkId));
}

/** Keeps the network's pools for MAC queries, once per network and process (a blind write). */
function keepNetwork(ctx: Ctx, tx: Tx, net: HistoryNetwork): void {
  const kept = ctx.pools.perNetwork(net as NetworkRecord, "history-network", () => ({ at: false }));
  if (kept.at) return;
  const { id, family, allocationPools } = net;
  tx.set(keys.historyNetwork(macBlock(id), id), { id, family, allocationPools });
  tx.onCommit(() => kept.at = true);
}

/** Opens the stint of a port allocated, or bound again, in this commit. */
export function openStint(
  ctx: Ctx,
  tx: Tx,
  opened: { holder: Holder; net: HistoryNetwork },
): void {
  if (!keepingHistory(ctx)) return;
  const { holder, net } = opened;
  const ms = clock(ctx);
  const stint = crypto.randomUUID().slice(0, 8);
  const entry: HistoryEntry = {
    tenant: holder.tenant,
    network: holder.network,
    networkTenant: holder.networkTenant,
    networkId: holder.networkId,
    port: holder.id,
    ip: holder.ip,
    ...(holder.ip6 !== undefined ? { ip6: holder.ip6 } : {}),
    mac: holder.mac,
    from: new Date(ms).toISOString(),
  };
  if (holder.pod !== undefined) entry.pod = holder.pod;
  if (holder.node !== undefined) entry.node = holder.node;
  if (holder.interface !== undefined) entry.interface = holder.interface;
  const tail = [holder.tenant, holder.networkId, ms, stint];
  tx.set(keys.historyOf("ip", holder.ip, ...tail), entry);
  if (derivedIn(holder.networkId, holder.mac)) keepNetwork(ctx, tx, net);
  else tx.set(keys.historyOf("mac", holder.mac, ...tail), entry);
  if (holder.ip6 !== undefined) tx.set(keys.historyOf("ip", holder.ip6, ...tail), entry);
}

/**
 * Ends the port's open stint in this commit (checked: nothing else may end it meanwhile), and
 * prunes a few expired stints in the same commit. A port allocated while history was off has no
 * open stint: nothing to end. With history off, the stints that ended while it was on are still
 * pruned (all of them: a retention of 0 keeps none).
 */
export async function closeStint(
  ctx: Ctx,
  tx: Tx,
  stint: { holder: Holder; ended: Ended; net: HistoryNetwork },
): Promise<void> {
  const { holder, ended, net } = stint;
  if (!keepingHistory(ctx)) {
    await pruneHistory(ctx, tx, PRUNE_PER_COMMIT);
    return;
  }
  const prefix = keys.historyOf("ip", holder.ip, holder.tenant, holder.networkId);
  // The newest stints of the address in the network: one holder at a time, so the open one is
  // the newest (or among the next few, when stints began in the same millisecond).
  for await (const e of newest(ctx, prefix)) {
    const entry = e.value;
    if (!entry || entry.to !== undefined || entry.port !== holder.id) continue;
    const ms = clock(ctx);
    const [fromMs, stint] = e.key.slice(-2) as [number, string];
    const closed: HistoryEntry = { ...entry, to: new Date(ms).toISOString(), ended };
    const macKey = keys.historyOf("mac", entry.mac, holder.tenant, holder.networkId, fromMs, stint);
    tx.check(e).set(e.key, closed);
    const stintKeys = [e.key];
    // A derived MAC's stint is found through its address (and its network's pools, kept here
    // too for a stint an older manager opened): an older manager's copy under the MAC goes.
    if (derivedIn(holder.networkId, entry.mac)) {
      tx.delete(macKey);
      keepNetwork(ctx, tx, net);
    } else stintKeys.push(macKey);
    if (entry.ip6 !== undefined) {
      stintKeys.push(
        keys.historyOf("ip", entry.ip6, holder.tenant, holder.networkId, fromMs, stint),
      );
    }
    for (const k of stintKeys.slice(1)) tx.set(k, closed);
    tx.set(keys.historyExpiry(ms, stint), { keys: stintKeys } satisfies ExpiryRecord);
    break;
  }
  await pruneHistory(ctx, tx, PRUNE_PER_COMMIT);
}

/** The newest stint under `prefix`, then (only when asked for more) the next three. */
async function* newest(ctx: Ctx, prefix: Key): AsyncIterable<Entry<HistoryEntry>> {
  const top = await first(ctx.store.list<HistoryEntry>(prefix, { reverse: true, limit: 1 }));
  if (top === undefined) return;
  yield top;
  let skip = true;
  for await (const e of ctx.store.list<HistoryEntry>(prefix, { reverse: true, limit: 4 })) {
    if (skip) skip = false;
    else yield e;
  }
}

async function first<T>(items: AsyncIterable<T>): Promise<T | undefined> {
  for await (const item of items) return item;
  return undefined;
}

/** A port bound or unbound in this commit: its stint ends, and one with the new binding begins. */
export async function rebindStint(
  ctx: Ctx,
  tx: Tx,
  change: { before: Holder; after: Holder; net: HistoryNetwork },
): Promise<void> {
  const { before, after } = change;
  if (!keepingHistory(ctx)) return;
  const ended = after.pod === undefined && after.node === undefined ? "unbound" : "bound";
  await closeStint(ctx, tx, { holder: before, ended, net: change.net });
  openStint(ctx, tx, { holder: after, net: change.net });
}

const pruned = new WeakSet<Tx>();

/**
 * Deletes, in `tx`, up to `limit` stints that ended more than the retention ago (history off:
 * that ended at all), oldest first; answers how many. Once per commit. Deleting needs no check: a stint past its retention changes
 * no more, and two commits deleting it both leave it deleted.
 */
export async function pruneHistory(ctx: Ctx, tx: Tx, limit: number): Promise<number> {
  if (pruned.has(tx)) return 0;
  pruned.add(tx);
  const cutoff = clock(ctx) - ctx.settings.historyMs;
  // Most commits find nothing expired: one key read says so.
  const oldest = await first(ctx.store.list(keys.historyExpiries(), { limit: 1 }));
  if (oldest === undefined || (oldest.key[1] as number) >= cutoff) return 0;
  let n = 0;
  for await (const e of ctx.store.list<ExpiryRecord>(keys.historyExpiries(), { limit })) {
    if ((e.key[1] as number) >= cutoff) break;
    tx.delete(e.key);
    for (const k of e.value?.keys ?? []) tx.delete(k);
    n++;
  }
  return n;
}

/** Expired stints one sweep commit deletes at most (three keys each, within a commit's 1,000). */
const SWEEP_BATCH = 100;

/**
 * Deletes every stint past the retention, in commits of up to SWEEP_BATCH: for a manager whose
 * ports are not released for a while (commits that end stints prune only a few each). With history
 * off, every stint that ended (while it was on). Answers how many were deleted.
 */
export async function sweepHistory(ctx: Ctx): Promise<number> {
  let total = 0;
  for (;;) {
    const tx = new Tx();
    const n = await pruneHistory(ctx, tx, SWEEP_BATCH);
    if (n === 0) return total;
    await tx.commit(ctx.store);
    total += n;
    if (n < SWEEP_BATCH) return total;
  }
}

export interface HistoryQuery {
  ip?: string;
  mac?: string;
  /** ISO times: the stints that held it at `at`, or at any time between `from` and `to`. */
  at?: string;
  from?: string;
  to?: string;
}

/**
 * The stints of an address or MAC, oldest first: of `tenant`'s ports only, or of every tenant's
 * (undefined: the admin's view). Stints past the retention are never answered, pruned yet or not.
 */
export async function queryHistory(
  ctx: Ctx,
  tenant: string | undefined,
  q: HistoryQuery,
): Promise<HistoryEntry[]> {
  // The schema (HistoryQuery) lets through exactly one of ip and mac.
  const [kind, value] = q.ip !== undefined
    ? ["ip", canonicalIp(q.ip)]
    : ["mac", canonicalMac(q.mac!)];
  const at = time("at", q.at);
  const from = time("from", q.from) ?? -Infinity;
  const to = time("to", q.to) ?? Infinity;
  if (from > to) throw invalid("query.from", `${q.from} is after to (${q.to})`);
  const cutoff = clock(ctx) - ctx.settings.historyMs;
  // A tenant sees nothing that began before it was made: that was a deleted tenant of its name.
  const born = tenant === undefined
    ? -Infinity
    : Date.parse((await getTenant(ctx, tenant)).createdAt);
  const answered = (e: Entry<HistoryEntry>) => {
    const s = e.value;
    if (!s) return false;
    const start = e.key[5] as number;
    const end = s.to === undefined ? Infinity : Date.parse(s.to);
    if (end < cutoff || start < born) return false;
    return at !== undefined ? start <= at && at < end : start <= to && end >= from;
  };
  // One stint may be found twice (an older manager's copy under a derived MAC): by its key's tail.
  const found = new Map<string, HistoryEntry>();
  const add = (e: Entry<HistoryEntry>) => {
    if (answered(e)) found.set(e.key.slice(3).join("/"), e.value!);
  };
  for await (const e of ctx.store.list<HistoryEntry>(stintsOf(kind, value, tenant))) add(e);
  if (kind === "mac") {
    for (const e of await derivedStints(ctx, value, tenant)) add(e);
  }
  const out = [...found.values()];
  out.sort((a, b) => a.from < b.from ? -1 : a.from > b.from ? 1 : 0);
  return out.slice(-MAX_ANSWER);
}

/** The keys of the stints of an address or MAC: of `tenant`'s ports, or of every tenant's. */
function stintsOf(kind: string, value: string, tenant: string | undefined): Key {
  return tenant === undefined ? keys.historyOf(kind, value) : keys.historyOf(kind, value, tenant);
}

/**
 * The stints of a MAC that networks derived from an address: for each network of its block, the
 * address at its index, and that address's stints in the network with that MAC.
 */
async function derivedStints(
  ctx: Ctx,
  mac: string,
  tenant: string | undefined,
): Promise<Entry<HistoryEntry>[]> {
  const out: Entry<HistoryEntry>[] = [];
  const index = macIndex(mac);
  const block = mac.slice(0, 8);
  for await (const n of ctx.store.list<HistoryNetwork>(keys.historyNetworks(block))) {
    const net = n.value;
    if (!net || macBlock(net.id) !== block) continue;
    const space = new IndexSpace(net.allocationPools.map((p) => ({
      start: parseIp(p.start)!.value,
      end: parseIp(p.end)!.value,
    })));
    if (index >= space.size) continue;
    const ip = formatIp({ family: net.family, value: space.valueAt(index) });
    for await (const e of ctx.store.list<HistoryEntry>(stintsOf("ip", ip, tenant))) {
      if (e.key[4] === net.id && e.value?.mac === mac) out.push(e);
    }
  }
  return out;
}

function canonicalIp(text: string): string {
  const ip = parseIp(text);
  if (!ip) throw invalid("query.ip", `"${text}" is not an IPv4 or IPv6 address`);
  return formatIp(ip);
}

function canonicalMac(text: string): string {
  const mac = parseMac(text);
  if (!mac) throw invalid("query.mac", `"${text}" is not a MAC address like 02:00:0a:01:00:05`);
  return mac;
}

function time(field: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = parseIsoTime(text);
  if ("ms" in t) return t.ms;
  throw invalid(`query.${field}`, `"${text}" ${t.error}: use ISO 8601, e.g. 2026-11-25T03:00:00Z`);
}
