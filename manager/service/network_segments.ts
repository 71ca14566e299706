/**
 * A network's segment: the VNI of a vxlan network, the VLAN ID of a vlan network on its physnet,
 * or a physnet's one untagged segment for a flat network. Who may choose one, claiming it in the
 * network's create commit, and giving it back in its delete commit.
 */
import type { Principal } from "../auth.ts";
import { ApiError, invalid } from "../errors.ts";
import { keys, type NetworkRecord, type PhysnetRecord } from "../model.ts";
import type { NetworkCreateBody } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import type { Ctx } from "./context.ts";
import { getPhysnetEntry, vlanIndexRanges } from "./physnets.ts";
import type { QuotaUsage } from "./quotas.ts";

/** What a network counts against its tenant's quota: itself, and its VNI or VLAN ID. */
export function segmentDelta(type: string, sign: 1 | -1, hasSegment = true): Partial<QuotaUsage> {
  return {
    networks: sign,
    vnis: type === "vxlan" && hasSegment ? sign : 0,
    vlanIds: type === "vlan" && hasSegment ? sign : 0,
  };
}

/**
 * A flat network (a physnet's one untagged segment) and a segment ID the caller picks are shared
 * by every tenant: the first to take one keeps it from all others. So they are the admin's, or a
 * cluster monitor's as the admin's delegate (within its reach, checked in claimSegment); a tenant
 * gets one allocated from the ranges handed to tenants (403 otherwise, naming the field).
 */
export function checkSegmentChoice(principal: Principal, body: NetworkCreateBody): void {
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
export async function claimSegment(
  ctx: Ctx,
  tx: Tx,
  claim: { principal: Principal; tenant: string; body: NetworkCreateBody },
): Promise<number | undefined> {
  const { principal, tenant, body } = claim;
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
export function segmentLock(ctx: Ctx, type: string, physnet?: string) {
  return <T>(fn: () => Promise<T>): Promise<T> => {
    if (type === "vxlan") return ctx.pools.vni().exclusive(fn);
    if (type === "vlan") return ctx.pools.vlan(physnet!).exclusive(fn);
    return fn();
  };
}

/** Gives back a deleted network's segment, and its physnet's count of networks. */
export async function releaseSegment(ctx: Ctx, tx: Tx, net: NetworkRecord): Promise<void> {
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
