/**
 * Who holds an address now, without a key written per allocation (issue 32): an index in this
 * manager's memory, per network, of each address (IPv4 and a dual-stack port's IPv6) to the key IDs
 * of the ports that hold it. A network's index is made on its first query by one read of its ports,
 * and brought up to date before every query from the manager's change feed (`since(cursor, 0)`: on
 * Deno KV this process's own events, on etcd etcd's watch up to a marker written then, so other
 * replicas' commits before the query are in). When the feed cannot serve the cursor (its window
 * passed, another epoch, etcd compacted), every index is made again from the ports.
 *
 * The index names candidates; the query reads their records and keeps those that hold the address
 * (history.ts), so an entry left by a change the feed did not carry (a network deleted with its
 * ports) answers nothing wrong. Port records never change address in place: a port's put and delete
 * events are all it takes.
 *
 * Memory is bounded (HOLDER_LIMITS): an index unused for 10 minutes goes at the next query, and the
 * indexes together hold at most 250,000 addresses (the least recently used go first; a network
 * bigger than that alone is indexed while it is the one asked).
 *
 * @module
 */
import type { Port } from "@knitter/common";
import type { ChangeFeed, FeedEvent } from "../feed.ts";
import { keys, type PortRecord } from "../model.ts";
import { clockMs, type Ctx } from "./context.ts";
import { keyId } from "./port_key_id.ts";

/** The bound on the indexes' memory (tests lower it). */
export const HOLDER_LIMITS = {
  /** An index unused this long goes (ms). */
  idleMs: 10 * 60_000,
  /** Addresses all indexes hold together at most. */
  maxAddresses: 250_000,
};

/**
 * One network's addresses: address → the key ID of the port that holds it, or the IDs of the two
 * (a claim's ports during a live migration) or more. Mostly one: kept as a string, not an array.
 */
class NetworkHolders {
  private readonly held = new Map<string, string | string[]>();
  usedAt = 0;

  get size(): number {
    return this.held.size;
  }

  holders(address: string): string[] {
    const ids = this.held.get(address);
    return ids === undefined ? [] : typeof ids === "string" ? [ids] : ids;
  }

  add(address: string, id: string): void {
    const ids = this.holders(address);
    if (!ids.includes(id)) this.set(address, [...ids, id]);
  }

  remove(address: string, id: string): void {
    this.set(address, this.holders(address).filter((x) => x !== id));
  }

  private set(address: string, ids: string[]): void {
    if (ids.length === 0) this.held.delete(address);
    else this.held.set(address, ids.length === 1 ? ids[0] : ids);
  }
}

/** The indexes of one manager (one feed), and the feed cursor they are all up to date with. */
interface Indexes {
  cursor: string;
  networks: Map<string, NetworkHolders>;
  /** Held while the indexes are caught up or one is made: queries wait their turn. */
  turn: Promise<unknown>;
}

const perFeed = new WeakMap<ChangeFeed, Indexes>();

/** A port's addresses, as a record or a feed event's view carries them. */
type Addressed = Pick<Port, "networkId" | "networkTenant" | "tenant" | "id" | "ip" | "ip6">;

function addressesOf(p: Addressed): string[] {
  return p.ip6 === undefined ? [p.ip] : [p.ip, p.ip6];
}

/**
 * The records of the ports of network `networkId` that the index names for `address`, up to date
 * with every commit before the call (their holding is for the caller to check).
 */
export async function holdersOf(
  ctx: Ctx,
  networkId: string,
  address: string,
): Promise<PortRecord[]> {
  const index = await upToDate(ctx, networkId);
  const ids = index.holders(address);
  const got = await ctx.store.getMany<PortRecord>(ids.map((id) => keys.port(networkId, id)));
  return got.flatMap((e) => (e.value ? [e.value] : []));
}

/** How many networks are indexed and addresses held (tests and benchmarks). */
export function indexedSize(ctx: Ctx): { networks: number; addresses: number } {
  const all = perFeed.get(ctx.feed);
  let addresses = 0;
  for (const n of all?.networks.values() ?? []) addresses += n.size;
  return { networks: all?.networks.size ?? 0, addresses };
}

/** The network's index, caught up with the feed (or made), in turn with other queries. */
async function upToDate(ctx: Ctx, networkId: string): Promise<NetworkHolders> {
  const all = indexes(ctx);
  const mine = all.turn.then(() => catchUp(ctx, all, networkId));
  all.turn = mine.catch(() => {});
  return await mine;
}

function indexes(ctx: Ctx): Indexes {
  let all = perFeed.get(ctx.feed);
  if (all === undefined) {
    all = { cursor: ctx.feed.cursor(), networks: new Map(), turn: Promise.resolve() };
    perFeed.set(ctx.feed, all);
  }
  return all;
}

async function catchUp(ctx: Ctx, all: Indexes, networkId: string): Promise<NetworkHolders> {
  // With no index to bring up to date, the feed is not asked (on etcd a marker commit).
  const page = all.networks.size === 0 ? "expired" : await ctx.feed.since(all.cursor, 0);
  if (page === "expired") {
    // Events were missed: every index is made again when next asked.
    all.networks.clear();
    all.cursor = ctx.feed.cursor();
  } else {
    for (const e of page.events) apply(all, e);
    all.cursor = page.cursor;
  }
  let index = all.networks.get(networkId);
  if (index === undefined) {
    index = await made(ctx, networkId);
    all.networks.set(networkId, index);
  }
  index.usedAt = clockMs(ctx);
  bound(all, index, index.usedAt);
  return index;
}

/**
 * A network's index from its ports as read now. The cursor the indexes are at is at or before
 * this read: the events after it that the read already shows are applied again, to the same end.
 */
async function made(ctx: Ctx, networkId: string): Promise<NetworkHolders> {
  const index = new NetworkHolders();
  for await (const e of ctx.store.list<PortRecord>(keys.ports(networkId))) {
    if (e.value) put(index, e.value);
  }
  return index;
}

function put(index: NetworkHolders, p: Addressed): void {
  const id = keyId(p.networkTenant, p.tenant, p.id);
  for (const a of addressesOf(p)) index.add(a, id);
}

function apply(all: Indexes, e: FeedEvent): void {
  if (e.type !== "port") return;
  const index = all.networks.get(e.port.networkId);
  if (index === undefined) return;
  if (e.op === "put") return put(index, e.port);
  const id = keyId(e.port.networkTenant, e.port.tenant, e.port.id);
  for (const a of addressesOf(e.port)) index.remove(a, id);
}

/** Drops the indexes unused for a while, then the least recently used beyond the bound. */
function bound(all: Indexes, keep: NetworkHolders, now: number): void {
  const { idleMs, maxAddresses } = HOLDER_LIMITS;
  const byUse = [...all.networks].sort(([, a], [, b]) => a.usedAt - b.usedAt);
  let total = byUse.reduce((n, [, index]) => n + index.size, 0);
  for (const [id, index] of byUse) {
    if (index === keep) continue;
    if (now - index.usedAt < idleMs && total <= maxAddresses) continue;
    all.networks.delete(id);
    total -= index.size;
  }
  // A network bigger than the bound alone serves this query and goes at the next of another.
  if (total > maxAddresses) keep.usedAt = -Infinity;
}
