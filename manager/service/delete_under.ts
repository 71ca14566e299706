/**
 * Deletes every key under a prefix in commits of a bounded size, none checked: for keys nothing
 * writes any more (a deleted network's leftovers, a replaced conflict report's entries).
 */
import { COMMIT_LIMITS, type Key, type Mutation, type Store } from "../store/store.ts";

/** Deletes every key under `prefix`, half a commit's worth of writes per commit. */
export async function deleteUnder(store: Store, prefix: Key): Promise<void> {
  const per = COMMIT_LIMITS.mutations / 2;
  for (;;) {
    const batch: Mutation[] = [];
    for await (const e of store.list(prefix, { limit: per })) {
      batch.push({ type: "delete", key: e.key });
    }
    if (batch.length === 0) return;
    await store.commit([], batch);
  }
}
