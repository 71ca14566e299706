/**
 * Ports bound to a claim (../claims.ts): such a port gets the claim's address, IPv6 pair and MAC,
 * never new ones, and leaves them held by the claim when it goes.
 *
 * Live migration: a claim has at most two ports at once, on two nodes, and exactly one of them is
 * active (carries the claim's traffic; the other has `active: false`, which the feed tells every
 * agent). The first port is active; a second (the target) is made inactive; a third is refused.
 * Activating a port makes it active and the other inactive in one commit. When the active port is
 * deleted while the other exists (the source pod died), the other becomes active in that commit;
 * deleting the inactive one (a failed migration) leaves the active one as it is.
 */
import type { Port } from "@knitter/common";
import { ApiError, invalid } from "../../errors.ts";
import { type ClaimRecord, keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { Entry } from "../../store/store.ts";
import type { Tx } from "../../store/tx.ts";
import { type Ctx, listValues, retry } from "../context.ts";
import { stintStart } from "../history.ts";
import { resolveNetwork } from "../network_lookup.ts";
import { portToChange } from "./access.ts";
import type { QuotaCharges } from "../quotas.ts";
import {
  keyId,
  type PortBody,
  portRecord,
  type PortTarget,
  portView,
  type PutResult,
  storeNewPort,
} from "./records.ts";
import { floatingForNewPort } from "./floating.ts";

/** A live migration's source and target. */
export const MAX_CLAIM_PORTS = 2;

/** A port bound to a claim asks for nothing the claim gives (400 naming the field). */
export function checkClaimBody(body: PortBody): void {
  if (body.claim === undefined) return;
  for (const field of ["ip", "ipGroup", "mac"] as const) {
    if (body[field] === undefined) continue;
    throw invalid(
      field,
      `a port bound to claim "${body.claim}" gets the claim's address and MAC: the claim gives them, leave out ${field}`,
    );
  }
}

/** A new port's PUT inside a commit being built (allocation.ts PutStep has these). */
interface NewPortStep {
  tx: Tx;
  charges: QuotaCharges;
  net: NetworkRecord;
  owner: string;
  id: string;
  body: PortBody;
}

/** Adds a new port bound to `step.body.claim` to the commit: active if it is the claim's first. */
export async function claimNewPort(ctx: Ctx, step: NewPortStep): Promise<PutResult> {
  const { tx, net, owner, id, body } = step;
  const ce = await claimForPort(ctx, { tenant: owner, net, name: body.claim! });
  const claim = ce.value;
  const bound = await claimPorts(ctx, claim);
  refuseBinding(claim, bound.map((e) => e.value).filter((p) => p !== null), body);
  await step.charges.charge(owner, { ports: 1 });
  const port: PortRecord = {
    ...portRecord({
      net,
      owner,
      id,
      body,
      ip: claim.ip,
      index: claim.index,
      stintFrom: stintStart(ctx),
    }),
    mac: claim.mac,
    claim: claim.name,
  };
  if (claim.ip6 !== undefined) port.ip6 = claim.ip6;
  if (claim.ports.length > 0) port.active = false;
  tx.check(ce).set(ce.key, { ...claim, ports: [...claim.ports, id] });
  // A floating address bound to its ID follows it (floating_ips.ts).
  const stored = await floatingForNewPort(ctx, tx, { net, port });
  return { port: storeNewPort(tx, net, stored), created: true, changed: true };
}

/**
 * The claim a port of `tenant` on `net` names, read for the port's commit: 404 naming `claim` when
 * the tenant has none of that name (another tenant's is not found either), 400 when its claim of
 * that name is on another network.
 */
export async function claimForPort(
  ctx: Ctx,
  opts: { tenant: string; net: NetworkRecord; name: string },
): Promise<Entry<ClaimRecord> & { value: ClaimRecord }> {
  const { tenant, net, name } = opts;
  const e = await ctx.store.get<ClaimRecord>(keys.claim(tenant, net.id, name));
  if (e.value) return { ...e, value: e.value };
  for (const other of await listValues<ClaimRecord>(ctx.store, keys.claims(tenant))) {
    if (other.name !== name) continue;
    throw new ApiError(
      "invalid_request",
      `claim: claim "${name}" of tenant "${tenant}" is on network "${other.network}", not "${net.name}": a port gets a claim's address on the claim's network only`,
      "claim",
    );
  }
  throw new ApiError(
    "not_found",
    `Claim "${name}" does not exist in tenant "${tenant}" on network "${net.name}"; make it first (POST .../networks/${net.name}/claims)`,
    "claim",
  );
}

/** A third port, or a second on the node of the first, is a 409 naming the ports there are. */
function refuseBinding(claim: ClaimRecord, bound: PortRecord[], body: PortBody): void {
  const describe = (p: PortRecord) =>
    `"${p.id}" (${p.active === false ? "inactive" : "active"}${
      p.node ? `, node "${p.node}"` : ""
    })`;
  if (claim.ports.length >= MAX_CLAIM_PORTS) {
    throw new ApiError(
      "conflict",
      `Claim "${claim.name}" already has ${MAX_CLAIM_PORTS} ports: ${
        bound.map(describe).join(", ")
      }; a live migration is under way: delete one of them first`,
      "claim",
    );
  }
  const here = bound.find((p) => body.node !== undefined && p.node === body.node);
  if (here) {
    throw new ApiError(
      "conflict",
      `Claim "${claim.name}" has port ${
        describe(here)
      } already: a second port of a claim (a live migration's target) goes on another node`,
      "claim",
    );
  }
}

/** The records of a claim's ports, in its order. */
function claimPorts(ctx: Ctx, claim: ClaimRecord): Promise<Entry<PortRecord>[]> {
  return ctx.store.getMany<PortRecord>(
    claim.ports.map((id) =>
      keys.port(claim.networkId, keyId(claim.networkTenant, claim.tenant, id))
    ),
  );
}

/**
 * A claimed port's release, in its commit: it leaves the claim's list, and when it was active the
 * other port (if any) becomes active. Answers that port, to announce; null when the claim is gone
 * (the address is then released as a plain port's).
 */
export async function leaveClaim(
  ctx: Ctx,
  tx: Tx,
  opts: { net: NetworkRecord; port: PortRecord },
): Promise<{ promoted?: PortRecord } | null> {
  const { net, port } = opts;
  const ce = await ctx.store.get<ClaimRecord>(keys.claim(port.tenant, net.id, port.claim!));
  const claim = ce.value;
  if (!claim) return null;
  const rest = claim.ports.filter((id) => id !== port.id);
  tx.check(ce).set(ce.key, { ...claim, ports: rest });
  if (port.active === false) return {};
  // The active port goes while the other exists: the source died, the target takes over.
  for (const e of await claimPorts(ctx, { ...claim, ports: rest })) {
    if (!e.value) continue;
    const { active: _, ...promoted } = e.value;
    tx.check(e).set(e.key, promoted);
    return { promoted };
  }
  return {};
}

/**
 * Makes the port the active one of its claim, and the other inactive, in one commit; already
 * active: the same answer, nothing written. The port's node (its agent: the guest spoke there), its
 * tenant, its cluster's monitor and the admin may; 409 for a port of no claim.
 */
export async function activatePort(ctx: Ctx, target: PortTarget): Promise<Port> {
  const net = await resolveNetwork(ctx, { ...target, fresh: true });
  const { port, changed } = await retry(ctx, async (tx) => {
    const e = await portToChange(ctx, { ...target, net, verb: "activate" });
    const port = e.value;
    if (port.claim === undefined) {
      throw new ApiError(
        "conflict",
        `Port "${port.id}" is bound to no claim: only a port of a claim has another port to take over from (a live migration)`,
      );
    }
    if (port.active !== false) return { port, changed: [] };
    const ce = await ctx.store.get<ClaimRecord>(keys.claim(port.tenant, net.id, port.claim));
    tx.check(ce);
    const { active: _, ...active } = port;
    tx.check(e).set(e.key, active);
    const changed = [active];
    const others = ce.value ? await claimPorts(ctx, ce.value) : [];
    for (const o of others) {
      if (!o.value || o.value.id === port.id || o.value.active === false) continue;
      const inactive: PortRecord = { ...o.value, active: false };
      tx.check(o).set(o.key, inactive);
      changed.push(inactive);
    }
    return { port: active, changed };
  });
  for (const p of changed) ctx.feed.publish({ type: "port", op: "put", port: portView(net, p) });
  return portView(net, port);
}
