/**
 * `check --repair`: mends what `check` reports and a manager can mend without a judgement call,
 * each in commits of a bounded size that are correct on their own, so an interrupted repair is
 * simply run again:
 *
 * - quarantine records of the old shape (by index only, issue 33) move to the current one (by
 *   the end of their quarantine), so that an allocation ends a bounded number of them per commit;
 *   so do fixed MAC quarantine records of the old shape (by MAC only), which nothing ended;
 * - a network's quarantine count, missing (an older manager's network) or wrong, is counted again
 *   (service/quarantine_count.ts);
 * - what a network that no longer exists left behind (its delete interrupted before its follow-up
 *   commits: quarantine records, pool chunks) is deleted;
 * - entries of a node's conflict report that its head does not name (a report's write or drop
 *   interrupted) are deleted (service/conflict_records.ts);
 * - ports of a tenant on another tenant's (public) network that a manager older than tenant-scoped
 *   keys stored under their bare ID move to "tenant/id", also after a start's upgrade ran and
 *   marked the store done (service/upgrade.ts): a replica not yet upgraded may have written some.
 */
import { keys, type NetworkRecord } from "./model.ts";
import {
  listQuarantine,
  type MacQuarantineRecord,
  type QuarantineRecord,
  SWEEP_PER_COMMIT,
} from "./service/quarantine.ts";
import { countProblem, recount } from "./service/quarantine_count.ts";
import { dropLeftovers, networkIdsWithLeftovers } from "./service/network_leftovers.ts";
import { dropStray, strayGenerations } from "./service/conflict_records.ts";
import { moveForeignPortKeys } from "./service/upgrade.ts";
import type { Entry, Store } from "./store/store.ts";
import { Tx } from "./store/tx.ts";

/** Runs the repairs; returns one line per change made. */
export async function repairStore(store: Store): Promise<string[]> {
  const done: string[] = [];
  const networks = new Map<string, NetworkRecord>();
  for await (const e of store.list<NetworkRecord>(keys.networks())) {
    if (e.value) networks.set(e.value.id, e.value);
  }
  for (const net of networks.values()) {
    const moved = await moveLegacyQuarantine(store, net);
    if (moved > 0) {
      done.push(
        `network "${net.tenant}/${net.name}": moved ${moved} quarantine record(s) of the old shape`,
      );
    }
    await recountQuarantine(store, net, done);
    const macs = await moveLegacyMacQuarantine(store, net);
    if (macs > 0) {
      done.push(
        `network "${net.tenant}/${net.name}": moved or ended ${macs} fixed MAC quarantine record(s) of the old shape`,
      );
    }
  }
  // The IDs first, then the networks again: a network made meanwhile is not taken for gone.
  const ids = await networkIdsWithLeftovers(store);
  const alive = new Set<string>();
  for await (const e of store.list<NetworkRecord>(keys.networks())) alive.add(e.value!.id);
  for (const id of ids) {
    if (alive.has(id)) continue;
    await dropLeftovers(store, id);
    done.push(`deleted the leftovers of network ${id}, which does not exist`);
  }
  const { moved } = await moveForeignPortKeys(store);
  if (moved > 0) {
    done.push(`moved ${moved} port(s) of tenants on public networks to tenant-scoped keys`);
  }
  for (const g of await strayGenerations(store)) {
    if (await dropStray(store, g)) {
      done.push(
        `node "${g.node}": deleted ${g.entries} conflict report entries no head names (generation ${g.generation})`,
      );
    }
  }
  return done;
}

/**
 * Moves a network's old-shape quarantine records, {@link SWEEP_PER_COMMIT} per commit, each checked:
 * a manager running meanwhile may end one (and hand its address out), which must not come back.
 */
async function moveLegacyQuarantine(store: Store, net: NetworkRecord): Promise<number> {
  let moved = 0;
  for (;;) {
    const batch: Entry<QuarantineRecord>[] = [];
    const prefix = keys.legacyQuarantines(net.id);
    for await (const e of store.list<QuarantineRecord>(prefix, { limit: SWEEP_PER_COMMIT })) {
      batch.push(e);
    }
    if (batch.length === 0) return moved;
    const tx = new Tx();
    for (const e of batch) {
      const until = Date.parse(e.value!.until);
      tx.check(e).delete(e.key).set(
        keys.quarantine(net.id, until, e.key.at(-1) as number),
        e.value,
      );
    }
    // A lost race re-reads: the records it moves are those still there.
    if (await tx.commit(store)) moved += batch.length;
  }
}

/**
 * Moves a network's fixed MAC quarantine records of the old shape (by MAC only, which nothing
 * ended) to the current one, by their end, which their address's record has too, so that the
 * address's end ends them; those that have ended are deleted. Each checked, as above.
 */
async function moveLegacyMacQuarantine(store: Store, net: NetworkRecord): Promise<number> {
  let moved = 0;
  for (;;) {
    const tx = new Tx();
    let n = 0;
    for await (const e of store.list<MacQuarantineRecord>(keys.macQuarantines(net.id))) {
      if (e.key.length !== 3) continue;
      const until = Date.parse(e.value!.until);
      tx.check(e).delete(e.key);
      if (until > Date.now()) {
        tx.set(keys.macQuarantine(net.id, e.key[2] as string, until), e.value);
      }
      if (++n === SWEEP_PER_COMMIT) break;
    }
    if (n === 0) return moved;
    if (await tx.commit(store)) moved += n;
  }
}

/** Counts a network's quarantine records again when its count is missing or wrong. */
async function recountQuarantine(store: Store, net: NetworkRecord, done: string[]): Promise<void> {
  const list = () => listQuarantine(store, net.id, Date.now());
  if (!(await countProblem(store, net.id, { ...await list(), now: Date.now() }))) return;
  const where = `network "${net.tenant}/${net.name}"`;
  const n = await recount(store, net.id, list);
  done.push(
    n === null
      ? `${where}: its quarantine kept changing while it was counted; run check --repair again`
      : `${where}: counted ${n} quarantine record(s)`,
  );
}
