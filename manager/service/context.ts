/** What every service function works with, and the optimistic retry loop they share. */
import { ApiError } from "../errors.ts";
import { BitmapPool } from "../ipam/bitmap_pool.ts";
import { IndexSpace } from "../ipam/index_space.ts";
import { complement, type IndexRange, rangesHold } from "../ipam/index_ranges.ts";
import { type Cidr, parseIp } from "@knitter/common/address";
import type { ChangeFeed } from "../feed.ts";
import type { Metrics } from "../metrics.ts";
import { keys, type NetworkRecord } from "../model.ts";
import type { Entry, Key, Store } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { LIST_PAGE, type ListTurns } from "../list_turns.ts";

export const VNI_SPACE = 1 << 24;
export const VLAN_SPACE = 4095;

export interface IpamSettings {
  /** VNIs handed to vxlan networks that do not name one, as inclusive [start, end] pairs. */
  vniRanges: [number, number][];
  /** MTU of networks that do not set one: the underlay's, less the VXLAN overhead for vxlan. */
  underlayMtu: number;
  /** How long a released address or MAC stays out of allocation (service/quarantine.ts); 0: none. */
  quarantineMs: number;
  /** How long the address history keeps an ended stint (service/history.ts); 0: no history. */
  historyMs: number;
  /** The ranges advertised networks' CIDRs must lie in (service/advertise.ts); none: refuse all. */
  advertisableRanges: Cidr[];
}

export interface Ctx {
  store: Store;
  settings: IpamSettings;
  metrics: Metrics;
  pools: PoolRegistry;
  cache: ResolveCache;
  feed: ChangeFeed;
  /** The time of quarantine and address history, in ms (tests inject one); absent: Date.now. */
  clock?: () => number;
  /**
   * How long lists take turns with other requests (list_turns.ts; the app sets it); absent: lists
   * read straight through.
   */
  listTurns?: ListTurns;
}

/**
 * What request resolution remembers between requests. Entries can go stale when another process
 * changes the store; commits check the versions they depend on, and a lost race reads afresh.
 */
export interface ResolveCache {
  /** "tenant/name" → the network record and the version it was read at. */
  networks: Map<string, { net: NetworkRecord; version: string }>;
  /** Public network name → owning tenant. */
  publics: Map<string, string>;
  /** Tenants seen to exist. */
  tenants: Set<string>;
  /**
   * Tenant → its quota record as last read or committed here (value null: none): every counted
   * commit checks the version it used (quotas.ts), so a stale one costs a retry, never a wrong count.
   */
  quotas: Map<string, Entry<unknown>>;
  /** "tenant/lane" → that share of a counted tenant's use (quota_shares.ts), as with quotas. */
  quotaShares: Map<string, Entry<unknown>>;
  /**
   * Cluster name → its record as last read (value null: none), for new ports' placement: every
   * port's commit checks the version it used (clusters.ts portCluster), as with quotas.
   */
  clusters: Map<string, Entry<unknown>>;
}

export function newResolveCache(): ResolveCache {
  return {
    networks: new Map(),
    publics: new Map(),
    tenants: new Set(),
    quotas: new Map(),
    quotaShares: new Map(),
    clusters: new Map(),
  };
}

const MAX_ATTEMPTS = 64;
/** Attempts that retry at once; later ones wait a random while, up to this cap (ms). */
const EAGER_ATTEMPTS = 2;
const MAX_BACKOFF_MS = 64;

/**
 * Runs `build` on fresh reads and commits the tx it fills, again and again while another writer
 * got in between. `build` may throw an ApiError to stop; nothing is written then.
 */
export async function retry<T>(
  ctx: Ctx,
  build: (tx: Tx, attempt: number) => Promise<T>,
): Promise<T> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const tx = new Tx();
    let result: T;
    try {
      result = await build(tx, attempt);
    } catch (err) {
      tx.abort();
      throw err;
    }
    if (await tx.commit(ctx.store)) return result;
    ctx.metrics.conflicts.inc();
    // Writers that keep colliding (replicas on one pool) spread out instead of retrying in step.
    if (attempt >= EAGER_ATTEMPTS) {
      const cap = Math.min(MAX_BACKOFF_MS, 2 ** (attempt - EAGER_ATTEMPTS + 1));
      await new Promise((r) => setTimeout(r, Math.random() * cap));
    }
  }
  throw new ApiError(
    "store_conflict",
    `The store kept changing under this request (${MAX_ATTEMPTS} attempts); try again`,
  );
}

/** One BitmapPool object per pool, so that their caches and locks are shared by all requests. */
export class PoolRegistry {
  private readonly pools = new Map<string, BitmapPool>();
  private readonly spaces = new Map<string, IndexSpace>();
  private readonly extras = new Map<string, unknown>();
  /** The address pools by network ID: the same objects as in `pools`, found without a key. */
  private readonly addressPools = new Map<string, BitmapPool>();

  constructor(private readonly store: Store) {}

  get(prefix: Key, size: number): BitmapPool {
    const id = JSON.stringify(prefix);
    let pool = this.pools.get(id);
    if (!pool || pool.size !== size) {
      pool?.invalidate();
      pool = new BitmapPool(this.store, prefix, size);
      this.pools.set(id, pool);
    }
    return pool;
  }

  forget(prefix: Key): void {
    const id = JSON.stringify(prefix);
    this.pools.get(id)?.invalidate();
    this.pools.delete(id);
    if (prefix[0] === keys.ipam("")[0]) this.addressPools.delete(String(prefix[1]));
  }

  /** Drops a deleted network's pool, index space and per-network helpers. */
  forgetNetwork(net: NetworkRecord): void {
    this.forget(keys.ipam(net.id));
    this.spaces.delete(net.id);
    for (const k of this.extras.keys()) if (k.startsWith(`${net.id}/`)) this.extras.delete(k);
  }

  /** A per-network helper object (e.g. the port batcher), made once and forgotten with the network. */
  perNetwork<T>(net: NetworkRecord, kind: string, make: () => T): T {
    const k = `${net.id}/${kind}`;
    let v = this.extras.get(k) as T | undefined;
    if (v === undefined) {
      v = make();
      this.extras.set(k, v);
    }
    return v;
  }

  addresses(net: NetworkRecord): BitmapPool {
    // Asked several times per allocation: by network ID, without encoding the pool's key.
    const known = this.addressPools.get(net.id);
    if (known?.size === net.poolSize) return known;
    const pool = this.get(keys.ipam(net.id), net.poolSize);
    this.addressPools.set(net.id, pool);
    return pool;
  }

  vni(): BitmapPool {
    return this.get(keys.vniPool(), VNI_SPACE);
  }

  vlan(physnet: string): BitmapPool {
    return this.get(keys.vlanPool(physnet), VLAN_SPACE);
  }

  /** The index ranges allocation may hand out: the pools less the gateway and the excludes. */
  allowed(net: NetworkRecord): IndexRange[] {
    return this.perNetwork(
      net,
      "allowed",
      () => complement(net.reservedRanges ?? [], net.poolSize),
    );
  }

  /** Why a pool index is never handed out (the gateway, an exclude), or null when it may be. */
  reservedWhy(net: NetworkRecord, index: number): string | null {
    if (!net.reservedRanges || !rangesHold(net.reservedRanges, index)) return null;
    const gw = net.gateway === undefined ? null : parseIp(net.gateway);
    if (gw && this.space(net).indexOf(gw.value) === index) return "the gateway";
    return "excluded from allocation";
  }

  /** The index space of a network's pools (cached; networks never change their pools). */
  space(net: NetworkRecord): IndexSpace {
    let space = this.spaces.get(net.id);
    if (!space) {
      space = new IndexSpace(net.allocationPools.map((p) => ({
        start: parseIp(p.start)!.value,
        end: parseIp(p.end)!.value,
      })));
      this.spaces.set(net.id, space);
    }
    return space;
  }
}

/** The manager's time in ms for quarantine and history: the injected clock, else Date.now. */
export function clockMs(ctx: Pick<Ctx, "clock">): number {
  return ctx.clock ? ctx.clock() : Date.now();
}

export function now(): string {
  return new Date().toISOString();
}

/** Collects up to `limit` values under a prefix. */
/**
 * The values under `prefix` for a list's answer: as listValues, read a page (LIST_PAGE) at a time,
 * taking turns with other lists and giving way to other requests between pages (ctx.listTurns).
 */
export async function listGivingWay<T>(ctx: Ctx, prefix: Key): Promise<T[]> {
  const out: T[] = [];
  const entries = ctx.store.list<T>(prefix, { page: LIST_PAGE })[Symbol.asyncIterator]();
  const readPage = async () => {
    for (let i = 0; i < LIST_PAGE; i++) {
      const next = await entries.next();
      if (next.done) return true;
      if (next.value.value !== null) out.push(next.value.value);
    }
    return false;
  };
  const turns = ctx.listTurns;
  try {
    while (!(turns ? await turns.page(readPage) : await readPage())) await turns?.giveWay();
  } finally {
    await entries.return?.();
  }
  return out;
}

export async function listValues<T>(store: Store, prefix: Key, limit?: number): Promise<T[]> {
  const out: T[] = [];
  for await (const e of store.list<T>(prefix, { limit })) {
    if (e.value !== null) out.push(e.value);
  }
  return out;
}
