/**
 * Per-tenant quotas, set by an admin: how many networks, ports, addresses, VLAN IDs and VNIs a
 * tenant may hold. A tenant with a quota has a record, ["quota", tenant], holding the limits, and
 * its use in shares (quota_shares.ts): one per lane, a network's ID for that network's ports and
 * "" for everything else, each with the room it may take. Every commit that changes the use (a
 * port, a group, a network) checks the record, refuses what would exceed a limit (403
 * quota_exceeded), and writes its lane's share with a version check, in the same commit as the
 * change itself. So the counts are exact on any store and across replicas, commits of different
 * networks write no common key, and a tenant without a quota pays one absent-key check per commit.
 *
 * Setting a first quota counts what the tenant holds in two commits: the record is written without
 * shares ("counting"), which stops every counted commit of the tenant (they checked the record
 * absent, or find it counting), then anyone (the admin's request, or a commit that finds it
 * counting) counts the frozen state and writes it. A manager that dies in between leaves nothing
 * stuck: the next counted request of the tenant finishes the count. A record of an older manager
 * (its use in the record) is counted again the same way.
 */
import { ApiError } from "../errors.ts";
import { type IpGroupRecord, keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { Entry, Store } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { type Ctx, now } from "./context.ts";
import { getTenantEntry } from "./tenants.ts";
import { type Limits, QUOTA_KINDS, type QuotaKind, type QuotaUsage, ZERO } from "./quota_kinds.ts";
import {
  beyondAllowance,
  collectSpare,
  gather,
  type QuotaShare,
  readShares,
  roomToFirst,
  sumUsed,
  type Taken,
} from "./quota_shares.ts";

export { type Limits, QUOTA_KINDS, type QuotaKind, type QuotaUsage, ZERO };

export interface QuotaRecord {
  limits: Limits;
  /** The use, in records of older managers only (counted again): see `shares`. */
  used: QuotaUsage | null;
  /** The use is counted, in the tenant's shares; absent: being counted. */
  shares?: true;
  updatedAt: string;
}

const WHAT: Record<QuotaKind, string> = {
  networks: "networks",
  ports: "ports",
  addresses: "addresses (ports' and IP groups')",
  vlanIds: "VLAN IDs",
  vnis: "VNIs",
  floatingIps: "floating addresses",
};

/** Whether the record's use is counted (in shares); otherwise a count is due. */
function counted(q: QuotaRecord | null): boolean {
  return q?.shares === true;
}

/** A rebalance's rewrite of the tenant's shares (see quota_shares.ts). */
interface Rebalance {
  /** The charged lane's new allowance. */
  own: Limits;
  /** The shares room was taken from, with their new allowances. */
  others: Taken[];
}

/** One tenant's quota in a transaction: the records it used and what the transaction charged. */
interface Charged {
  tenant: string;
  quota: Entry<QuotaRecord>;
  /** The lane's share, for a counted tenant. */
  share?: Entry<QuotaShare>;
  /** The share was read from the cache (ResolveCache.quotaShares), not the store. */
  cached: boolean;
  /** What this transaction adds to the share's use (negative: gives back). */
  delta: QuotaUsage;
  rebalance?: Rebalance;
}

/**
 * The quota charges of one transaction, on one lane (a network's ID; "" by default). `charge`
 * before making a change (it throws when a limit would be exceeded, having changed nothing),
 * `refund` to undo a charge whose change failed, and `flush` before committing.
 *
 * The record and the share come from the cache of the last ones read or committed in this process,
 * so that a tenant's commits do not each read them first: the commit checks their versions as ever
 * (a stale one fails the commit, drops the cache entries, and the retry reads the store), and a
 * refusal is only ever decided on the records as the store holds them.
 */
export class QuotaCharges {
  private readonly records = new Map<string, Charged>();

  constructor(private readonly ctx: Ctx, private readonly tx: Tx, private readonly lane = "") {}

  async charge(tenant: string, delta: Partial<QuotaUsage>): Promise<void> {
    let r = await this.load(tenant);
    if (r.share && this.beyond(r, delta) !== undefined) {
      if (r.cached) r = await this.reread(r);
      if (r.share && this.beyond(r, delta) !== undefined) r = await this.rebalance(r, delta);
    }
    for (const k of QUOTA_KINDS) r.delta[k] += delta[k] ?? 0;
  }

  async refund(tenant: string, delta: Partial<QuotaUsage>): Promise<void> {
    const r = await this.load(tenant);
    for (const k of QUOTA_KINDS) r.delta[k] -= delta[k] ?? 0;
  }

  /** Writes the shares of every tenant with a quota that this tx charged (or rebalanced). */
  flush(): void {
    for (const r of this.records.values()) {
      if (!r.share) continue;
      const b = r.rebalance;
      for (const o of b?.others ?? []) {
        if (o.drop) this.drop(o.entry);
        else this.write(o.entry, { ...o.entry.value!, allowance: o.allowance });
      }
      if (!b && QUOTA_KINDS.every((k) => r.delta[k] === 0)) continue;
      const was = r.share.value ?? { allowance: {}, used: ZERO };
      const used = { ...ZERO };
      for (const k of QUOTA_KINDS) used[k] = (was.used[k] ?? 0) + r.delta[k];
      this.write(r.share, { allowance: b?.own ?? was.allowance, used });
    }
  }

  private drop(e: Entry<QuotaShare>): void {
    this.tx.delete(e.key);
    this.tx.onCommit(() => this.ctx.cache.quotaShares.delete(shareId(e.key)));
  }

  private write(e: Entry<QuotaShare>, value: QuotaShare): void {
    this.tx.set(e.key, value);
    this.tx.onCommit((version) =>
      this.ctx.cache.quotaShares.set(shareId(e.key), { key: e.key, value, version })
    );
  }

  /** The first kind `delta` takes beyond the lane's room (after a rebalance: its new room). */
  private beyond(r: Charged, delta: Partial<QuotaUsage>): QuotaKind | undefined {
    const share = r.share!.value;
    const room = r.rebalance ? { used: share?.used ?? ZERO, allowance: r.rebalance.own } : share;
    return beyondAllowance(r.quota.value!.limits, { room, pending: r.delta }, delta);
  }

  private async load(tenant: string): Promise<Charged> {
    let r = this.records.get(tenant);
    if (r) return r;
    const known = this.ctx.cache.quotas.get(tenant) as Entry<QuotaRecord> | undefined;
    const quota = known ?? await this.read(tenant);
    // The commit goes in only if the quota is as read: absent stays absent, limits stay.
    this.tx.check(quota);
    // A commit that fails may have failed on this record or share: the next one reads them.
    this.tx.onAbort(() => this.ctx.cache.quotas.delete(tenant));
    r = { tenant, quota, cached: false, delta: { ...ZERO } };
    if (quota.value) {
      const key = keys.quotaShare(tenant, this.lane);
      const cache = this.ctx.cache.quotaShares;
      const mine = cache.get(shareId(key)) as Entry<QuotaShare> | undefined;
      r.share = mine ?? await this.ctx.store.get<QuotaShare>(key);
      r.cached = mine !== undefined;
      cache.set(shareId(key), r.share);
      this.tx.check(r.share);
      this.tx.onAbort(() => cache.delete(shareId(key)));
    }
    this.records.set(tenant, r);
    return r;
  }

  /** The lane's share as the store holds it now, in place of a remembered one (its check too). */
  private async reread(r: Charged): Promise<Charged> {
    const share = await this.ctx.store.get<QuotaShare>(r.share!.key);
    this.tx.recheck(share);
    const fresh = { ...r, share, cached: false };
    this.records.set(r.tenant, fresh);
    return fresh;
  }

  /**
   * The lane lacks room: on the record and every share as the store holds them, refuses when the
   * tenant's whole use would pass a limit, else takes the room from the shares with the most to
   * spare (flush writes them). The commit checks each.
   */
  private async rebalance(r: Charged, delta: Partial<QuotaUsage>): Promise<Charged> {
    for (let attempt = 0; attempt < 4; attempt++) {
      const quota = await this.read(r.tenant);
      this.tx.recheck(quota);
      if (!quota.value) {
        // The quota is gone meanwhile: nothing is limited.
        const free = { ...r, quota, share: undefined, rebalance: undefined };
        this.records.set(r.tenant, free);
        return free;
      }
      const { limits } = quota.value;
      const shares = await readShares(this.ctx.store, r.tenant);
      const ownId = shareId(r.share!.key);
      const own = shares.find((e) => shareId(e.key) === ownId) ??
        { key: r.share!.key, value: null, version: null };
      const pending = { ...r.delta };
      for (const k of QUOTA_KINDS) pending[k] += delta[k] ?? 0;
      refuseOverLimit(r.tenant, quota.value, sumUsed(shares.map((e) => e.value)), pending, delta);
      const need: Partial<QuotaUsage> = {};
      for (const k of QUOTA_KINDS) {
        need[k] = (own.value?.used[k] ?? 0) + pending[k] - (own.value?.allowance[k] ?? 0);
      }
      const got = gather(limits, shares.filter((e) => shareId(e.key) !== ownId), need);
      if (!got) {
        // The room is spread thinner than one commit may take it from: gather it first.
        await collectSpare(this.ctx.store, r.tenant, limits);
        continue;
      }
      const allowance = { ...own.value?.allowance };
      for (const k of QUOTA_KINDS) {
        if (got.taken[k] !== undefined) allowance[k] = (allowance[k] ?? 0) + got.taken[k]!;
      }
      for (const e of [own, ...got.from.map((t) => t.entry)]) this.tx.recheck(e);
      const next = {
        ...r,
        quota,
        share: own,
        cached: false,
        rebalance: { own: allowance, others: got.from },
      };
      this.records.set(r.tenant, next);
      return next;
    }
    throw new ApiError(
      "store_conflict",
      `The quota of tenant "${r.tenant}" kept changing under this request; try again`,
    );
  }

  /** Reads the record, finishing a count in progress first, and remembers it. */
  private async read(tenant: string): Promise<Entry<QuotaRecord>> {
    let entry = await this.ctx.store.get<QuotaRecord>(keys.quota(tenant));
    if (entry.value && !counted(entry.value)) {
      await finishCounting(this.ctx.store, tenant);
      entry = await this.ctx.store.get<QuotaRecord>(keys.quota(tenant));
    }
    if (!entry.value || counted(entry.value)) this.ctx.cache.quotas.set(tenant, entry);
    return entry;
  }
}

/** "tenant/lane" of a share's key, for the cache. */
function shareId(key: Entry<unknown>["key"]): string {
  return `${key.at(-2)}/${key.at(-1)}`;
}

/**
 * 403 naming the first kind whose limit the tenant's use (`used`, as the store holds it) would
 * pass with `pending`, this commit's charges (of other requests in the same commit, and `delta`).
 */
function refuseOverLimit(
  tenant: string,
  q: QuotaRecord,
  used: QuotaUsage,
  pending: QuotaUsage,
  delta: Partial<QuotaUsage>,
): void {
  const over = QUOTA_KINDS.find((k) => {
    const limit = q.limits[k];
    return (delta[k] ?? 0) > 0 && limit !== undefined && used[k] + pending[k] > limit;
  });
  if (over === undefined) return;
  throw new ApiError(
    "quota_exceeded",
    `Quota "${over}" of tenant "${tenant}" exceeded: it may hold ${q.limits[over]} ${
      WHAT[over]
    }, holds ${used[over]}${
      pending[over] > delta[over]! ? ` (${pending[over] - delta[over]!} more being allocated)` : ""
    }, and this request needs ${delta[over]} more; release some, or ask an admin to raise it`,
    over,
  );
}

/** Counts what a tenant holds, from its networks, ports and IP groups. */
export async function countUsage(store: Store, tenant: string): Promise<QuotaUsage> {
  const used = { ...ZERO };
  const mine = (p: PortRecord | null) => {
    if (!p || p.tenant !== tenant) return;
    used.ports++;
    // An IP group's or a claim's address is counted with the group or the claim.
    if (p.ipGroup === undefined && p.claim === undefined) used.addresses++;
  };
  for await (const e of store.list<NetworkRecord>(keys.networks(tenant))) {
    const n = e.value!;
    used.networks++;
    if (n.segmentId !== undefined && n.type === "vxlan") used.vnis++;
    if (n.segmentId !== undefined && n.type === "vlan") used.vlanIds++;
    for await (const p of store.list<PortRecord>(keys.ports(n.id))) mine(p.value);
  }
  const foreign: Entry<unknown>["key"][] = [];
  for await (const e of store.list(keys.portsOfForeignNetworks(tenant))) {
    foreign.push(keys.port(e.key.at(-2) as string, e.key.at(-1) as string));
  }
  for (let i = 0; i < foreign.length; i += 100) {
    for (const e of await store.getMany<PortRecord>(foreign.slice(i, i + 100))) mine(e.value);
  }
  for await (const e of store.list<IpGroupRecord>(keys.ipGroups(tenant))) {
    used.addresses += e.value!.addresses.length;
  }
  for await (const _ of store.list(keys.claims(tenant))) used.addresses++;
  for await (const _ of store.list(keys.floatingIpsOfTenant(tenant))) used.floatingIps++;
  return used;
}

/** Completes a count started by setting a first quota (idempotent; any process may do it). */
export async function finishCounting(store: Store, tenant: string): Promise<void> {
  for (let attempt = 0; attempt < 16; attempt++) {
    const e = await store.get<QuotaRecord>(keys.quota(tenant));
    if (!e.value || counted(e.value)) return;
    const used = await countUsage(store, tenant);
    // Shares left from before (a quota dropped, a release racing it): the count covers them.
    const left = await readShares(store, tenant);
    const tx = new Tx().check(e);
    for (const s of left) tx.check(s).delete(s.key);
    const all = keys.quotaShare(tenant, "");
    const share: QuotaShare = { allowance: roomToFirst(e.value.limits, [used])[0], used };
    tx.set(all, share).set(e.key, countedRecord(e.value.limits, e.value.updatedAt));
    if (await tx.commit(store)) return;
  }
  throw new ApiError("store_conflict", `Counting what tenant "${tenant}" holds kept failing`);
}

function countedRecord(limits: Limits, updatedAt: string): QuotaRecord {
  return { limits, used: null, shares: true, updatedAt };
}

/** The record, with a count in progress finished first. */
async function readCounted(store: Store, tenant: string): Promise<Entry<QuotaRecord>> {
  let e = await store.get<QuotaRecord>(keys.quota(tenant));
  if (e.value && !counted(e.value)) {
    await finishCounting(store, tenant);
    e = await store.get<QuotaRecord>(keys.quota(tenant));
  }
  return e;
}

export interface QuotaView {
  tenant: string;
  limits: Limits;
  used: QuotaUsage;
}

/** A tenant's limits and use (counted on the fly when it has no quota). */
export async function getQuota(ctx: Ctx, tenant: string): Promise<QuotaView> {
  await getTenantEntry(ctx, tenant);
  const e = await readCounted(ctx.store, tenant);
  if (!e.value) return { tenant, limits: {}, used: await countUsage(ctx.store, tenant) };
  const shares = await readShares(ctx.store, tenant);
  return { tenant, limits: e.value.limits, used: sumUsed(shares.map((s) => s.value)) };
}

/**
 * Sets a tenant's limits (an absent kind is unlimited): a first quota starts the count; new limits
 * of a counted tenant give the room left to its "" share (the others keep none), in the record's
 * commit.
 */
export async function setQuota(ctx: Ctx, tenant: string, limits: Limits): Promise<QuotaView> {
  for (let attempt = 0; attempt < 16; attempt++) {
    await getTenantEntry(ctx, tenant);
    const e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
    forgetQuota(ctx, tenant);
    const tx = new Tx().check(e);
    if (counted(e.value)) {
      // The "" share first: it takes the room left.
      const shares = (await readShares(ctx.store, tenant)).sort((a, b) =>
        a.key.at(-1) === "" ? -1 : b.key.at(-1) === "" ? 1 : 0
      );
      if (shares[0]?.key.at(-1) !== "") {
        const none: QuotaShare = { allowance: {}, used: { ...ZERO } };
        shares.unshift({ key: keys.quotaShare(tenant, ""), value: none, version: null });
      }
      const room = roomToFirst(limits, shares.map((s) => s.value!.used));
      shares.forEach((s, i) => tx.check(s).set(s.key, { ...s.value!, allowance: room[i] }));
      tx.set(e.key, countedRecord(limits, now()));
    } else {
      tx.set(e.key, { limits, used: null, updatedAt: now() } satisfies QuotaRecord);
    }
    if (await tx.commit(ctx.store)) {
      await finishCounting(ctx.store, tenant);
      return await getQuota(ctx, tenant);
    }
  }
  throw new ApiError("store_conflict", `The quota of tenant "${tenant}" kept changing; try again`);
}

/** Drops a tenant's quota and its shares: nothing is limited or counted any more. 404 when it had none. */
export async function deleteQuota(ctx: Ctx, tenant: string): Promise<void> {
  await getTenantEntry(ctx, tenant);
  const e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
  if (!e.value) throw new ApiError("not_found", `Tenant "${tenant}" has no quota`);
  forgetQuota(ctx, tenant);
  const shares = await readShares(ctx.store, tenant);
  await ctx.store.commit([], [e, ...shares].map((s) => ({ type: "delete", key: s.key })));
}

/** Drops what this process remembers of a tenant's quota and shares. */
function forgetQuota(ctx: Ctx, tenant: string): void {
  ctx.cache.quotas.delete(tenant);
  for (const id of ctx.cache.quotaShares.keys()) {
    if (id.startsWith(`${tenant}/`)) ctx.cache.quotaShares.delete(id);
  }
}
