/**
 * Ports: one address of a network, bound to a pod's interface. PUT is idempotent: the same port ID
 * always gets the same answer, so an agent may retry or restart at any point.
 */
import type { PodRef, Port } from "@knitter/common";
import type { z } from "zod";
import type { Principal } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import { formatIp, macKind, parseIp } from "@knitter/common/address";
import { type IpGroupRecord, keys, type NetworkRecord, type PortRecord } from "../model.ts";
import type { PortQuery, PortRequest } from "../schemas.ts";
import type { Entry, Key } from "../store/store.ts";
import { Tx } from "../store/tx.ts";
import type { PoolEdit } from "../ipam/bitmap_pool.ts";
import { GroupCommit } from "@knitter/common";
import { holderOf } from "./holders.ts";
import { closeStint, openStint, rebindStint } from "./history.ts";
import { QuotaCharges } from "./quotas.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { cidrOf, parseAddrField } from "./network_spec.ts";
import {
  earliest,
  macInQuarantine,
  quarantine,
  quarantining,
  sweepQuarantine,
} from "./quarantine.ts";
import { forgetNetwork, type NetworkRef, resolveNetwork, resolveNetworkRef } from "./networks.ts";

export type PortBody = z.infer<typeof PortRequest>;

export interface PutResult {
  port: Port;
  created: boolean;
  /** Created, or bound to a node / pod / interface it did not have: followers must hear of it. */
  changed: boolean;
}

export async function putPort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
  body: PortBody,
): Promise<PutResult> {
  const owner = principal.scope === "tenant" ? principal.tenant : tenant;
  if (principal.scope === "tenant" && body.node !== undefined) {
    // Binding puts the port on that node's dataplane: only the node's agent or an admin decides it.
    throw new ApiError(
      "forbidden",
      "A tenant token may not bind a port to a node: the node's agent (its node token) or an admin does; leave out node",
      "node",
    );
  }
  if (
    principal.scope === "tenant" && body.pod !== undefined &&
    body.pod.namespace !== principal.tenant
  ) {
    // Ports are found by their pod (the monitor releases a deleted pod's ports by it).
    throw new ApiError(
      "forbidden",
      `A tenant token may bind a port only to a pod of its own namespace "${principal.tenant}"`,
      "pod.namespace",
    );
  }
  if (body.mac !== undefined) checkMac(body.mac);
  if (principal.scope === "node") {
    if (body.node !== undefined && body.node !== principal.node) {
      throw new ApiError(
        "forbidden",
        `A token of node "${principal.node}" may not bind ports to node "${body.node}"`,
        "node",
      );
    }
    body = { ...body, node: principal.node };
  }
  let ref = await resolveNetworkRef(ctx, principal, tenant, networkName);
  if (body.ip === undefined && body.ipGroup === undefined && body.mac === undefined) {
    const batched = await new Promise<PutResult | null>((resolve, reject) =>
      batcherOf(ctx, ref).submit({ owner, id, body, resolve, reject })
    );
    if (batched) return counted(ctx, batched);
  }
  // The careful path: fixed addresses, groups, and whatever the batch could not settle.
  let fresh = false;
  for (;;) {
    const pool = ctx.pools.addresses(ref.net);
    try {
      const result = await pool.exclusive(() =>
        retry(ctx, async (tx, attempt) => {
          if (attempt > 0) {
            // Lost a race: the network itself may be gone or re-created under us.
            const now = await resolveNetworkRef(ctx, principal, tenant, networkName, true);
            if (now.net.id !== ref.net.id) throw new Restart(now);
            ref = now;
          }
          const edit = await pool.edit(tx);
          checkNetwork(tx, ref);
          const charges = new QuotaCharges(ctx, tx);
          const r = await buildPut(ctx, tx, edit, charges, ref.net, owner, id, body, {
            fresh,
            readFirst: true,
          });
          edit.flush();
          charges.flush();
          return r;
        })
      );
      return counted(ctx, result);
    } catch (err) {
      if (!(err instanceof Restart)) throw err;
      if (err.network) {
        forgetNetwork(ctx, ref.net);
        ref = err.network;
      } else {
        // The cache said "full": make sure with fresh reads before refusing.
        pool.invalidate();
        fresh = true;
      }
    }
  }
}

/** The commit goes in only while the network is the one the request resolved. */
function checkNetwork(tx: Tx, ref: NetworkRef): void {
  tx.check({ key: keys.network(ref.net.tenant, ref.net.name), version: ref.version });
}

function counted(ctx: Ctx, r: PutResult): PutResult {
  if (r.created) ctx.metrics.allocations.inc({ kind: "ip" });
  if (r.changed) ctx.feed.publish({ type: "port", op: "put", port: r.port });
  return r;
}

interface Pending {
  owner: string;
  id: string;
  body: PortBody;
  /** null: the batch could not settle it; the caller takes the careful path. */
  resolve(r: PutResult | null): void;
  reject(err: unknown): void;
}

/**
 * Ports per batch: each adds one check, and so may its tenant's quota record (on a public network
 * every port may be another tenant's); a Deno KV commit takes at most 100.
 */
const MAX_BATCH = 48;

function batcherOf(ctx: Ctx, ref: NetworkRef): GroupCommit<Pending> {
  return ctx.pools.perNetwork(
    ref.net,
    "ports",
    () => new GroupCommit<Pending>(MAX_BATCH, (p) => p.id, (batch) => commitBatch(ctx, ref, batch)),
  );
}

/**
 * Allocates a batch of new ports in one commit, checking only that each is absent. When the commit
 * fails, every port of the batch takes the careful path, which reads first: a port that already
 * existed is answered as it is, anything else was a lost race.
 */
async function commitBatch(ctx: Ctx, ref: NetworkRef, batch: Pending[]): Promise<void> {
  const pool = ctx.pools.addresses(ref.net);
  await pool.exclusive(async () => {
    const tx = new Tx();
    const done: [Pending, PutResult][] = [];
    const unsettled: Pending[] = [];
    try {
      const edit = await pool.edit(tx);
      checkNetwork(tx, ref);
      const charges = new QuotaCharges(ctx, tx);
      for (const p of batch) {
        try {
          done.push([
            p,
            await buildPut(ctx, tx, edit, charges, ref.net, p.owner, p.id, p.body, {
              fresh: false,
              readFirst: false,
            }),
          ]);
        } catch (err) {
          if (err instanceof Restart) unsettled.push(p);
          else p.reject(err);
        }
      }
      edit.flush();
      charges.flush();
      if (done.length > 0 && await tx.commit(ctx.store)) {
        for (const [p, r] of done) p.resolve(r);
        // Those the cache found no room for still need an answer, from the careful path.
        for (const p of unsettled) p.resolve(null);
        return;
      }
      tx.abort();
      if (done.length > 0 && !(await anyExists(ctx, ref.net, done.map(([p]) => p)))) {
        ctx.metrics.conflicts.inc();
      }
      unsettled.push(...done.map(([p]) => p));
    } catch (err) {
      tx.abort();
      for (const p of batch) p.reject(err);
      return;
    }
    for (const p of unsettled) p.resolve(null);
  });
}

/** Whether a failed batch is explained by a port that already existed (a repeated PUT). */
async function anyExists(ctx: Ctx, net: NetworkRecord, batch: Pending[]): Promise<boolean> {
  const found = await ctx.store.getMany(
    batch.map((p) => keys.port(net.id, keyId(net.tenant, p.owner, p.id))),
  );
  return found.some((e) => e.value !== null);
}

/** Start a PUT over: on another network record, or on fresh reads. */
class Restart extends Error {
  constructor(readonly network?: NetworkRef) {
    super("restart");
  }
}

/**
 * Adds one port's allocation to `tx`. With `readFirst` an existing port is answered as it is;
 * without, the tx only checks that the port is absent (the batch path: no read per port).
 * `fresh`: the pool was just read from the store, so "full" is final.
 */
async function buildPut(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  charges: QuotaCharges,
  net: NetworkRecord,
  owner: string,
  id: string,
  body: PortBody,
  opts: { fresh: boolean; readFirst: boolean },
): Promise<PutResult> {
  const key = keys.port(net.id, keyId(net.tenant, owner, id));
  if (opts.readFirst) {
    const existing = await ctx.store.get<PortRecord>(key);
    if (existing.value) {
      const r = bindExisting(tx, net, existing.value, existing.version!, owner, body);
      if (r.changed) await rebindStint(ctx, tx, existing.value, r.port);
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
  // An address from an IP group is already counted with the group.
  const delta = { ports: 1, addresses: body.ipGroup === undefined ? 1 : 0 };
  await charges.charge(owner, delta);
  try {
    return await allocatePort(ctx, tx, edit, net, owner, id, body, key, opts.fresh);
  } catch (err) {
    await charges.refund(owner, delta);
    throw err;
  }
}

async function allocatePort(
  ctx: Ctx,
  tx: Tx,
  edit: PoolEdit,
  net: NetworkRecord,
  owner: string,
  id: string,
  body: PortBody,
  key: Key,
  fresh: boolean,
): Promise<PutResult> {
  if (body.mac !== undefined) await claimMac(ctx, tx, net, owner, id, body.mac);
  let index: number;
  let ip: string;
  if (body.ipGroup !== undefined) {
    ({ index, ip } = await fromGroup(ctx, tx, net, owner, id, body));
  } else if (body.ip !== undefined) {
    const held = await sweepQuarantine(ctx, tx, edit, net);
    ip = canonicalIp(net, body.ip);
    index = ctx.pools.space(net).indexOf(ipValue(net, body.ip));
    if (index < 0) {
      throw invalid(
        "ip",
        `${body.ip} is outside the allocation pools of network "${net.name}" (${poolText(net)})`,
      );
    }
    const reserved = ctx.pools.reservedWhy(net, index);
    if (reserved !== null) {
      ctx.metrics.allocationFailures.inc({ reason: "taken" });
      throw new ApiError("address_taken", `${ip} of network "${net.name}" is ${reserved}`, "ip");
    }
    if (!(await edit.take(index))) {
      ctx.metrics.allocationFailures.inc({ reason: "taken" });
      const q = held.get(index);
      throw new ApiError(
        "address_taken",
        q
          ? `${ip} of network "${net.name}" was released at ${q.releasedAt} and is in quarantine until ${q.until}`
          : `${ip} of network "${net.name}" is ${await holderOf(ctx, net, ip, owner)}`,
        "ip",
      );
    }
  } else {
    const held = await sweepQuarantine(ctx, tx, edit, net);
    const found = await edit.allocate(ctx.pools.allowed(net));
    if (found === null) {
      if (!fresh) throw new Restart();
      ctx.metrics.allocationFailures.inc({ reason: "exhausted" });
      const total = net.poolSize - net.reserved;
      const inQuarantine = held.size === 0
        ? ""
        : `; ${held.size} of them released and in quarantine, the first until ${earliest(held)}`;
      throw new ApiError(
        "pool_exhausted",
        `Cannot allocate an address from network "${net.name}": its pools are exhausted (${total} of ${total} in use${inQuarantine})`,
      );
    }
    index = found;
    ip = formatIp({ family: net.family, value: ctx.pools.space(net).valueAt(index) });
  }
  const port = portRecord(net, owner, id, body, ip, index);
  tx.set(key, port);
  writeIndexes(tx, port, "set");
  openStint(ctx, tx, port);
  return { port: portView(net, port), created: true, changed: true };
}

/** A second PUT of a port: the same answer, binding node / pod / interface if still unset. */
function bindExisting(
  tx: Tx,
  net: NetworkRecord,
  port: PortRecord,
  version: string,
  owner: string,
  body: PortBody,
): PutResult {
  if (port.tenant !== owner) {
    throw new ApiError("conflict", `Port "${port.id}" exists and belongs to another tenant`);
  }
  const clash = (field: string, want: unknown, have: unknown) => {
    throw new ApiError(
      "conflict",
      `Port "${port.id}" already exists with ${field} ${
        JSON.stringify(have)
      }; the request asks for ${
        JSON.stringify(want)
      }. Delete the port first or use another port ID`,
      field,
    );
  };
  if (body.ip !== undefined && canonical(body.ip) !== port.ip) clash("ip", body.ip, port.ip);
  if (body.ipGroup !== undefined && body.ipGroup !== port.ipGroup) {
    clash("ipGroup", body.ipGroup, port.ipGroup);
  }
  if (body.mac !== undefined && body.mac !== port.mac) clash("mac", body.mac, port.mac);
  if (body.node !== undefined && port.node !== undefined && body.node !== port.node) {
    clash("node", body.node, port.node);
  }
  if (
    body.interface !== undefined && port.interface !== undefined &&
    body.interface !== port.interface
  ) {
    clash("interface", body.interface, port.interface);
  }
  if (body.pod !== undefined && port.pod !== undefined && !samePod(body.pod, port.pod)) {
    clash("pod", body.pod, port.pod);
  }
  const bound: PortRecord = {
    ...port,
    node: port.node ?? body.node,
    interface: port.interface ?? body.interface,
    pod: port.pod ?? body.pod,
  };
  if (bound.pod !== undefined) delete bound.unboundAt;
  const changed = bound.node !== port.node || bound.interface !== port.interface ||
    bound.pod !== port.pod;
  if (changed) {
    const key = keys.port(port.networkId, portKeyId(port));
    tx.check({ key, version });
    tx.set(key, bound);
    writeIndexes(tx, port, "delete");
    writeIndexes(tx, bound, "set");
  }
  return { port: portView(net, bound), created: false, changed };
}

function samePod(a: PodRef, b: PodRef): boolean {
  return a.namespace === b.namespace && a.name === b.name && (a.uid ?? b.uid) === (b.uid ?? a.uid);
}

async function fromGroup(
  ctx: Ctx,
  tx: Tx,
  net: NetworkRecord,
  owner: string,
  id: string,
  body: PortBody,
): Promise<{ index: number; ip: string; group: IpGroupRecord }> {
  const ge = await ctx.store.get<IpGroupRecord>(keys.ipGroup(owner, body.ipGroup!));
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
  tx.check(ge).set(ge.key, updated);
  return { index: addresses[slot].index, ip: addresses[slot].ip, group: updated };
}

function portRecord(
  net: NetworkRecord,
  owner: string,
  id: string,
  body: PortBody,
  ip: string,
  index: number,
): PortRecord {
  const port: PortRecord = {
    id,
    tenant: owner,
    network: net.name,
    networkTenant: net.tenant,
    networkId: net.id,
    ip,
    mac: body.mac ?? macFor(net.id, index),
    index,
    createdAt: now(),
  };
  if (body.ipGroup !== undefined) port.ipGroup = body.ipGroup;
  if (body.node !== undefined) port.node = body.node;
  if (body.pod !== undefined) port.pod = body.pod;
  if (body.interface !== undefined) port.interface = body.interface;
  return port;
}

/** A port as answered: the record joined with what its network says, less the pool index. */
export function portView(net: NetworkRecord, p: PortRecord): Port {
  const { index: _index, ...own } = p;
  const view: Port = {
    ...own,
    type: net.type,
    address: `${p.ip}/${net.cidr.slice(net.cidr.indexOf("/") + 1)}`,
    family: net.family,
    mtu: net.mtu,
    routes: net.routes,
    dns: net.dns,
  };
  if (net.segmentId !== undefined) view.segmentId = net.segmentId;
  if (net.physnet !== undefined) view.physnet = net.physnet;
  if (net.gateway !== undefined) view.gateway = net.gateway;
  return view;
}

/**
 * A locally administered unicast MAC that is unique within the network: two bytes from the network
 * ID, three from the address's pool index (pools never exceed 2^24 addresses).
 */
export function macFor(networkId: string, index: number): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < networkId.length; i++) h = Math.imul(h ^ networkId.charCodeAt(i), 0x01000193);
  const bytes = [
    0x02,
    (h >>> 8) & 0xff,
    h & 0xff,
    (index >>> 16) & 0xff,
    (index >>> 8) & 0xff,
    index & 0xff,
  ];
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/**
 * The ID a port is stored under in its network. A tenant's port on another tenant's (public)
 * network is scoped by its tenant ("tenant/id"; port IDs hold no "/"), so that no tenant can take
 * an ID that another tenant's pod will ask for (a stable ID made of namespace and pod name).
 */
export function keyId(networkTenant: string, owner: string, id: string): string {
  return owner === networkTenant ? id : `${owner}/${id}`;
}

export function portKeyId(port: PortRecord): string {
  return keyId(port.networkTenant, port.tenant, port.id);
}

/** A fixed MAC must be one a pod may use: unicast, locally administered, not all zero. */
function checkMac(mac: string): void {
  const why = {
    broadcast: "is the broadcast address",
    multicast: "is a multicast address (the first byte is odd)",
    zero: "is all zero",
    vendor:
      "is not locally administered (set bit 1 of the first byte, as in 02:..; other MACs belong to hardware vendors)",
    local: null,
  }[macKind(mac)];
  if (why) {
    throw new ApiError(
      "invalid_mac",
      `mac: ${mac} ${why}; a fixed MAC must be a locally administered unicast address`,
      "mac",
    );
  }
}

/**
 * Takes a fixed MAC for a new port, in the same commit as its address: the MAC's key in the
 * network must be absent, so two ports of a network never share one, on any store and replica.
 * MACs of the block the manager derives for the network (see macFor) are refused: they may be
 * handed to a port later.
 */
async function claimMac(
  ctx: Ctx,
  tx: Tx,
  net: NetworkRecord,
  owner: string,
  id: string,
  mac: string,
): Promise<void> {
  const block = macFor(net.id, 0).slice(0, 8);
  if (mac.startsWith(block)) {
    throw new ApiError(
      "invalid_mac",
      `mac: ${mac} lies in ${block}:00:00:00-${block}:ff:ff:ff, the block the manager hands out on network "${net.name}"; choose another locally administered MAC`,
      "mac",
    );
  }
  const q = await macInQuarantine(ctx, tx, net, mac);
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

function writeIndexes(tx: Tx, port: PortRecord, op: "set" | "delete"): void {
  const idx: Key[] = [];
  const id = portKeyId(port);
  // A tenant's ports on its own networks are found through those networks; only ports on another
  // tenant's (public) network need an index of their own.
  if (port.tenant !== port.networkTenant) {
    idx.push(keys.portOfForeignNetwork(port.tenant, port.networkId, id));
  }
  if (port.node) idx.push(keys.portOfNode(port.node, port.networkId, id));
  if (port.pod) idx.push(keys.portOfPod(port.pod, port.networkId, id));
  for (const k of idx) op === "set" ? tx.set(k, true) : tx.delete(k);
}

function ipValue(net: NetworkRecord, text: string): bigint {
  return parseAddrField("ip", text, cidrOf(net)).value;
}

function canonicalIp(net: NetworkRecord, text: string): string {
  return formatIp({ family: net.family, value: ipValue(net, text) });
}

function canonical(text: string): string {
  const ip = parseIp(text);
  return ip ? formatIp(ip) : text;
}

function poolText(net: NetworkRecord): string {
  return net.allocationPools.map((p) => `${p.start}-${p.end}`).join(", ");
}

export async function getPort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
): Promise<Port> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName);
  const owner = principal.scope === "tenant" ? principal.tenant : tenant;
  const port = (await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, owner, id))))
    .value;
  if (!port || !visible(principal, port)) {
    throw notFound(`Port "${id}" does not exist on network "${networkName}"`);
  }
  return portView(net, port);
}

function visible(principal: Principal, port: PortRecord): boolean {
  return principal.scope !== "tenant" || port.tenant === principal.tenant;
}

/**
 * Takes a port off its pod and node and keeps its address: a stable port whose pod is gone, ready
 * for the pod's next incarnation on any node. One commit, so no other request can take the port
 * ID in between (as a DELETE then PUT would allow). `unboundAt` says since when; the next PUT that
 * names a pod binds it again. An unbound port stays as it is. 404 when unknown.
 */
export async function unbindPort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
): Promise<Port> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName, true);
  const owner = principal.scope === "tenant" ? principal.tenant : tenant;
  const { port, changed } = await retry(ctx, async (tx) => {
    const e = await portToChange(ctx, principal, net, owner, id, networkName, "unbind");
    const port = e.value;
    if (port.node === undefined && port.pod === undefined) return { port, changed: false };
    const { node: _node, pod: _pod, ...rest } = port;
    const unbound: PortRecord = { ...rest, unboundAt: now() };
    tx.check(e).set(e.key, unbound);
    writeIndexes(tx, port, "delete");
    writeIndexes(tx, unbound, "set");
    await rebindStint(ctx, tx, port, unbound);
    return { port: unbound, changed: true };
  });
  const view = portView(net, port);
  if (changed) ctx.feed.publish({ type: "port", op: "put", port: view });
  return view;
}

/**
 * The port an unbind or release is about, as the principal may see it: 404 when it is unknown or
 * another tenant's, 403 when a node's token names another node's port.
 */
async function portToChange(
  ctx: Ctx,
  principal: Principal,
  net: NetworkRecord,
  owner: string,
  id: string,
  networkName: string,
  verb: "unbind" | "release",
): Promise<Entry<PortRecord> & { value: PortRecord }> {
  const e = await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, owner, id)));
  const port = e.value;
  if (!port || !visible(principal, port)) {
    throw notFound(`Port "${id}" does not exist on network "${networkName}"`);
  }
  if (principal.scope === "node" && port.node !== undefined && port.node !== principal.node) {
    throw new ApiError(
      "forbidden",
      `A token of node "${principal.node}" may not ${verb} a port of node "${port.node}"`,
    );
  }
  return { ...e, value: port };
}

/** Releases the port's address (back to its IP group if it came from one). 404 when unknown. */
export async function deletePort(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  id: string,
): Promise<void> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName, true);
  const owner = principal.scope === "tenant" ? principal.tenant : tenant;
  const pool = ctx.pools.addresses(net);
  const released = await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const e = await portToChange(ctx, principal, net, owner, id, networkName, "release");
      const port = e.value;
      tx.check(e).delete(e.key);
      writeIndexes(tx, port, "delete");
      await closeStint(ctx, tx, port, "released");
      const fixedMac = port.mac !== macFor(net.id, port.index);
      if (fixedMac) tx.delete(keys.mac(net.id, port.mac));
      const charges = new QuotaCharges(ctx, tx);
      if (port.ipGroup !== undefined) {
        const ge = await ctx.store.get<IpGroupRecord>(keys.ipGroup(port.tenant, port.ipGroup));
        if (ge.value) {
          const addresses = ge.value.addresses.map((
            a,
          ) => (a.port === id ? { ip: a.ip, index: a.index } : a));
          tx.check(ge).set(ge.key, { ...ge.value, addresses });
          await charges.charge(port.tenant, { ports: -1 });
          charges.flush();
          return port;
        }
      }
      if (quarantining(ctx)) {
        // The bit stays set until the quarantine ends (service/quarantine.ts).
        quarantine(ctx, tx, net, port, fixedMac);
      } else {
        const edit = await pool.edit(tx);
        await edit.release(port.index);
        edit.flush();
      }
      await charges.charge(port.tenant, { ports: -1, addresses: -1 });
      charges.flush();
      return port;
    })
  );
  ctx.feed.publish({ type: "port", op: "delete", port: portView(net, released) });
  ctx.metrics.releases.inc({ kind: "ip" });
}

export async function listNetworkPorts(
  ctx: Ctx,
  principal: Principal,
  tenant: string,
  networkName: string,
  query: z.infer<typeof PortQuery>,
): Promise<Port[]> {
  const net = await resolveNetwork(ctx, principal, tenant, networkName, true);
  const ports = await listValues<PortRecord>(ctx.store, keys.ports(net.id));
  return ports.filter((p) => matches(principal, p, query)).map((p) => portView(net, p));
}

/** Ports across networks, through the narrowest index that answers the query. */
export async function listPorts(
  ctx: Ctx,
  principal: Principal,
  query: z.infer<typeof PortQuery>,
): Promise<Port[]> {
  // A tenant token only ever reads its own ports.
  const tenant = principal.scope === "tenant" ? principal.tenant : query.tenant;
  let ports: PortRecord[];
  if (query.node !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfNode(query.node));
  } else if (query.pod !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfPod(...(query.pod.split("/") as [string, string])));
  } else if (tenant !== undefined) {
    ports = await throughIndex(ctx, keys.portsOfForeignNetworks(tenant));
    for (const n of await listValues<NetworkRecord>(ctx.store, keys.networks(tenant))) {
      ports.push(...await listValues<PortRecord>(ctx.store, keys.ports(n.id)));
    }
  } else {
    ports = await listValues<PortRecord>(ctx.store, keys.ports());
  }
  const nets = new Map<string, NetworkRecord | null>();
  const out: Port[] = [];
  for (const p of ports) {
    if (!matches(principal, p, query)) continue;
    if (!nets.has(p.networkId)) {
      nets.set(
        p.networkId,
        (await ctx.store.get<NetworkRecord>(keys.network(p.networkTenant, p.network))).value,
      );
    }
    const net = nets.get(p.networkId);
    // A port outlives its network only mid-delete; it is not shown then.
    if (net?.id === p.networkId) out.push(portView(net, p));
  }
  return out;
}

/** The ports an index (keys ending in network ID and port ID) points at. */
async function throughIndex(ctx: Ctx, prefix: Key): Promise<PortRecord[]> {
  const portKeys: Key[] = [];
  for await (const e of ctx.store.list(prefix)) {
    portKeys.push(keys.port(e.key.at(-2) as string, e.key.at(-1) as string));
  }
  return (await ctx.store.getMany<PortRecord>(portKeys)).flatMap((e) => (e.value ? [e.value] : []));
}

function matches(principal: Principal, p: PortRecord, q: z.infer<typeof PortQuery>): boolean {
  if (!visible(principal, p)) return false;
  if (q.node !== undefined && p.node !== q.node) return false;
  if (q.tenant !== undefined && p.tenant !== q.tenant) return false;
  if (q.pod !== undefined && `${p.pod?.namespace}/${p.pod?.name}` !== q.pod) return false;
  return true;
}
