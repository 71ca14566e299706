/**
 * Claims: an address (and its IPv6 pair, and MAC) of a network that belongs to a tenant's named
 * claim, not to a pod. It is taken from the pool when the claim is made and held until the claim is
 * deleted, which releases it through quarantine like a port's release; every port bound to the
 * claim gets it (ports/claimed.ts), on any node, and leaves it held when it goes. This is what a
 * VM's persistent address across restarts and live migrations needs (KubeVirt's IPAMClaim).
 *
 * Charged to the tenant's quota as one address; its ports count as ports only. A claim with a port
 * bound is not deleted (409 naming the ports): its pods go first.
 */
import type { z } from "zod";
import type { Claim } from "@knitter/common";
import type { Principal } from "../auth.ts";
import { ApiError } from "../errors.ts";
import { formatIp } from "@knitter/common/address";
import { type ClaimRecord, keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { ClaimCreate } from "../schemas.ts";
import type { Entry } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { pairedIp6 } from "./dual_stack.ts";
import { forgetNetwork, type NetworkRef, resolveNetworkRef } from "./network_lookup.ts";
import { poolExhausted, quarantine, quarantining, sweepQuarantine } from "./quarantine.ts";
import { QuotaCharges } from "./quotas.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";
import { keyId } from "./ports/mod.ts";
import { macFor } from "../ipam/derived_mac.ts";

/** A claim a request names: who asks, the path's tenant and network, the claim's name. */
export interface ClaimName {
  principal: Principal;
  tenant: string;
  network: string;
  name: string;
}

/** A claim as answered: its address with prefix, and its ports with their node and state. */
export type ClaimView = Claim;

/** Makes a claim and takes its address (the pool's next free one) in one commit. */
export async function createClaim(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; network: string; body: z.infer<typeof ClaimCreate> },
): Promise<ClaimView> {
  const { tenant, body } = req;
  let ref = await resolveNetworkRef(ctx, { ...req, fresh: true });
  let fresh = false;
  for (;;) {
    const pool = ctx.pools.addresses(ref.net);
    try {
      const claim = await pool.exclusive(() =>
        retry(ctx, async (tx, attempt) => {
          if (attempt > 0) ref = await sameNetwork(ctx, req, ref);
          return await takeForClaim(ctx, tx, { ref, tenant, name: body.name, fresh });
        })
      );
      ctx.metrics.allocations.inc({ kind: "ip" });
      return await claimView(ctx, claim);
    } catch (err) {
      if (!(err instanceof CachedFull)) throw err;
      // The cached pool said "full": make sure with fresh reads before refusing.
      pool.invalidate();
      fresh = true;
    }
  }
}

/** Thrown (so that nothing is committed) when the cached pool has no free address. */
class CachedFull extends Error {
  constructor() {
    super("the cached pool is full");
  }
}

/** The network again after a lost race: the same one, or a 503 to try again (made anew). */
async function sameNetwork(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; network: string },
  ref: NetworkRef,
): Promise<NetworkRef> {
  const now = await resolveNetworkRef(ctx, { ...req, fresh: true });
  if (now.net.id === ref.net.id) return now;
  forgetNetwork(ctx, ref.net);
  throw new ApiError(
    "store_conflict",
    `Network "${ref.net.name}" was deleted and made again while the claim was being made; try again`,
    "network",
  );
}

/** The claim's commit: its record and index, its address, the tenant's quota. */
async function takeForClaim(
  ctx: Ctx,
  tx: Tx,
  opts: { ref: NetworkRef; tenant: string; name: string; fresh: boolean },
): Promise<ClaimRecord> {
  const { ref, tenant, name } = opts;
  const net = ref.net;
  if (net.deletingSince !== undefined) {
    throw new ApiError(
      "network_deleting",
      `Network "${net.name}" of tenant "${net.tenant}" is being deleted (since ${net.deletingSince}): it takes no new claims`,
    );
  }
  // Written back as it is: a tenant's delete, which lists its claims, then conflicts with this.
  const t = await getTenantEntry(ctx, tenant);
  tx.check(t).set(t.key, t.value!);
  const ce = await ctx.store.get<ClaimRecord>(keys.claim(tenant, net.id, name));
  if (ce.value) {
    throw new ApiError(
      "already_exists",
      `Claim "${name}" already exists in tenant "${tenant}" on network "${net.name}"`,
      "name",
    );
  }
  tx.checkAbsent(ce.key);
  tx.check({ key: keys.network(net.tenant, net.name), version: ref.version });
  const charges = new QuotaCharges(ctx, tx);
  await charges.charge(tenant, { addresses: 1 });
  const pool = ctx.pools.addresses(net);
  const edit = await pool.edit(tx);
  await sweepQuarantine(ctx, tx, { edit, net });
  const index = await edit.allocate(ctx.pools.allowed(net));
  if (index === null) {
    if (!opts.fresh) throw new CachedFull();
    throw await poolExhausted(ctx, net, `Cannot make a claim on network "${net.name}"`);
  }
  edit.flush();
  charges.flush();
  const ip = formatIp({ family: net.family, value: ctx.pools.space(net).valueAt(index) });
  const claim: ClaimRecord = {
    name,
    tenant,
    network: net.name,
    networkTenant: net.tenant,
    networkId: net.id,
    ip,
    mac: macFor(net.id, index),
    index,
    ports: [],
    createdAt: now(),
  };
  const ip6 = pairedIp6(net, ip);
  if (ip6 !== undefined) claim.ip6 = ip6;
  tx.set(ce.key, claim).set(keys.claimOfNetwork(net.id, tenant, name), true);
  return claim;
}

export async function getClaim(ctx: Ctx, req: ClaimName): Promise<ClaimView> {
  const net = (await resolveNetworkRef(ctx, req)).net;
  const claim = (await ctx.store.get<ClaimRecord>(keys.claim(req.tenant, net.id, req.name))).value;
  if (!claim) return await missingInTenant(ctx, req.tenant, `Claim "${req.name}"`);
  return await claimView(ctx, claim);
}

/** A tenant's claims on one network, or on all of them. */
export async function listClaims(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; network?: string },
): Promise<ClaimView[]> {
  await getTenantEntry(ctx, req.tenant);
  const networkId = req.network === undefined
    ? undefined
    : (await resolveNetworkRef(ctx, { ...req, network: req.network })).net.id;
  const claims = await listValues<ClaimRecord>(ctx.store, keys.claims(req.tenant, networkId));
  return await Promise.all(claims.map((c) => claimView(ctx, c)));
}

/** Deletes a claim without ports: its address goes into quarantine (or back to the pool). */
export async function deleteClaim(ctx: Ctx, req: ClaimName): Promise<void> {
  const { tenant, name } = req;
  const net = (await resolveNetworkRef(ctx, { ...req, fresh: true })).net;
  const pool = ctx.pools.addresses(net);
  await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const ce = await ctx.store.get<ClaimRecord>(keys.claim(tenant, net.id, name));
      const claim = ce.value;
      if (!claim) return await missingInTenant(ctx, tenant, `Claim "${name}"`);
      if (claim.ports.length > 0) {
        throw new ApiError(
          "in_use",
          `Cannot delete claim "${name}": port(s) ${
            claim.ports.map((p) => `"${p}"`).join(", ")
          } are bound to it; delete them (their pods) first`,
        );
      }
      tx.check(ce).delete(ce.key).delete(keys.claimOfNetwork(net.id, tenant, name));
      if (quarantining(ctx)) {
        // The bit stays set until the quarantine ends (quarantine.ts).
        await quarantine(ctx, tx, {
          net,
          port: { ...claim, id: `claim:${name}` },
          fixedMac: false,
        });
      } else {
        const edit = await pool.edit(tx);
        await edit.release(claim.index);
        edit.flush();
      }
      const charges = new QuotaCharges(ctx, tx);
      await charges.charge(tenant, { addresses: -1 });
      charges.flush();
    })
  );
  ctx.metrics.releases.inc({ kind: "ip" });
}

/** The claim as answered, with its ports' nodes and which of them is active. */
export async function claimView(ctx: Ctx, c: ClaimRecord): Promise<ClaimView> {
  const entries = await ctx.store.getMany<PortRecord>(
    c.ports.map((id) => keys.port(c.networkId, keyId(c.networkTenant, c.tenant, id))),
  );
  const ports = c.ports.map((id, i) => {
    const p = entries[i].value;
    return {
      id,
      ...(p?.node ? { node: p.node } : {}),
      ...(p?.pod ? { pod: p.pod } : {}),
      active: p?.active !== false,
    };
  });
  const net = await networkOf(ctx, c);
  const view: ClaimView = {
    name: c.name,
    tenant: c.tenant,
    network: c.network,
    networkTenant: c.networkTenant,
    ip: c.ip,
    address: `${c.ip}/${prefixLength(net?.cidr, c.ip)}`,
    mac: c.mac,
    ports,
    createdAt: c.createdAt,
  };
  if (c.ip6 !== undefined) {
    view.ip6 = c.ip6;
    view.address6 = `${c.ip6}/${prefixLength(net?.cidr6, c.ip6)}`;
  }
  return view;
}

/** The claim's network, as long as it is the one the claim was made on. */
async function networkOf(ctx: Ctx, c: ClaimRecord): Promise<NetworkRecord | undefined> {
  const net = (await ctx.store.get<NetworkRecord>(keys.network(c.networkTenant, c.network))).value;
  return net?.id === c.networkId ? net : undefined;
}

/** The prefix length of `cidr`; without one, the address's whole length. */
function prefixLength(cidr: string | undefined, ip: string): string {
  return cidr?.split("/")[1] ?? (ip.includes(":") ? "128" : "32");
}

/** Names of claims a network still has ("tenant/name"), at most `limit`: what blocks its delete. */
export async function claimsOfNetwork(
  ctx: Ctx,
  networkId: string,
  limit: number,
): Promise<string[]> {
  const out: string[] = [];
  for await (const e of ctx.store.list(keys.claimsOfNetwork(networkId), { limit })) {
    out.push(e.key.slice(-2).join("/"));
  }
  return out;
}

/** A claim's record as stored, with its version (absent: no such claim), for commits that read it. */
export function claimEntry(
  ctx: Ctx,
  c: { tenant: string; networkId: string; name: string },
): Promise<Entry<ClaimRecord>> {
  return ctx.store.get<ClaimRecord>(keys.claim(c.tenant, c.networkId, c.name));
}
