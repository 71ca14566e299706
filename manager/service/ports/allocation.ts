/**
 * Allocation: adds one port to a commit being built. Charges its tenant's quota, then takes an
 * address (the next free one, a fixed one, or one of an IP group) and a fixed MAC if asked, and
 * writes the record, its indexes and the start of its address history.
 */
import { ApiError, invalid } from "../../errors.ts";
import { formatIp } from "@knitter/common/address";
import { type IpGroupRecord, keys, type NetworkRecord, type PortRecord } from "../../model.ts";
import type { Tx } from "../../store/tx.ts";
import type { PoolEdit } from "../../ipam/bitmap_pool.ts";
import { holderOf } from "../holders.ts";
import { readGroup, writeGroup } from "../ip_group_members.ts";
import { rebindStint, stintStart } from "../history.ts";
import type { QuotaCharges } from "../quotas.ts";
import type { Ctx } from "../context.ts";
import { cidrOf, parseAddrField } from "../network_fields.ts";
import { requestedIp4 } from "../dual_stack.ts";
import { macInQuarantine, poolExhausted, sweepQuarantine, takeAsked } from "../quarantine.ts";
import { bindExisting } from "./binding.ts";
import { claimNewPort } from "./claimed.ts";
import { keyId, type PortBody, portRecord, type PutResult, storeNewPort } from "./records.ts";
import { Restart } from "./guards.ts";
import { macBlock } from "../../ipam/derived_mac.ts";
import { floatingForNewPort } from "./floating.ts";

/** One port's PUT inside a commit being built. */
export interface PutStep {
  tx: Tx;
  edit: PoolEdit;
  charges: QuotaCharges;
  net: NetworkRecord;
  owner: string;
  id: string;
  body: PortBody;
  /** The pool was just read from the store, so "full" is final (else: Restart). */
  fresh: boolean;
  /**
   * An existing port is answered as it is. Without, the tx only checks that the port is absent
   * (the batch path: no read per port).
   */
  readFirst: boolean;
}

/** Adds one port's allocation (or, read first, its second PUT) to `step.tx`. */
export async function buildPut(ctx: Ctx, step: PutStep): Promise<PutResult> {
  const { tx, charges, net, owner, id, body } = step;
  const key = keys.port(net.id, keyId(net.tenant, owner, id));
  if (step.readFirst) {
    const existing = await ctx.store.get<PortRecord>(key);
    if (existing.value) {
      const r = bindExisting({
        tx,
        net,
        port: existing.value,
        version: existing.version!,
        owner,
        body,
        stintFrom: stintStart(ctx),
      });
      if (r.changed) await rebindStint(ctx, tx, { before: existing.value, after: r.port, net });
      return r;
    }
  }
  tx.checkAbsent(key);
  if (net.deletingSince !== undefined) {
    throw new ApiError(
      "network_deleting",
      `Network "${net.name}" of tenant "${net.tenant}" is being deleted (since ${net.deletingSince}): it takes no new ports`,
    );
  }
  // A claim's address is the claim's, counted with it (claimed.ts).
  if (body.claim !== undefined) return await claimNewPort(ctx, step);
  // An address from an IP group is already counted with the group.
  const delta = { ports: 1, addresses: body.ipGroup === undefined ? 1 : 0 };
  await charges.charge(owner, delta);
  try {
    return await allocatePort(ctx, step);
  } catch (err) {
    await charges.refund(owner, delta);
    throw err;
  }
}

async function allocatePort(ctx: Ctx, step: PutStep): Promise<PutResult> {
  const { tx, edit, net, owner, id, body } = step;
  if (body.mac !== undefined) await claimMac(ctx, { tx, net, owner, id, mac: body.mac });
  let index: number;
  let ip: string;
  if (body.ipGroup !== undefined) {
    ({ index, ip } = await fromGroup(ctx, step));
  } else if (body.ip !== undefined) {
    const asked = requestedIp4(net, body.ip);
    ip = canonicalIp(net, asked);
    index = ctx.pools.space(net).indexOf(ipValue(net, asked));
    if (index < 0) {
      throw invalid(
        "ip",
        `${asked} is outside the allocation pools of network "${net.name}" (${poolText(net)})`,
      );
    }
    const reserved = ctx.pools.reservedWhy(net, index);
    if (reserved !== null) {
      ctx.metrics.allocationFailures.inc({ reason: "taken" });
      throw new ApiError("address_taken", `${ip} of network "${net.name}" is ${reserved}`, "ip");
    }
    const taken = await takeAsked(ctx, tx, { edit, net, index });
    if (taken !== true) {
      ctx.metrics.allocationFailures.inc({ reason: "taken" });
      const q = taken;
      throw new ApiError(
        "address_taken",
        q
          ? `${ip} of network "${net.name}" was released at ${q.releasedAt} and is in quarantine until ${q.until}`
          : `${ip} of network "${net.name}" is ${await holderOf(ctx, { net, ip, asker: owner })}`,
        "ip",
      );
    }
  } else {
    // A pool found full on fresh reads looks for ended quarantines whatever it knew.
    await sweepQuarantine(ctx, tx, { edit, net, force: step.fresh });
    const found = await edit.allocate(ctx.pools.allowed(net));
    if (found === null) {
      if (!step.fresh) throw new Restart();
      throw await poolExhausted(ctx, net, `Cannot allocate an address from network "${net.name}"`);
    }
    index = found;
    ip = formatIp({ family: net.family, value: ctx.pools.space(net).valueAt(index) });
  }
  // Its record is its live holding in the address history: nothing else to write (history.ts).
  const port = portRecord({ net, owner, id, body, ip, index, stintFrom: stintStart(ctx) });
  // A floating address bound to its ID follows it (floating_ips.ts).
  const stored = await floatingForNewPort(ctx, tx, { net, port });
  return { port: storeNewPort(tx, net, stored), created: true, changed: true };
}

/** The address of an IP group the port asks for, or the group's next free one. */
async function fromGroup(
  ctx: Ctx,
  opts: { tx: Tx; net: NetworkRecord; owner: string; id: string; body: PortBody },
): Promise<{ index: number; ip: string; group: IpGroupRecord }> {
  const { tx, net, owner, id, body } = opts;
  const ge = await readGroup(ctx.store, owner, body.ipGroup!);
  const group = ge.value;
  if (!group) {
    throw invalid("ipGroup", `IP group "${body.ipGroup}" does not exist in tenant "${owner}"`);
  }
  if (group.networkId !== net.id) {
    throw invalid(
      "ipGroup",
      `IP group "${group.name}" belongs to network "${group.network}", not "${net.name}"`,
    );
  }
  let slot: number;
  if (body.ip !== undefined) {
    const ip = canonicalIp(net, body.ip);
    slot = group.addresses.findIndex((a) => a.ip === ip);
    if (slot < 0) throw invalid("ip", `${ip} is not an address of IP group "${group.name}"`);
    if (group.addresses[slot].port) {
      throw new ApiError(
        "address_taken",
        `${ip} of IP group "${group.name}" is used by port "${group.addresses[slot].port}"`,
        "ip",
      );
    }
  } else {
    const n = group.addresses.length;
    slot = -1;
    for (let k = 0; k < n; k++) {
      const s = (group.cursor + k) % n;
      if (!group.addresses[s].port) {
        slot = s;
        break;
      }
    }
    if (slot < 0) {
      ctx.metrics.allocationFailures.inc({ reason: "exhausted" });
      throw new ApiError(
        "pool_exhausted",
        `IP group "${group.name}" has no free address (all ${n} in use)`,
        "ipGroup",
      );
    }
  }
  const addresses = group.addresses.map((a, i) => (i === slot ? { ...a, port: id } : a));
  const updated = { ...group, addresses, cursor: (slot + 1) % addresses.length };
  tx.check(ge);
  writeGroup(tx, group, updated);
  return { index: addresses[slot].index, ip: addresses[slot].ip, group: updated };
}

/**
 * Takes a fixed MAC for a new port, in the same commit as its address: the MAC's key in the
 * network must be absent, so two ports of a network never share one, on any store and replica.
 * MACs of the block the manager derives for the network (see macFor) are refused: they may be
 * handed to a port later.
 */
async function claimMac(
  ctx: Ctx,
  opts: { tx: Tx; net: NetworkRecord; owner: string; id: string; mac: string },
): Promise<void> {
  const { tx, net, owner, id, mac } = opts;
  const block = macBlock(net.id);
  if (mac.startsWith(block)) {
    throw new ApiError(
      "invalid_mac",
      `mac: ${mac} lies in ${block}:00:00:00-${block}:ff:ff:ff, the block the manager hands out on network "${net.name}"; choose another locally administered MAC`,
      "mac",
    );
  }
  const q = await macInQuarantine(ctx, tx, { net, mac });
  if (q) {
    throw new ApiError(
      "mac_taken",
      `mac: ${mac} was released on network "${net.name}" and is in quarantine until ${q.until}`,
      "mac",
    );
  }
  const e = await ctx.store.get<{ tenant: string; id: string }>(keys.mac(net.id, mac));
  if (e.value) {
    const who = e.value.tenant === owner ? `port "${e.value.id}"` : "a port of another tenant";
    throw new ApiError(
      "mac_taken",
      `mac: ${mac} is already used by ${who} on network "${net.name}"; MACs are unique within a network`,
      "mac",
    );
  }
  tx.checkAbsent(e.key).set(e.key, { tenant: owner, id });
}

function ipValue(net: NetworkRecord, text: string): bigint {
  return parseAddrField("ip", text, cidrOf(net)).value;
}

function canonicalIp(net: NetworkRecord, text: string): string {
  return formatIp({ family: net.family, value: ipValue(net, text) });
}

function poolText(net: NetworkRecord): string {
  return net.allocationPools.map((p) => `${p.start}-${p.end}`).join(", ");
}
