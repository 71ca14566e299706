/**
 * Which port holds each address of an IP group. The group's record marks an address in use
 * (`held`), and the port's ID is under a key of its own, `ipgroup_member/<tenant>/<group>/<index>`:
 * a record that named them all would outgrow the 64 KiB a stored value may hold (512 addresses,
 * port IDs of up to 200 characters), and the group would refuse ports for good (issue 33). Binding
 * or releasing one address writes the record and one member key, whatever the group holds.
 *
 * In memory a group's addresses carry `port` as before: readGroup fills it in, writeGroup stores
 * it apart. Records of older managers name their ports inline; they are read as they are, and
 * their members move to keys the first time the group is written.
 */
import { type IpGroupAddress, type IpGroupRecord, keys } from "../model.ts";
import type { Entry, Store } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";

/** A group as read: its entry (for the commit's check), with each address's port filled in. */
export type GroupEntry = Entry<IpGroupRecord>;

/** Whether a record names its ports inline, as older managers wrote them. */
const inline = new WeakSet<IpGroupRecord>();

/** Reads a group with its members; value null when it does not exist. */
export async function readGroup(store: Store, tenant: string, name: string): Promise<GroupEntry> {
  const e = await store.get<IpGroupRecord>(keys.ipGroup(tenant, name));
  if (e.value) e.value = await withMembers(store, e.value);
  return e;
}

/** Fills in the port of each held address of a record as stored. */
export async function withMembers(store: Store, stored: IpGroupRecord): Promise<IpGroupRecord> {
  const held = stored.addresses.filter((a) => a.held);
  const members = await store.getMany<string>(
    held.map((a) => keys.ipGroupMember(stored.tenant, stored.name, a.index)),
  );
  const portAt = new Map(held.map((a, i) => [a.index, members[i].value ?? undefined]));
  const addresses = stored.addresses.map(({ held: _, ...a }) => {
    const port = portAt.get(a.index) ?? a.port;
    return port === undefined ? { ip: a.ip, index: a.index } : { ...a, port };
  });
  const group = { ...stored, addresses };
  if (stored.addresses.some((a) => a.port !== undefined)) inline.add(group);
  return group;
}

/**
 * Writes `after` in `tx` as `before` (as read, or null when new) becomes it: the record with only
 * `held` marks, and the member keys whose port changed (all of them, for a record of an older
 * manager).
 */
export function writeGroup(tx: Tx, before: IpGroupRecord | null, after: IpGroupRecord): void {
  const was = new Map((before?.addresses ?? []).map((a) => [a.index, a.port]));
  const moving = before !== null && inline.has(before);
  const member = (index: number) => keys.ipGroupMember(after.tenant, after.name, index);
  for (const a of after.addresses) {
    const old = was.get(a.index);
    was.delete(a.index);
    if (a.port !== undefined && (a.port !== old || moving)) tx.set(member(a.index), a.port);
    if (a.port === undefined && old !== undefined) tx.delete(member(a.index));
  }
  // Addresses that left the group held no port (a group never lets one in use go).
  for (const [index, port] of was) if (port !== undefined) tx.delete(member(index));
  tx.set(keys.ipGroup(after.tenant, after.name), {
    ...after,
    addresses: after.addresses.map(stored),
  });
}

function stored(a: IpGroupAddress): IpGroupAddress {
  return a.port === undefined
    ? { ip: a.ip, index: a.index }
    : { ip: a.ip, index: a.index, held: true };
}
