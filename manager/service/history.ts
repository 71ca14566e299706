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
import { cidrContains, formatIp, parseCidr, parseIp, parseMac } from "@knitter/common/address";
import { invalid } from "../errors.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import { macBlock, macIndex } from "../ipam/derived_mac.ts";
import { IndexSpace } from "../ipam/index_space.ts";
import type { Entry, Key } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { clockMs as clock, type Ctx } from "./context.ts";
import { getTenant } from "./tenants.ts";
import { keyId } from "./port_key_id.ts";
import { holdersOf } from "./history_holders.ts";

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

/**
 * When the stint of a port allocated, or bound again, now begins: its record carries it
 * (`stintFrom`) and is its live stint, so the commit writes no key of history (issue 32). Undefined
 * with history off: no stint begins.
 */
export function stintStart(ctx: Ctx): number | undefined {
  return keepingHistory(ctx) ? clock(ctx) : undefined;
}

/** The stint a port's record tells: from its `stintFrom`, going on. */
function liveStint(port: PortRecord, fromMs: number): HistoryEntry {
  const entry: HistoryEntry = {
    tenant: port.tenant,
    network: port.network,
    networkTenant: port.networkTenant,
    networkId: port.networkId,
    port: port.id,
    ip: port.ip,
    ...(port.ip6 !== undefined ? { ip6: port.ip6 } : {}),
    mac: port.mac,
    from: new Date(fromMs).toISOString(),
  };
  if (port.pod !== undefined) entry.pod = port.pod;
  if (port.node !== undefined) entry.node = port.node;
  if (port.interface !== undefined) entry.interface = port.interface;
  return entry;
}

/**
 * Ends the port's stint in this commit and prunes a few expired stints in the same commit. The
 * stint an older manager stored open is ended where it is (checked: nothing else may end it
 * meanwhile); the one the port's record is (`stintFrom`) is stored now, ended. A port allocated
 * while history was off has neither: nothing to end. With history off, the stints that ended while
 * it was on are still pruned (all of them: a retention of 0 keeps none).
 */
export async function closeStint(
  ctx: Ctx,
  tx: Tx,
  stint: { holder: PortRecord; ended: Ended; net: HistoryNetwork },
): Promise<void> {
  const { holder, ended, net } = stint;
  if (keepingHistory(ctx) && !(await closeStored(ctx, tx, stint))) {
    if (holder.stintFrom !== undefined) storeEnded(ctx, tx, { holder, ended, net });
  }
  await pruneHistory(ctx, tx, PRUNE_PER_COMMIT);
}

/** Stores the stint a port's record tells, ended now, under its address (and a fixed MAC). */
function storeEnded(
  ctx: Ctx,
  tx: Tx,
  stint: { holder: PortRecord; ended: Ended; net: HistoryNetwork },
): void {
  const { holder, ended, net } = stint;
  const ms = clock(ctx);
  const fromMs = holder.stintFrom!;
  const id = crypto.randomUUID().slice(0, 8);
  const closed = { ...liveStint(holder, fromMs), to: new Date(ms).toISOString(), ended };
  const tail = [holder.tenant, holder.networkId, fromMs, id];
  const stintKeys = [keys.historyOf("ip", holder.ip, ...tail)];
  // A derived MAC's stints are found through their address and the network's pools, kept here.
  if (derivedIn(holder.networkId, holder.mac)) keepNetwork(ctx, tx, net);
  else stintKeys.push(keys.historyOf("mac", holder.mac, ...tail));
  if (holder.ip6 !== undefined) stintKeys.push(keys.historyOf("ip", holder.ip6, ...tail));
  for (const k of stintKeys) tx.set(k, closed);
  tx.set(keys.historyExpiry(ms, id), { keys: stintKeys } satisfies ExpiryRecord);
}

/** Ends the port's stint an older manager stored open, if there is one: whether there was. */
async function closeStored(
  ctx: Ctx,
  tx: Tx,
  stint: { holder: Holder; ended: Ended; net: HistoryNetwork },
): Promise<boolean> {
  const { holder, ended, net } = stint;
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
    return true;
  }
  return false;
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

/**
 * A port bound or unbound in this commit: its stint ends; the new record (its `stintFrom` set by
 * the caller from {@link stintStart}) is the next one.
 */
export async function rebindStint(
  ctx: Ctx,
  tx: Tx,
  change: { before: PortRecord; after: Pick<PortRecord, "pod" | "node">; net: HistoryNetwork },
): Promise<void> {
  const { before, after } = change;
  if (!keepingHistory(ctx)) return;
  const ended = after.pod === undefined && after.node === undefined ? "unbound" : "bound";
  await closeStint(ctx, tx, { holder: before, ended, net: change.net });
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
  // The live stints are the port records; one an older manager stored open is answered as stored.
  const stored = new Set([...found.values()].filter((s) => s.to === undefined).map(portOfStint));
  for (const port of await liveHolders(ctx, kind, value, tenant)) {
    if (port.stintFrom === undefined || stored.has(portOfStint({ ...port, port: port.id }))) {
      continue;
    }
    const tail = [port.tenant, port.networkId, port.stintFrom, `live/${port.id}`];
    add({
      key: keys.historyOf(kind, value, ...tail),
      value: liveStint(port, port.stintFrom),
      version: null,
    });
  }
  const out = [...found.values()];
  out.sort((a, b) => a.from < b.from ? -1 : a.from > b.from ? 1 : 0);
  return out.slice(-MAX_ANSWER);
}

function portOfStint(s: Pick<HistoryEntry, "networkId" | "tenant" | "port">): string {
  return JSON.stringify([s.networkId, s.tenant, s.port]);
}

/**
 * The ports that hold an address or MAC now: of `tenant`, or of every tenant. No index is written
 * for this (an allocation would write it): the networks whose pools hold the address (or whose
 * block derives the MAC, or that know the fixed MAC) are found from their records, and their
 * holders in this manager's index of who holds what (history_holders.ts), their records read and
 * checked.
 */
async function liveHolders(
  ctx: Ctx,
  kind: string,
  value: string,
  tenant: string | undefined,
): Promise<PortRecord[]> {
  const out: PortRecord[] = [];
  const mine = (p: PortRecord) => tenant === undefined || p.tenant === tenant;
  for await (const e of ctx.store.list<NetworkRecord>(keys.networks())) {
    const net = e.value;
    if (!net || (tenant !== undefined && net.tenant !== tenant && !net.public)) continue;
    const held = (p: PortRecord) =>
      kind === "ip" ? p.ip === value || p.ip6 === value : p.mac === value;
    if (kind === "mac" && !derivedIn(net.id, value)) {
      const owner =
        (await ctx.store.get<{ tenant: string; id: string }>(keys.mac(net.id, value))).value;
      if (!owner || (tenant !== undefined && owner.tenant !== tenant)) continue;
      const p = (await ctx.store.get<PortRecord>(
        keys.port(net.id, keyId(net.tenant, owner.tenant, owner.id)),
      )).value;
      if (p && held(p)) out.push(p);
      continue;
    }
    // No pool bit is tested first: this manager's copy of the pool may not have another
    // replica's allocation yet; the index has it.
    const address = kind === "ip" ? value : derivedAddress(ctx, net, macIndex(value));
    if (address === null || (kind === "ip" && !mayHold(ctx, net, value))) continue;
    for (const p of await holdersOf(ctx, net.id, address)) if (held(p) && mine(p)) out.push(p);
  }
  return out;
}

/** The address at pool index `index` of `net` (whose derived MAC names it), if the pools have it. */
function derivedAddress(ctx: Ctx, net: NetworkRecord, index: number): string | null {
  const space = ctx.pools.space(net);
  if (index >= space.size) return null;
  return formatIp({ family: net.family, value: space.valueAt(index) });
}

/** Whether a port of `net` may hold `ip`: in its pools, or in its IPv6 CIDR (dual-stack). */
function mayHold(ctx: Ctx, net: NetworkRecord, ip: string): boolean {
  const parsed = parseIp(ip)!;
  if (parsed.family !== net.family) {
    const cidr6 = net.cidr6 === undefined ? null : parseCidr(net.cidr6);
    return cidr6 !== null && "family" in cidr6 && cidrContains(cidr6, parsed);
  }
  return ctx.pools.space(net).indexOf(parsed.value) >= 0;
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
