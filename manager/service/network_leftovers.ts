/**
 * What a network delete leaves for after its own commit, so that the commit stays small whatever
 * the network held: its quarantine records (of addresses and fixed MACs) and their count, and the chunks of its
 * address pool beyond the first 500 (ipam/bitmap_pool.ts destroy). They go in commits of a bounded
 * size, none checked: nothing writes them once the network is gone. An interrupted drop leaves keys
 * of a network that does not exist: `check` reports them and `check --repair` deletes them.
 */
import { keys } from "../model.ts";
import type { Store } from "../store/store.ts";
import { deleteUnder } from "./delete_under.ts";

/** The prefixes of a network's leftovers, each followed by the network's ID. */
export const LEFTOVER_PREFIXES = [
  "quarantine",
  "quarantine_until",
  "quarantine_mac",
  "quarantine_count",
  "ipam",
];

/** Deletes a deleted network's leftovers. */
export async function dropLeftovers(store: Store, networkId: string): Promise<void> {
  // The network's count is the key [prefix, ID] itself, which a listing under it does not answer.
  await store.commit([], [{ type: "delete", key: keys.quarantineCount(networkId) }]);
  for (const prefix of LEFTOVER_PREFIXES) await deleteUnder(store, [prefix, networkId]);
}

/** The IDs of the networks that have leftovers (or are alive): a maintenance listing of them all. */
export async function networkIdsWithLeftovers(store: Store): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const prefix of LEFTOVER_PREFIXES) {
    for await (const e of store.list([prefix])) ids.add(e.key[1] as string);
  }
  return ids;
}
