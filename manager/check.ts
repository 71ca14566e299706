/**
 * The consistency check (`deno task manager check`): every set bit of an address, VNI or VLAN pool
 * has its holder (a port, an IP group address, the gateway or an exclude; a network for a segment
 * ID) and every holder has its bit; the pool heads count what their chunks hold; no address or
 * segment has two owners; every router's networks exist, belong to its tenant and name it as their
 * one router; no quarantine records of an old shape, nor keys of a network that is gone, nor
 * entries of a conflict report that its head does not name (`check --repair` mends those:
 * repair.ts). A manager killed mid-request must leave nothing this check
 * finds.
 */
import { tsBitmap } from "@knitter/wasm";
import { CHUNK_BITS, type PoolHead } from "./ipam/bitmap_pool.ts";
import { rangesHold } from "./ipam/index_ranges.ts";
import {
  type ClaimRecord,
  type IpGroupRecord,
  keys,
  type NetworkRecord,
  type PhysnetRecord,
  type PortRecord,
  type RouterRecord,
  type ServiceRecord,
} from "./model.ts";
import { VLAN_SPACE, VNI_SPACE } from "./service/context.ts";
import { macFor } from "./ipam/derived_mac.ts";
import { withMembers } from "./service/ip_group_members.ts";
import { countUsage, QUOTA_KINDS, type QuotaRecord } from "./service/quotas.ts";
import { readShares, sumUsed } from "./service/quota_shares.ts";
import { networkFields } from "./service/network_fields.ts";
import type { Key, Store } from "./store/store.ts";
import { networkIdsWithLeftovers } from "./service/network_leftovers.ts";
import { miscountedHeads, strayGenerations } from "./service/conflict_records.ts";
import { listQuarantine } from "./service/quarantine.ts";
import { countProblem } from "./service/quarantine_count.ts";

export interface CheckReport {
  networks: number;
  ports: number;
  problems: string[];
}

/** `clock`: the manager's clock (ms), which says which quarantines are over; tests move it. */
export async function checkStore(
  store: Store,
  opts: { clock?: () => number } = {},
): Promise<CheckReport> {
  const now = (opts.clock ?? Date.now)();
  const problems: string[] = [];
  const networks = await values<NetworkRecord>(store, keys.networks());
  const byId = new Map(networks.map((n) => [n.id, n]));
  let ports = 0;
  for (const net of networks) ports += await checkNetwork(store, net, now, problems);
  for (const p of await values<PortRecord>(store, keys.ports())) {
    if (!byId.has(p.networkId)) {
      problems.push(`port "${p.id}" names network ${p.networkId}, which does not exist`);
    }
  }
  for (const id of await networkIdsWithLeftovers(store)) {
    if (!byId.has(id)) {
      problems.push(
        `quarantine records or pool chunks of network ${id}, which does not exist (its delete ` +
          "was interrupted); `check --repair` deletes them",
      );
    }
  }
  await checkConflictReports(store, problems);
  await checkSegments(store, networks, problems);
  await checkRouters(store, byId, problems);
  for await (const e of store.list<QuotaRecord>(["quota"])) {
    const tenant = e.key.at(-1) as string;
    // Being counted (or counted by an older manager): whoever comes next counts it.
    if (!e.value?.shares) continue;
    const used = sumUsed((await readShares(store, tenant)).map((s) => s.value));
    const actual = await countUsage(store, tenant);
    for (const k of QUOTA_KINDS) {
      if (used[k] !== actual[k]) {
        problems.push(`quota of tenant "${tenant}": counts ${used[k]} ${k}, it holds ${actual[k]}`);
      }
    }
  }
  return { networks: networks.length, ports, problems };
}

/** Every node's conflict report is whole, and no entries of another generation are left. */
async function checkConflictReports(store: Store, problems: string[]): Promise<void> {
  for (const g of await strayGenerations(store)) {
    const how = g.draft
      ? "being written, or its write was interrupted"
      : "its drop was interrupted";
    problems.push(
      `conflict report of node "${g.node}": ${g.entries} entry(ies) of generation ${g.generation}, ` +
        `which its head does not name (${how}); \`check --repair\` deletes them`,
    );
  }
  for (const m of await miscountedHeads(store)) problems.push(`conflict report of ${m}`);
}

async function checkNetwork(
  store: Store,
  net: NetworkRecord,
  now: number,
  problems: string[],
): Promise<number> {
  const where = `network "${net.tenant}/${net.name}"`;
  const holders = new Map<number, string>();
  const hold = (index: number, who: string) => {
    const other = holders.get(index);
    if (other) problems.push(`${where}: pool index ${index} has two owners: ${other} and ${who}`);
    else holders.set(index, who);
  };
  const ports = await values<PortRecord>(store, keys.ports(net.id));
  const groupOf = new Map<string, number>();
  for await (const e of store.list(keys.ipGroupsOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const raw = (await store.get<IpGroupRecord>(keys.ipGroup(tenant, name))).value;
    if (!raw) {
      problems.push(`${where}: index entry of IP group "${tenant}/${name}" without the group`);
      continue;
    }
    await checkMembers(store, raw, `${where}: IP group "${tenant}/${name}"`, problems);
    const g = await withMembers(store, raw);
    for (const a of g.addresses) {
      hold(a.index, `IP group "${tenant}/${name}" (${a.ip})`);
      if (a.port) groupOf.set(`${tenant}/${a.port}`, a.index);
    }
  }
  // A claim holds its address; its ports (two during a live migration) share it and its MAC.
  const claimOf = new Map<string, number>();
  for await (const e of store.list(keys.claimsOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const c = (await store.get<ClaimRecord>(keys.claim(tenant, net.id, name))).value;
    if (!c) {
      problems.push(`${where}: index entry of claim "${tenant}/${name}" without the claim`);
      continue;
    }
    hold(c.index, `claim "${tenant}/${name}" (${c.ip})`);
    claimOf.set(`${tenant}/${name}`, c.index);
  }
  for await (const e of store.list(keys.servicesOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const s = (await store.get<ServiceRecord>(keys.service(tenant, name))).value;
    if (!s) {
      problems.push(`${where}: index entry of service "${tenant}/${name}" without the service`);
    } else hold(s.vipIndex, `the VIP of service "${tenant}/${name}" (${s.vip})`);
  }
  let oldShape = 0;
  for (const prefix of [keys.quarantines(net.id), keys.legacyQuarantines(net.id)]) {
    for await (const e of store.list<{ ip: string }>(prefix)) {
      hold(e.key.at(-1) as number, `the quarantine of ${e.value?.ip}`);
      if (e.key[0] === keys.legacyQuarantines(net.id)[0]) oldShape++;
    }
  }
  const listed = await listQuarantine(store, net.id, now);
  const countWrong = await countProblem(store, net.id, { ...listed, now });
  if (countWrong) problems.push(`${where}: ${countWrong}`);
  let oldMacs = 0;
  for await (const e of store.list(keys.macQuarantines(net.id))) if (e.key.length === 3) oldMacs++;
  if (oldMacs > 0) {
    problems.push(
      `${where}: ${oldMacs} fixed MAC quarantine record(s) of the old shape (by MAC only), which ` +
        "never end; `check --repair` moves them to the current shape (or deletes them, ended)",
    );
  }
  if (oldShape > 0) {
    problems.push(
      `${where}: ${oldShape} quarantine record(s) of the old shape (by index), which older managers ` +
        "end all in one commit: they refuse every allocation on the network once about 100 have " +
        "expired; `check --repair` moves them to the current shape",
    );
  }
  const macs = new Map<string, string>();
  for (const p of ports) {
    if (p.claim !== undefined && claimOf.get(`${p.tenant}/${p.claim}`) === p.index) continue;
    const other = macs.get(p.mac);
    if (other) problems.push(`${where}: MAC ${p.mac} has two ports: ${other} and "${p.id}"`);
    macs.set(p.mac, `"${p.tenant}/${p.id}"`);
    if (p.mac !== macFor(net.id, p.index)) {
      const e = await store.get<{ tenant: string; id: string }>(keys.mac(net.id, p.mac));
      if (e.value?.tenant !== p.tenant || e.value?.id !== p.id) {
        problems.push(`${where}: port "${p.id}" has fixed MAC ${p.mac} without its MAC key`);
      }
    }
    if (p.ipGroup !== undefined && groupOf.get(`${p.tenant}/${p.id}`) === p.index) continue;
    hold(p.index, `port "${p.id}" (${p.ip})`);
  }
  for await (const e of store.list<{ tenant: string; id: string }>(keys.macs(net.id))) {
    const mac = e.key.at(-1) as string;
    if (!macs.has(mac)) problems.push(`${where}: MAC key ${mac} without its port`);
  }
  const bits = await readPool(store, keys.ipam(net.id), net.poolSize, where, problems);
  // Networks made before reserved ranges were kept have their reserved addresses as set bits.
  const legacy = net.reservedRanges === undefined ? reservedOf(net) : new Set<number>();
  const ranges = net.reservedRanges ?? [];
  for (const [index, who] of holders) {
    if (!bits.set.has(index)) {
      problems.push(`${where}: ${who} holds index ${index}, whose bit is clear`);
    }
    if (rangesHold(ranges, index)) {
      problems.push(`${where}: ${who} holds index ${index}, which is reserved (gateway, exclude)`);
    }
  }
  for (const index of bits.set) {
    if (holders.has(index) || legacy.has(index)) continue;
    problems.push(`${where}: index ${index} is set but no port or IP group holds it (orphaned)`);
  }
  if (bits.head && bits.head.used !== holders.size) {
    problems.push(
      `${where}: the pool head counts ${bits.head.used} in use, the holders are ${holders.size}`,
    );
  }
  return ports.length;
}

/** An IP group's member keys name exactly the addresses its record marks held. */
async function checkMembers(
  store: Store,
  raw: IpGroupRecord,
  where: string,
  problems: string[],
): Promise<void> {
  const held = new Set(raw.addresses.filter((a) => a.held).map((a) => a.index));
  for await (const m of store.list<string>(keys.ipGroupMembers(raw.tenant, raw.name))) {
    const index = m.key.at(-1) as number;
    if (!held.delete(index)) {
      problems.push(`${where}: member key of index ${index} (port "${m.value}"), not held`);
    }
  }
  for (const index of held) problems.push(`${where}: index ${index} held without its member key`);
}

/** The gateway's and the excludes' indexes, as network creation set them before ranges were kept. */
function reservedOf(net: NetworkRecord): Set<number> {
  const spec = networkFields(
    {
      name: net.name,
      cidr: net.cidr,
      gateway: net.gateway,
      allocationPools: net.allocationPools,
      excludes: net.excludes,
      // Only the address fields matter here; the segment fields were checked at creation.
      type: "vxlan",
    } as Parameters<typeof networkFields>[0],
    net.mtu,
  );
  const out = new Set<number>();
  for (const [start, end] of spec.reserved) for (let i = start; i < end; i++) out.add(i);
  return out;
}

async function checkSegments(store: Store, networks: NetworkRecord[], problems: string[]) {
  const pools: { type: string; physnet: string; prefix: Key; size: number }[] = [
    { type: "vxlan", physnet: "", prefix: keys.vniPool(), size: VNI_SPACE },
  ];
  for (const p of await values<PhysnetRecord>(store, keys.physnets())) {
    pools.push({ type: "vlan", physnet: p.name, prefix: keys.vlanPool(p.name), size: VLAN_SPACE });
  }
  for (const pool of pools) {
    const where = pool.type === "vxlan" ? "VNI pool" : `VLAN pool of physnet "${pool.physnet}"`;
    const bits = await readPool(store, pool.prefix, pool.size, where, problems);
    const owners = new Map<number, string>();
    for await (
      const e of store.list<{ tenant: string; name: string }>([
        "segment_owner",
        pool.type,
        pool.physnet,
      ])
    ) {
      owners.set(e.key[e.key.length - 1] as number, `${e.value?.tenant}/${e.value?.name}`);
    }
    const users = networks.filter((n) =>
      n.type === pool.type && (n.physnet ?? "") === pool.physnet && n.segmentId !== undefined
    );
    const seen = new Map<number, string>();
    for (const n of users) {
      const id = n.segmentId!;
      const name = `${n.tenant}/${n.name}`;
      if (seen.has(id)) {
        problems.push(`${where}: ID ${id} has two networks: ${seen.get(id)} and ${name}`);
      }
      seen.set(id, name);
      if (!bits.set.has(id)) {
        problems.push(`${where}: network ${name} has ID ${id}, whose bit is clear`);
      }
      if (owners.get(id) !== name) {
        problems.push(`${where}: ID ${id} of network ${name} has no owner record`);
      }
    }
    for (const id of bits.set) {
      if (!seen.has(id)) {
        problems.push(`${where}: ID ${id} is set but no network has it (orphaned)`);
      }
    }
    for (const [id, name] of owners) {
      if (!seen.has(id)) {
        problems.push(`${where}: owner record of ID ${id} (${name}) without its network`);
      }
    }
  }
}

/** A pool's set bits; the head's counters are checked against its chunks on the way. */
/** Routers and their index (one router per network) agree, and name their tenant's networks. */
async function checkRouters(
  store: Store,
  networks: Map<string, NetworkRecord>,
  problems: string[],
): Promise<void> {
  const claimed = new Map<string, string>();
  for (const r of await values<RouterRecord>(store, keys.routers())) {
    const where = `router "${r.tenant}/${r.name}"`;
    for (const n of r.networks) {
      const net = networks.get(n.id);
      if (!net || net.tenant !== r.tenant) {
        problems.push(`${where} names network ${n.id}, which is not one of its tenant's`);
      }
      claimed.set(n.id, `${r.tenant}/${r.name}`);
    }
  }
  for await (const e of store.list<{ tenant: string; name: string }>(["router_by_network"])) {
    const id = e.key.at(-1) as string;
    const owner = claimed.get(id);
    if (owner !== `${e.value?.tenant}/${e.value?.name}`) {
      problems.push(
        `network ${id} is indexed as router "${e.value?.tenant}/${e.value?.name}"'s, not ${
          owner ?? "any router"
        }'s`,
      );
    }
    claimed.delete(id);
  }
  for (const [id, owner] of claimed) {
    problems.push(`router "${owner}" connects network ${id}, which is not indexed as its`);
  }
}

async function readPool(
  store: Store,
  prefix: Key,
  size: number,
  where: string,
  problems: string[],
): Promise<{ head: PoolHead | null; set: Set<number> }> {
  const head = (await store.get<PoolHead>([...prefix, "head"])).value;
  const set = new Set<number>();
  for await (const e of store.list<Uint8Array>([...prefix, "chunk"])) {
    const chunk = e.key[e.key.length - 1] as number;
    const bits = Math.min(CHUNK_BITS, size - chunk * CHUNK_BITS);
    const bitmap = tsBitmap(bits, e.value!);
    let n = 0;
    for (let i = 0; i < bits; i++) {
      if (bitmap.test(i)) {
        set.add(chunk * CHUNK_BITS + i);
        n++;
      }
    }
    const counted = head?.chunkUsed[chunk] ?? 0;
    if (counted !== n) {
      problems.push(
        `${where}: chunk ${chunk} holds ${n} set bits, the pool head counts ${counted}`,
      );
    }
  }
  return { head, set };
}

async function values<T>(store: Store, prefix: Key): Promise<T[]> {
  const out: T[] = [];
  for await (const e of store.list<T>(prefix)) if (e.value !== null) out.push(e.value);
  return out;
}
