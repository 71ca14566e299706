/**
 * Per-tenant quotas, set by an admin: how many networks, ports, addresses, VLAN IDs and VNIs a
 * tenant may hold. A tenant with a quota has one record, ["quota", tenant], holding the limits and
 * what the tenant uses; every commit that changes that use (a port, a group, a network) reads the
 * record, refuses what would exceed a limit (403 quota_exceeded), and writes the new use with a
 * version check, in the same commit as the change itself. So the counts are exact on any store and
 * across replicas, and a tenant without a quota pays one absent-key check per commit.
 *
 * Setting a first quota counts what the tenant holds in two commits: the record is written with
 * `used: null` ("counting"), which stops every counted commit of the tenant (they checked the
 * record absent, or find it counting), then anyone (the admin's request, or a commit that finds it
 * counting) counts the frozen state and writes it. A manager that dies in between leaves nothing
 * stuck: the next counted request of the tenant finishes the count.
 */
import { ApiError } from "../errors.ts";
import { type IpGroupRecord, keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { Entry, Store } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import { type Ctx, now } from "./context.ts";
import { getTenantEntry } from "./tenants.ts";

export const QUOTA_KINDS = [
  "networks",
  "ports",
  "addresses",
  "vlanIds",
  "vnis",
  "floatingIps",
] as const;
export type QuotaKind = typeof QUOTA_KINDS[number];
export type QuotaUsage = Record<QuotaKind, number>;
export type Limits = Partial<Record<QuotaKind, number>>;

export interface QuotaRecord {
  limits: Limits;
  /** null while the tenant's use is being counted (see above). */
  used: QuotaUsage | null;
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

export const ZERO: QuotaUsage = {
  networks: 0,
  ports: 0,
  addresses: 0,
  vlanIds: 0,
  vnis: 0,
  floatingIps: 0,
};

/** One tenant's quota in a transaction: the record it used and what the transaction charged. */
interface Charged {
  entry: Entry<QuotaRecord>;
  /** Read from the cache (ResolveCache.quotas), not the store. */
  cached: boolean;
  /** What this transaction adds to the record's use (negative: gives back). */
  delta: QuotaUsage;
}

/**
 * The quota charges of one transaction. `charge` before making a change (it throws when a limit
 * would be exceeded, having changed nothing), `refund` to undo a charge whose change failed, and
 * `flush` before committing.
 *
 * The record comes from the cache of the last one read or committed in this process, so that a
 * tenant's commits do not each read it first: the commit checks its version as ever (a stale one
 * fails the commit, drops the cache entry, and the retry reads the store), and a refusal is only
 * ever decided on the record as the store holds it.
 */
export class QuotaCharges {
  private readonly records = new Map<string, Charged>();

  constructor(private readonly ctx: Ctx, private readonly tx: Tx) {}

  async charge(tenant: string, delta: Partial<QuotaUsage>): Promise<void> {
    let r = await this.load(tenant);
    let over = exceeded(r, delta);
    if (over !== undefined && r.cached) {
      r = await this.reread(r);
      over = exceeded(r, delta);
    }
    if (over !== undefined) {
      const used = r.entry.value!.used![over] + r.delta[over];
      throw new ApiError(
        "quota_exceeded",
        `Quota "${over}" of tenant "${tenant}" exceeded: it may hold ${
          r.entry.value!.limits[over]
        } ${WHAT[over]}, holds ${used}, and this request needs ${
          delta[over]
        } more; release some, or ask an admin to raise it`,
        over,
      );
    }
    for (const k of QUOTA_KINDS) r.delta[k] += delta[k] ?? 0;
  }

  async refund(tenant: string, delta: Partial<QuotaUsage>): Promise<void> {
    const r = await this.load(tenant);
    for (const k of QUOTA_KINDS) r.delta[k] -= delta[k] ?? 0;
  }

  /** Writes the new use of every tenant with a quota that this tx charged. */
  flush(): void {
    for (const [tenant, { entry, delta }] of this.records) {
      if (!entry.value?.used || QUOTA_KINDS.every((k) => delta[k] === 0)) continue;
      const used = { ...entry.value.used };
      for (const k of QUOTA_KINDS) used[k] += delta[k];
      const value: QuotaRecord = { ...entry.value, used };
      this.tx.set(entry.key, value);
      this.tx.onCommit((version) =>
        this.ctx.cache.quotas.set(tenant, { ...entry, value, version })
      );
    }
  }

  private async load(tenant: string): Promise<Charged> {
    let r = this.records.get(tenant);
    if (r) return r;
    const known = this.ctx.cache.quotas.get(tenant) as Entry<QuotaRecord> | undefined;
    const entry = known ?? await this.read(tenant);
    // The commit goes in only if the quota is as read: absent stays absent, counts stay exact.
    this.tx.check(entry);
    // A commit that fails may have failed on this record: the next one reads it.
    this.tx.onAbort(() => this.ctx.cache.quotas.delete(tenant));
    r = { entry, cached: known !== undefined, delta: { ...ZERO } };
    this.records.set(tenant, r);
    return r;
  }

  /** The record as the store holds it now, in place of a remembered one (its check too). */
  private async reread(r: Charged): Promise<Charged> {
    const tenant = r.entry.key.at(-1) as string;
    const entry = await this.read(tenant);
    this.tx.recheck(entry);
    const fresh = { ...r, entry, cached: false };
    this.records.set(tenant, fresh);
    return fresh;
  }

  /** Reads the record, finishing a count in progress first, and remembers it. */
  private async read(tenant: string): Promise<Entry<QuotaRecord>> {
    let entry = await this.ctx.store.get<QuotaRecord>(keys.quota(tenant));
    if (entry.value && entry.value.used === null) {
      await finishCounting(this.ctx.store, tenant);
      entry = await this.ctx.store.get<QuotaRecord>(keys.quota(tenant));
    }
    // A record counted before a kind existed holds none of it yet.
    if (entry.value?.used) {
      entry = { ...entry, value: { ...entry.value, used: { ...ZERO, ...entry.value.used } } };
    }
    if (entry.value?.used !== null) this.ctx.cache.quotas.set(tenant, entry);
    return entry;
  }
}

/** The first kind of quota `delta` would take beyond its limit, on top of what the tx charged. */
function exceeded(r: Charged, delta: Partial<QuotaUsage>): QuotaKind | undefined {
  const q = r.entry.value;
  if (!q?.used) return undefined; // no quota: nothing counted
  return QUOTA_KINDS.find((k) => {
    const d = delta[k] ?? 0;
    const limit = q.limits[k];
    return d > 0 && limit !== undefined && q.used![k] + r.delta[k] + d > limit;
  });
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
    if (!e.value || e.value.used !== null) return;
    const used = await countUsage(store, tenant);
    const tx = new Tx().check(e).set(e.key, { ...e.value, used });
    if (await tx.commit(store)) return;
  }
  throw new ApiError("store_conflict", `Counting what tenant "${tenant}" holds kept failing`);
}

export interface QuotaView {
  tenant: string;
  limits: Limits;
  used: QuotaUsage;
}

/** A tenant's limits and use (counted on the fly when it has no quota). */
export async function getQuota(ctx: Ctx, tenant: string): Promise<QuotaView> {
  await getTenantEntry(ctx, tenant);
  let e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
  if (e.value?.used === null) {
    await finishCounting(ctx.store, tenant);
    e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
  }
  if (!e.value?.used) return { tenant, limits: {}, used: await countUsage(ctx.store, tenant) };
  return { tenant, limits: e.value.limits, used: { ...ZERO, ...e.value.used } };
}

/** Sets a tenant's limits (an absent kind is unlimited); a first quota starts the count. */
export async function setQuota(ctx: Ctx, tenant: string, limits: Limits): Promise<QuotaView> {
  for (let attempt = 0; attempt < 16; attempt++) {
    await getTenantEntry(ctx, tenant);
    const e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
    const record: QuotaRecord = { limits, used: e.value?.used ?? null, updatedAt: now() };
    ctx.cache.quotas.delete(tenant);
    if (await new Tx().check(e).set(e.key, record).commit(ctx.store)) {
      if (record.used === null) await finishCounting(ctx.store, tenant);
      return await getQuota(ctx, tenant);
    }
  }
  throw new ApiError("store_conflict", `The quota of tenant "${tenant}" kept changing; try again`);
}

/** Drops a tenant's quota: nothing is limited or counted any more. 404 when it had none. */
export async function deleteQuota(ctx: Ctx, tenant: string): Promise<void> {
  await getTenantEntry(ctx, tenant);
  const e = await ctx.store.get<QuotaRecord>(keys.quota(tenant));
  if (!e.value) throw new ApiError("not_found", `Tenant "${tenant}" has no quota`);
  ctx.cache.quotas.delete(tenant);
  await ctx.store.commit([], [{ type: "delete", key: e.key }]);
}
