/**
 * Networks of a tenant, made, read, changed and deleted: their addresses, their segment, their
 * usage. The rest of the concept is one file each: network_fields.ts (a request's fields checked
 * and turned into the record), network_segments.ts (VNI, VLAN ID or untagged segment),
 * network_overlap.ts (subnets that must not overlap), network_lookup.ts (the network a request
 * names) and network_leftovers.ts (what a delete leaves for after its commit).
 */
import { claimsOfNetwork } from "./claims.ts";
import type { Usage } from "@knitter/common";
import { NETWORK_IMMUTABLE_FIELDS } from "@knitter/common";
import { formatCidr, parseCidr, parseIp } from "@knitter/common/address";
import type { z } from "zod";
import { checkNetworkReach, type NetworkRef as ReachRef, type Principal } from "../auth.ts";
import { ApiError, notFound } from "../errors.ts";
import { keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { NetworkCreateBody, NetworkUpdate } from "../schemas.ts";
import type { Tx } from "../store/tx.ts";
import { clockMs, type Ctx, listValues, now, retry } from "./context.ts";
import { listClusters } from "./clusters.ts";
import { checkDelegate } from "./network_delegate.ts";
import { networkFields, refuseFlowsOnly } from "./network_fields.ts";
import { dropLeftovers } from "./network_leftovers.ts";
import {
  forgetNetwork,
  type NetworkName,
  publicNetworks,
  resolveNetwork,
} from "./network_lookup.ts";
import { checkOverlap } from "./network_overlap.ts";
import {
  checkSegmentChoice,
  claimSegment,
  releaseSegment,
  segmentDelta,
  segmentLock,
} from "./network_segments.ts";
import {
  checkAdvertiseAllowed,
  checkAdvertiseOn,
  checkNetworkAdvertiseChange,
  ownAdvertise,
} from "./advertise.ts";
import {
  checkNodeReach,
  checkNodeReachAllowed,
  checkNodeReachOverlap,
  networkChecks,
  storedNodeReach,
} from "./node_reach.ts";
import { carriedChange, portView } from "./ports/mod.ts";
import { countQuarantine } from "./quarantine.ts";
import { emptyCount } from "./quarantine_count.ts";
import { QuotaCharges } from "./quotas.ts";
import { groupRefs } from "./security_group_refs.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";

export interface NetworkView extends
  Omit<
    NetworkRecord,
    "poolSize" | "reserved" | "reservedRanges" | "egress" | "hostAccess" | "advertise"
  > {
  usage: Usage;
  egress: boolean;
  hostAccess: boolean;
  advertise: boolean;
}

/** A network request on a tenant's path: who asks, the path's tenant, the network's name. */
export type NetworkRequest = Omit<NetworkName, "fresh">;

export async function createNetwork(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; body: NetworkCreateBody },
): Promise<NetworkView> {
  const { principal, tenant, body } = req;
  // A public network's addresses are refused to every other tenant's networks: the admin's call,
  // never a cluster monitor's.
  if (body.public && principal.scope !== "admin") {
    throw new ApiError("forbidden", "Only an admin token may create a public network", "public");
  }
  checkMonitorReach(principal, { tenant, name: body.name, type: body.type, physnet: body.physnet });
  checkSegmentChoice(principal, body);
  checkDelegate(principal, body);
  const spec = networkFields(body, ctx.settings.underlayMtu);
  checkNodeReach(spec.record, body);
  checkNodeReachAllowed(principal, body);
  checkAdvertiseAllowed(principal, body);
  await getTenantEntry(ctx, tenant);
  await groupRefs(ctx, { tenant, names: body.securityGroups, field: "securityGroups" });
  const id = crypto.randomUUID();

  const build = async (tx: Tx): Promise<NetworkRecord> => {
    const tenantEntry = await getTenantEntry(ctx, tenant);
    for (
      const g of await groupRefs(ctx, {
        tenant,
        names: body.securityGroups,
        field: "securityGroups",
      })
    ) {
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

    const segmentId = await claimSegment(ctx, tx, { principal, tenant, body });
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
    await checkOverlap(ctx, { tenant, public: body.public, subnets: spec.record });
    if (body.advertise === true) await checkAdvertiseOn(ctx, { id, ...spec.record });
    await checkNodeReachOverlap(
      ctx,
      {
        id,
        tenant,
        name: body.name,
        cidr: spec.record.cidr,
        cidr6: spec.record.cidr6,
        type: body.type,
        physnet: body.physnet,
      },
      { want: body, clusters: await listClusters(ctx) },
    );

    return await segmentLock(ctx, body.type, body.physnet)(() => retry(ctx, build));
  });
  if (record.segmentId !== undefined) {
    ctx.metrics.allocations.inc({ kind: record.type === "vxlan" ? "vni" : "vlan" });
  }
  return view(record, record.poolSize - record.reserved, 0);
}

/**
 * A cluster's monitor makes, changes and deletes networks only within its cluster's reach (the
 * physnets its nodes are attached to; authorize() kept it to its cluster's tenants already).
 */
function checkMonitorReach(principal: Principal, net: ReachRef): void {
  if (principal.scope === "monitor") checkNetworkReach(principal, net);
}

export async function getNetwork(ctx: Ctx, req: NetworkRequest): Promise<NetworkView> {
  const net = await resolveNetwork(ctx, { ...req, fresh: true });
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

export async function deleteNetwork(ctx: Ctx, req: NetworkRequest): Promise<void> {
  const { principal, tenant, network: name } = req;
  if (principal.scope === "tenant" && principal.tenant !== tenant) {
    throw notFound(`Network "${name}" does not exist in tenant "${tenant}"`);
  }
  const first = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
  if (!first.value) {
    return await missingInTenant(ctx, tenant, `Network "${name}"`);
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
  const claims = (await claimsOfNetwork(ctx, net.id, 5)).map((c) => `"${c}"`);
  const services: string[] = [];
  for await (const e of ctx.store.list(keys.servicesOfNetwork(net.id), { limit: 5 })) {
    services.push(`"${e.key.slice(-2).join("/")}"`);
  }
  const holders = [
    ports.length ? `ports ${ports.join(", ")}` : "",
    groups.length ? `IP groups ${groups.join(", ")}` : "",
    claims.length ? `claims ${claims.join(", ")}` : "",
    services.length ? `the VIPs of services ${services.join(", ")}` : "",
  ].filter(Boolean).join(" and ");
  return new ApiError(
    "in_use",
    `Cannot delete network "${net.name}": ${used} address(es) are in use (${holders}); release them first`,
  );
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
  const { egress, hostAccess, advertise, ...fields } = rest;
  return {
    ...fields,
    egress: egress === true,
    hostAccess: hostAccess === true,
    advertise: advertise === true,
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
  req: NetworkRequest & { body: z.infer<typeof NetworkUpdate> },
): Promise<NetworkView> {
  const { principal, tenant, network: name, body } = req;
  let republish = false;
  // Turning egress, hostAccess or advertise on checks every network: one at a time, as creations
  // are.
  const serial = body.hostAccess === true || body.egress === true || body.advertise === true
    ? <T>(fn: () => Promise<T>) => networkChecks(ctx).run(fn)
    : <T>(fn: () => Promise<T>) => fn();
  const record = await serial(() =>
    retry(ctx, async (tx) => {
      for (
        const g of await groupRefs(ctx, {
          tenant,
          names: body.securityGroups,
          field: "securityGroups",
        })
      ) {
        tx.check(g);
      }
      const e = await ctx.store.get<NetworkRecord>(keys.network(tenant, name));
      if (!e.value) {
        return await missingInTenant(ctx, tenant, `Network "${name}"`);
      }
      const net = e.value;
      checkMonitorReach(principal, net);
      refuseImmutable(net, body);
      refuseFlowsOnly(net.dataPlane, body);
      // The create-time checks of routes and DNS, on the network as it would become.
      const spec = networkFields({
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
      checkAdvertiseAllowed(principal, body, net);
      checkNetworkAdvertiseChange(net, body);
      const turnsOn = (f: "egress" | "hostAccess" | "advertise") =>
        body[f] === true && net[f] !== true;
      if (turnsOn("advertise")) await checkAdvertiseOn(ctx, net);
      if (turnsOn("hostAccess") || turnsOn("egress") || turnsOn("advertise")) {
        await checkNodeReachOverlap(ctx, net, {
          want: {
            egress: body.egress ?? net.egress,
            hostAccess: body.hostAccess ?? net.hostAccess,
            advertise: body.advertise ?? net.advertise,
          },
          clusters: await listClusters(ctx),
        });
      }
      storedNodeReach(updated, body);
      ownAdvertise(updated, body);
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

export async function republishPorts(ctx: Ctx, net: NetworkRecord): Promise<void> {
  for (const p of await listValues<PortRecord>(ctx.store, keys.ports(net.id))) {
    ctx.feed.publish({ type: "port", op: "put", port: portView(net, p) });
  }
}
