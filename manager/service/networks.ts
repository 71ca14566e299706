/** Networks of a tenant: their addresses, their segment (VNI or VLAN ID), their usage. */
import { countQuarantine } from "./quarantine.ts";
import { emptyCount } from "./quarantine_count.ts";
import { dropLeftovers } from "./network_leftovers.ts";
import type { Usage } from "@knitter/common";
import type { z } from "zod";
import { checkNetworkReach, type NetworkRef as ReachRef, type Principal } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import { formatCidr, parseCidr, parseIp } from "@knitter/common/address";
import { NETWORK_IMMUTABLE_FIELDS } from "@knitter/common";
import { keys, type NetworkRecord, type PhysnetRecord } from "../model.ts";
import type { NetworkCreateBody, NetworkUpdate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx, listValues, now, retry } from "./context.ts";
import { networkSpec, refuseFlowsOnly } from "./network_spec.ts";
import { overlappingSubnets } from "./dual_stack.ts";
import { getPhysnetEntry, vlanIndexRanges } from "./physnets.ts";
import { getTenantEntry } from "./tenants.ts";
import { listClusters } from "./clusters.ts";
import { groupRefs } from "./security_group_refs.ts";
import {
  checkNodeReach,
  checkNodeReachAllowed,
  checkNodeReachOverlap,
  networkChecks,
  storedNodeReach,
} from "./node_reach.ts";
import { carriedChange, portView } from "./port_records.ts";
import type { PortRecord } from "../model.ts";
import { QuotaCharges, type QuotaUsage } from "./quotas.ts";

export interface NetworkView
  extends
    Omit<NetworkRecord, "poolSize" | "reserved" | "reservedRanges" | "egress" | "hostAccess"> {
  usage: Usage;
  egress: boolean;
  hostAccess: boolean;
}

export async function createNetwork(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  body: NetworkCreateBody,
): Promise<NetworkView> {
  // A public network's addresses are refused to every other tenant's networks: the admin's call,
  // never a cluster monitor's.
  if (body.public && principal.scope !== "admin") {
    throw new ApiError("forbidden", "Only an admin token may create a public network", "public");
  }
  checkMonitorReach(principal, { tenant, name: body.name, type: body.type, physnet: body.physnet });
  checkSegmentChoice(principal, body);
  const spec = networkSpec(body, ctx.settings.underlayMtu);
  checkNodeReach(spec.record, body);
  checkNodeReachAllowed(principal, body);
  await getTenantEntry(ctx, tenant);
  await groupRefs(ctx, tenant, body.securityGroups, "securityGroups");
  const id = crypto.randomUUID();

  const build = async (tx: Tx): Promise<NetworkRecord> => {
    const tenantEntry = await getTenantEntry(ctx, tenant);
    for (const g of await groupRefs(ctx, tenant, body.securityGroups, "securityGroups")) {
      tx.check(g);
    }
    const key = keys.network(tenant, body.name);
    const existing = await ctx.store.get(key);
    if (existing.value) {
      throw new ApiError(
        "already_exists",
        `Network "${body.name}" already exists in tenant "${tenant}"`,
        "name",
      );
    }
    tx.check(existing);
    if (body.public) {
      const pub = await ctx.store.get<{ tenant: string }>(keys.publicNetwork(body.name));
      if (pub.value) {
        throw new ApiError(
          "already_exists",
          `A public network named "${body.name}" already exists (tenant "${pub.value.tenant}"); public names are unique`,
          "name",
        );
      }
      tx.check(pub).set(pub.key, { tenant });
    }
    const t = tenantEntry.value!;
    tx.check(tenantEntry).set(tenantEntry.key, { ...t, networks: t.networks + 1 });
    const charges = new QuotaCharges(ctx, tx);
    await charges.charge(tenant, segmentDelta(body.type, 1));

    const segmentId = await claimSegment(ctx, tx, principal, tenant, body);
    charges.flush();
    // The gateway and the excludes are kept as ranges in the record: the bitmap is not touched.
    const record: NetworkRecord = { id, tenant, ...spec.record, segmentId, createdAt: now() };
    if (body.securityGroups?.length) record.securityGroups = body.securityGroups;
    storedNodeReach(record, body);
    tx.set(key, record);
    tx.set(keys.quarantineCount(id), emptyCount(ctx.settings.quarantineMs));
    return record;
  };

  // Creations run one at a time in this process, so that two overlapping networks cannot both pass
  // the overlap check.
  const record = await networkChecks(ctx).run(async () => {
    await checkOverlap(ctx, tenant, body.public, spec.record);
    await checkNodeReachOverlap(
      ctx,
      {
        id,
        tenant,
        name: body.name,
        cidr: spec.record.cidr,
        type: body.type,
        physnet: body.physnet,
      },
      body,
      await listClusters(ctx),
    );
    return await segmentLock(ctx, body.type, body.physnet)(() => retry(ctx, build));
  });
  if (record.segmentId !== undefined) {
    ctx.metrics.allocations.inc({ kind: record.type === "vxlan" ? "vni" : "vlan" });
  }
  return view(record, record.poolSize - record.reserved, 0);
}

/** What a network counts against its tenant's quota: itself, and its VNI or VLAN ID. */
function segmentDelta(type: string, sign: 1 | -1, hasSegment = true): Partial<QuotaUsage> {
  return {
    networks: sign,
    vnis: type === "vxlan" && hasSegment ? sign : 0,
    vlanIds: type === "vlan" && hasSegment ? sign : 0,
  };
}

/**
 * A cluster's monitor makes, changes and deletes networks only within its cluster's reach (the
 * physnets its nodes are attached to; authorize() kept it to its cluster's tenants already).
 */
function checkMonitorReach(principal: Principal, net: ReachRef): void {
  if (principal.scope === "monitor") checkNetworkReach(principal, net);
}

/**
 * A flat network (a physnet's one untagged segment) and a segment ID the caller picks are shared
 * by every tenant: the first to take one keeps it from all others. So they are the admin's, or a
 * cluster monitor's as the admin's delegate (within its reach, checked in claimSegment); a tenant
 * gets one allocated from the ranges handed to tenants (403 otherwise, naming the field).
 */
function checkSegmentChoice(principal: Principal, body: NetworkCreateBody): void {
  if (principal.scope !== "tenant") return;
  if (body.type === "flat") {
    throw new ApiError(
      "forbidden",
      `type: a flat network takes physnet "${body.physnet}"'s one untagged segment, which every tenant on the physnet shares, so only an admin makes one; ask the admin, or use type vlan (a VLAN ID is allocated) or vxlan`,
      "type",
    );
  }
  if (body.segmentId !== undefined) {
    const what = body.type === "vlan" ? `a VLAN ID on physnet "${body.physnet}"` : "a VNI";
    throw new ApiError(
      "forbidden",
      `segmentId: choosing ${what} is the admin's (the IDs are shared by every tenant); leave segmentId out and one is allocated from the ranges handed to tenants, or ask the admin`,
      "segmentId",
    );
  }
}

/** Allocates or takes the network's VNI / VLAN ID, or claims a physnet's untagged segment. */
async function claimSegment(
  ctx: Ctx,
  tx: Tx,
  principal: Principal,
  tenant: string,
  body: NetworkCreateBody,
): Promise<number | undefined> {
  const owner = { tenant, name: body.name };
  if (body.type === "flat") {
    const p = await getPhysnetEntryField(ctx, body.physnet!);
    const rec = p.value!;
    if (rec.flatNetwork) {
      const mine = principal.scope === "admin" || rec.flatNetwork.startsWith(`${tenant}/`);
      throw new ApiError(
        "already_exists",
        `Physnet "${rec.name}" already carries ${
          mine ? `the flat network ${rec.flatNetwork}` : "a flat network of another tenant"
        }; it has one untagged segment`,
        "physnet",
      );
    }
    tx.check(p).set(p.key, {
      ...rec,
      networks: rec.networks + 1,
      flatNetwork: `${tenant}/${body.name}`,
    });
    return undefined;
  }
  let allowed: [number, number][];
  let pool;
  let what: string;
  let physnet = "";
  if (body.type === "vxlan") {
    pool = ctx.pools.vni();
    allowed = ctx.settings.vniRanges.map(([s, e]) => [s, e + 1]);
    what = "VNI";
  } else {
    const p = await getPhysnetEntryField(ctx, body.physnet!);
    const rec = p.value!;
    tx.check(p).set(p.key, { ...rec, networks: rec.networks + 1 });
    pool = ctx.pools.vlan(rec.name);
    allowed = vlanIndexRanges(rec);
    what = `VLAN ID on physnet "${rec.name}"`;
    physnet = rec.name;
  }
  const edit = await pool.edit(tx);
  let id: number;
  if (body.segmentId !== undefined) {
    id = body.segmentId;
    const inRanges = allowed.some(([s, e]) => id >= s && id < e);
    if (!inRanges && principal.scope !== "admin") {
      throw new ApiError(
        "forbidden",
        `${what} ${id} is outside the ranges handed to tenants; only an admin may pick it`,
        "segmentId",
      );
    }
    if (!(await edit.take(id))) {
      const holder = await ctx.store.get<{ tenant: string; name: string }>(
        keys.segmentOwner(body.type, physnet, id),
      );
      // Another tenant's network is not named to a tenant.
      const by = !holder.value
        ? ""
        : principal.scope === "admin" || holder.value.tenant === tenant
        ? ` by network "${holder.value.name}" of tenant "${holder.value.tenant}"`
        : " by another tenant";
      ctx.metrics.allocationFailures.inc({ reason: "taken" });
      throw new ApiError("address_taken", `${what} ${id} is already used${by}`, "segmentId");
    }
  } else {
    const found = await edit.allocate(allowed);
    if (found === null) {
      ctx.metrics.allocationFailures.inc({ reason: "exhausted" });
      throw new ApiError(
        "pool_exhausted",
        `Cannot allocate a ${what}: every ID of its ranges is in use`,
        "segmentId",
      );
    }
    id = found;
  }
  edit.flush();
  tx.set(keys.segmentOwner(body.type, physnet, id), owner);
  return id;
}

async function getPhysnetEntryField(ctx: Ctx, name: string): Promise<Entry<PhysnetRecord>> {
  try {
    return await getPhysnetEntry(ctx, name);
  } catch (err) {
    if (err instanceof ApiError && err.code === "not_found") {
      throw invalid("physnet", `physnet "${name}" does not exist; an admin creates it first`);
    }
    throw err;
  }
}

/** Serialises the users of one segment pool in this process. */
function segmentLock(ctx: Ctx, type: string, physnet?: string) {
  return <T>(fn: () => Promise<T>): Promise<T> => {
    if (type === "vxlan") return ctx.pools.vni().exclusive(fn);
    if (type === "vlan") return ctx.pools.vlan(physnet!).exclusive(fn);
    return fn();
  };
}

/**
 * A tenant's networks must not overlap each other or the public networks its pods may also attach
 * to; a public network must not overlap any network.
 */
async function checkOverlap(
  ctx: Ctx,
  tenant: string,
  isPublic: boolean,
  subnets: Pick<NetworkRecord, "cidr" | "cidr6">,
) {
  const candidates = isPublic ? await listValues<NetworkRecord>(ctx.store, keys.networks()) : [
    ...await listValues<NetworkRecord>(ctx.store, keys.networks(tenant)),
    ...(await publicNetworks(ctx)).filter((n) => n.tenant !== tenant),
  ];
  for (const n of candidates) {
    const hit = overlappingSubnets(subnets, n);
    if (hit) {
      throw invalid(
        hit.mine === subnets.cidr ? "cidr" : "cidr6",
        `${hit.mine} overlaps network "${n.name}" (${hit.theirs}) of tenant "${n.tenant}"${
          n.public ? ", a public network" : ""
        }`,
      );
    }
  }
}

async function publicNetworks(ctx: Ctx): Promise<NetworkRecord[]> {
  const out: NetworkRecord[] = [];
  for await (const e of ctx.store.list<{ tenant: string }>(keys.publicNetworks())) {
    const name = e.key[e.key.length - 1] as string;
    const n = await ctx.store.get<NetworkRecord>(keys.network(e.value!.tenant, name));
    if (n.value) out.push(n.value);
  }
  return out;
}

/** A network record with the version it was read at: port commits check it, so a network
 * deleted (or re-created) under an allocation makes the allocation retry instead of orphaning. */
export interface NetworkRef {
  net: NetworkRecord;
  version: string;
}

async function lookup(
  ctx: Ctx,
  tenant: string,
  name: string,
  fresh: boolean,
): Promise<NetworkRef | null> {
  const id = `${tenant}/${name}`;
  const { networks } = ctx.cache;
  if (!fresh) {
    const hit = networks.get(id);
    if (hit) return hit;
  }
  const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
  if (!e.value) {
    networks.delete(id);
    return null;
  }
  const ref = { net: e.value, version: e.version! };
  networks.set(id, ref);
  return ref;
}

async function publicOwner(ctx: Ctx, name: string, fresh: boolean): Promise<string | null> {
  const { publics } = ctx.cache;
  if (!fresh && publics.has(name)) return publics.get(name)!;
  const e = await ctx.store.get<{ tenant: string }>(keys.publicNetwork(name));
  if (e.value) publics.set(name, e.value.tenant);
  else publics.delete(name);
  return e.value?.tenant ?? null;
}

async function tenantExists(ctx: Ctx, tenant: string, fresh: boolean): Promise<void> {
  const { tenants } = ctx.cache;
  if (!fresh && tenants.has(tenant)) return;
  await getTenantEntry(ctx, tenant);
  tenants.add(tenant);
}

/**
 * The network a request names: the path tenant's own, else a public network of that name. A tenant
 * token reaching into another tenant's path finds only public networks; private ones are 404, so
 * their existence does not leak. `fresh` bypasses the caches (after a lost race).
 */
export async function resolveNetworkRef(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
  fresh = false,
): Promise<NetworkRef> {
  const ref = await resolveForTenant(ctx, principal, tenant, name, fresh);
  checkNetworkReach(principal, ref.net);
  return ref;
}

async function resolveForTenant(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
  fresh: boolean,
): Promise<NetworkRef> {
  if (principal.scope === "tenant" && principal.tenant !== tenant) {
    const ref = await lookup(ctx, tenant, name, fresh);
    if (ref?.net.public) return ref;
    throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
  }
  const own = await lookup(ctx, tenant, name, fresh);
  if (own) return own;
  const owner = await publicOwner(ctx, name, fresh);
  // The path's tenant must exist even when the network is another's: it owns the ports made here.
  await tenantExists(ctx, tenant, fresh);
  if (owner !== null) {
    const ref = await lookup(ctx, owner, name, fresh);
    if (ref) return ref;
  }
  throw notFound(
    `Network "${name}" does not exist in tenant "${tenant}" nor among the public networks`,
  );
}

export async function resolveNetwork(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
  fresh = false,
): Promise<NetworkRecord> {
  return (await resolveNetworkRef(ctx, principal, tenant, name, fresh)).net;
}

/** Drops what this process remembers of a network (after deleting it, or losing a race). */
export function forgetNetwork(ctx: Ctx, net: NetworkRecord): void {
  const c = ctx.cache;
  c.networks.delete(`${net.tenant}/${net.name}`);
  if (net.public) c.publics.delete(net.name);
  ctx.pools.forgetNetwork(net);
}

export async function getNetwork(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
): Promise<NetworkView> {
  const net = await resolveNetwork(ctx, principal, tenant, name, true);
  return await withUsage(ctx, net);
}

/** The tenant's own networks and the public networks its pods may attach to. */
export async function listNetworks(
  ctx: Ctx,
  _principal: Principal,
  tenant: string,
): Promise<NetworkView[]> {
  await getTenantEntry(ctx, tenant);
  const own = await listValues<NetworkRecord>(ctx.store, keys.networks(tenant));
  const pub = (await publicNetworks(ctx)).filter((n) => n.tenant !== tenant);
  return await Promise.all([...own, ...pub].map((n) => withUsage(ctx, n)));
}

export async function deleteNetwork(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
): Promise<void> {
  if (principal.scope === "tenant" && principal.tenant !== tenant) {
    throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
  }
  const first = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
  if (!first.value) {
    await getTenantEntry(ctx, tenant);
    throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
  }
  const net = first.value;
  checkMonitorReach(principal, net);
  const addresses = ctx.pools.addresses(net);
  await addresses.exclusive(() =>
    segmentLock(ctx, net.type, net.physnet)(() =>
      retry(ctx, async (tx) => {
        const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
        if (!e.value || e.value.id !== net.id) {
          throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
        }
        const router = await ctx.store.get<{ name: string }>(keys.routerOfNetwork(net.id));
        if (router.value) {
          throw new ApiError(
            "in_use",
            `Cannot delete network "${name}": router "${router.value.name}" connects it; take it off the router first`,
          );
        }
        tx.check(router);
        const edit = await addresses.edit(tx);
        // Addresses in quarantine go with the network: their records after its commit, with the
        // pool's chunks beyond the first 500 (network_leftovers.ts).
        const used = edit.used - (await countQuarantine(ctx.store, net)).records;
        if (used > 0) throw await inUse(ctx, net, used);
        tx.check(e).delete(e.key).delete(keys.quarantineCount(net.id));
        edit.destroy();
        const t = await getTenantEntry(ctx, tenant);
        tx.check(t).set(t.key, { ...t.value!, networks: t.value!.networks - 1 });
        if (net.public) tx.delete(keys.publicNetwork(name));
        await releaseSegment(ctx, tx, net);
        const charges = new QuotaCharges(ctx, tx);
        await charges.charge(tenant, segmentDelta(net.type, -1, net.segmentId !== undefined));
        charges.flush();
      })
    )
  );
  forgetNetwork(ctx, net);
  await dropLeftovers(ctx.store, net.id);
}

async function inUse(ctx: Ctx, net: NetworkRecord, used: number): Promise<ApiError> {
  const ports = (await listValues<{ id: string }>(ctx.store, keys.ports(net.id), 5)).map((p) =>
    `"${p.id}"`
  );
  const groups: string[] = [];
  for await (const e of ctx.store.list(keys.ipGroupsOfNetwork(net.id), { limit: 5 })) {
    groups.push(`"${e.key.slice(-2).join("/")}"`);
  }
  const holders = [
    ports.length ? `ports ${ports.join(", ")}` : "",
    groups.length ? `IP groups ${groups.join(", ")}` : "",
  ].filter(Boolean).join(" and ");
  return new ApiError(
    "in_use",
    `Cannot delete network "${net.name}": ${used} address(es) are in use (${holders}); release them first`,
  );
}

async function releaseSegment(ctx: Ctx, tx: Tx, net: NetworkRecord): Promise<void> {
  if (net.type !== "vxlan") {
    const p = await ctx.store.get<PhysnetRecord>(keys.physnet(net.physnet!));
    if (p.value) {
      const rec = { ...p.value, networks: p.value.networks - 1 };
      if (net.type === "flat") delete rec.flatNetwork;
      tx.check(p).set(p.key, rec);
    }
  }
  if (net.segmentId === undefined) return;
  const pool = net.type === "vxlan" ? ctx.pools.vni() : ctx.pools.vlan(net.physnet!);
  const edit = await pool.edit(tx);
  await edit.release(net.segmentId);
  edit.flush();
  tx.delete(keys.segmentOwner(net.type, net.physnet ?? "", net.segmentId));
  tx.onCommit(() => ctx.metrics.releases.inc({ kind: net.type === "vxlan" ? "vni" : "vlan" }));
}

/**
 * The network with its usage: `used` counts the addresses ports and IP groups hold, `free` those
 * that can be handed out now (also those whose quarantine has ended: the next allocations end
 * their records); the rest (total - used - free) are in quarantine.
 */
export async function withUsage(ctx: Ctx, net: NetworkRecord): Promise<NetworkView> {
  const head = await ctx.pools.addresses(net).readHead();
  const set = head?.used ?? 0;
  const q = set > 0 ? await countQuarantine(ctx.store, net, clockMs(ctx)) : { records: 0, held: 0 };
  return view(net, net.poolSize - net.reserved, set - q.records, q.held);
}

function view(net: NetworkRecord, total: number, used: number, quarantined = 0): NetworkView {
  const { poolSize: _p, reserved: _r, reservedRanges: _rr, ...rest } = net;
  const { egress, hostAccess, ...fields } = rest;
  return {
    ...fields,
    egress: egress === true,
    hostAccess: hostAccess === true,
    usage: { total, used, free: total - used - quarantined },
  };
}

const IMMUTABLE = NETWORK_IMMUTABLE_FIELDS;

/**
 * Changes what ports can live with (description, MTU, routes, DNS). Immutable fields may come
 * along with their current values; a different value is refused, naming the field and its value.
 */
export async function updateNetwork(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  name: string,
  body: z.infer<typeof NetworkUpdate>,
): Promise<NetworkView> {
  let republish = false;
  // Turning egress or hostAccess on checks every network: one at a time, as creations are.
  const serial = body.hostAccess === true || body.egress === true
    ? <T>(fn: () => Promise<T>) => networkChecks(ctx).run(fn)
    : <T>(fn: () => Promise<T>) => fn();
  const record = await serial(() =>
    retry(ctx, async (tx) => {
      for (const g of await groupRefs(ctx, tenant, body.securityGroups, "securityGroups")) {
        tx.check(g);
      }
      const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
      if (!e.value) {
        await getTenantEntry(ctx, tenant);
        throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
      }
      const net = e.value;
      checkMonitorReach(principal, net);
      refuseImmutable(net, body);
      refuseFlowsOnly(net.dataPlane, body);
      // The create-time checks of routes and DNS, on the network as it would become.
      const spec = networkSpec({
        name: net.name,
        type: net.type,
        cidr: net.cidr,
        gateway: net.gateway,
        cidr6: net.cidr6,
        gateway6: net.gateway6,
        allocationPools: net.allocationPools,
        excludes: net.excludes,
        public: net.public,
        physnet: net.physnet,
        mtu: body.mtu ?? net.mtu,
        routes: body.routes ?? net.routes,
        dns: body.dns ?? net.dns,
      }, ctx.settings.underlayMtu);
      const updated: NetworkRecord = {
        ...net,
        mtu: spec.record.mtu,
        routes: spec.record.routes,
        dns: spec.record.dns,
      };
      if (body.description !== undefined) updated.description = body.description;
      if (body.bandwidth === null) delete updated.bandwidth;
      else if (body.bandwidth !== undefined) updated.bandwidth = body.bandwidth;
      if (body.securityGroups === null || body.securityGroups?.length === 0) {
        delete updated.securityGroups;
      } else if (body.securityGroups !== undefined) updated.securityGroups = body.securityGroups;
      if (body.dscp === null) delete updated.dscp;
      else if (body.dscp !== undefined) updated.dscp = body.dscp;
      if (body.deleting === true) updated.deletingSince = net.deletingSince ?? now();
      if (body.deleting === false) delete updated.deletingSince;
      checkNodeReach(net, body);
      checkNodeReachAllowed(principal, body, net);
      if (
        (body.hostAccess === true && net.hostAccess !== true) ||
        (body.egress === true && net.egress !== true)
      ) {
        await checkNodeReachOverlap(ctx, net, {
          egress: body.egress ?? net.egress,
          hostAccess: body.hostAccess ?? net.hostAccess,
        }, await listClusters(ctx));
      }
      storedNodeReach(updated, body);
      republish = carriedChange(net, updated);
      tx.check(e).set(e.key, updated);
      return updated;
    })
  );
  ctx.cache.networks.delete(`${tenant}/${name}`);
  // Its ports carry the network's default groups, DSCP and node settings: agents hear of a
  // change through them.
  if (republish) await republishPorts(ctx, record);
  return await withUsage(ctx, record);
}

function refuseImmutable(net: NetworkRecord, body: z.infer<typeof NetworkUpdate>): void {
  for (const field of IMMUTABLE) {
    const want = body[field];
    if (want === undefined) continue;
    const have = net[field];
    if (sameValue(field, want, have)) continue;
    throw new ApiError(
      "invalid_request",
      `${field}: network "${net.name}" keeps the ${field} it was created with (${
        JSON.stringify(have ?? null)
      }), it cannot become ${
        JSON.stringify(want)
      }; create a new network and move the pods to change it`,
      field,
    );
  }
}

function sameValue(field: string, want: unknown, have: unknown): boolean {
  if ((field === "cidr" || field === "cidr6") && typeof have === "string") {
    const a = parseCidr(want as string);
    const b = parseCidr(have as string);
    return !("error" in a) && !("error" in b) && formatCidr(a) === formatCidr(b);
  }
  if (
    (field === "gateway" || field === "gateway6") && typeof want === "string" &&
    typeof have === "string"
  ) {
    return parseIp(want)?.value === parseIp(have)?.value;
  }
  return JSON.stringify(want) === JSON.stringify(have);
}

async function republishPorts(ctx: Ctx, net: NetworkRecord): Promise<void> {
  for (const p of await listValues<PortRecord>(ctx.store, keys.ports(net.id))) {
    ctx.feed.publish({ type: "port", op: "put", port: portView(net, p) });
  }
}
