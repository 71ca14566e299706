/**
 * The shared store: etcd v3. Several manager processes use one etcd cluster at once; a commit is
 * one etcd transaction whose compares are the version checks, so two replicas can never both win
 * the same bitmap chunk or port. Versions are etcd mod revisions; "absent" is create revision 0.
 *
 * The limits are Deno KV's, so that whatever one backend holds the other can hold too (migration
 * works both ways) and an oversized request fails the same way on both.
 */
import {
  EtcdClient,
  EtcdError,
  type EtcdOptions,
  fromB64,
  type RawKv,
  toB64,
} from "./etcd_client.ts";
import { concat, decodeKey, encodeKey, prefixRange } from "./key_codec.ts";
import {
  type Check,
  COMMIT_LIMITS,
  type CommitResult,
  type Entry,
  type Key,
  type ListOptions,
  type Mutation,
  type Store,
  StoreLimitError,
  StoreUnavailableError,
} from "./store.ts";
import { decodeValue, encodeValue } from "./value_codec.ts";

const LIMITS = COMMIT_LIMITS;

/** Keys read per read-only transaction in getMany, and per page in list. */
const GET_BATCH = 64;
const PAGE = 500;

export interface EtcdStoreOptions extends EtcdOptions {
  /** Prepended to every key, so that several installations can share one etcd. */
  prefix?: string;
}

/** Connects and proves etcd answers: a clear error now beats one at the first request. */
export async function openEtcdStore(options: EtcdStoreOptions): Promise<EtcdStore> {
  const client = new EtcdClient(options);
  const store = new EtcdStore(client, new TextEncoder().encode(options.prefix ?? "knitter/"));
  try {
    await store.status();
  } catch (err) {
    client.close();
    throw err;
  }
  return store;
}

export function formatVersion(revision: string | number): string {
  return String(revision).padStart(20, "0");
}

export function parseVersion(version: string): number {
  return Number(version);
}

export class EtcdStore implements Store {
  /** The highest store revision any answer carried: a cursor no newer than the store. */
  revision = 0;
  /** etcd's cluster ID, as hex: tells one etcd cluster's revisions from another's. */
  clusterId = "";
  private closed = false;
  /** Recent failed compares, for the back-off. */
  private conflicts = 0;

  constructor(readonly client: EtcdClient, readonly prefix: Uint8Array) {}

  /** Checks that etcd answers and has a leader; the answer feeds /readyz. */
  async status(): Promise<{ leader: boolean; revision: number; version: string }> {
    // deno-lint-ignore no-explicit-any
    const s: any = await this.client.call("/v3/maintenance/status", {});
    this.seen(s.header);
    if (!s.leader || s.leader === "0") {
      throw new StoreUnavailableError(
        "etcd has no leader (a majority of its members is down or cut off); the manager answers 503 until it has one",
      );
    }
    return { leader: true, revision: this.revision, version: s.version };
  }

  key(key: Key): Uint8Array {
    return concat(this.prefix, encodeKey(key));
  }

  unkey(raw: string): Key {
    return decodeKey(fromB64(raw).subarray(this.prefix.length));
  }

  async get<T>(key: Key): Promise<Entry<T>> {
    const res = await this.call("/v3/kv/range", { key: toB64(this.key(key)) });
    return this.entry<T>(key, res.kvs?.[0]);
  }

  /** The key as it was at an earlier revision (feed events name the network of their time). */
  async getAt<T>(key: Key, revision: number): Promise<Entry<T>> {
    const res = await this.call("/v3/kv/range", {
      key: toB64(this.key(key)),
      revision: String(revision),
    });
    return this.entry<T>(key, res.kvs?.[0]);
  }

  async getMany<T>(keys: Key[]): Promise<Entry<T>[]> {
    const out: Entry<T>[] = [];
    for (let i = 0; i < keys.length; i += GET_BATCH) {
      const batch = keys.slice(i, i + GET_BATCH);
      const res = await this.call("/v3/kv/txn", {
        success: batch.map((k) => ({ request_range: { key: toB64(this.key(k)) } })),
      });
      batch.forEach((k, j) => {
        out.push(this.entry<T>(k, res.responses?.[j]?.response_range?.kvs?.[0]));
      });
    }
    return out;
  }

  async *list<T>(prefix: Key, options: ListOptions = {}): AsyncIterable<Entry<T>> {
    const range = prefixRange(prefix);
    let start = concat(this.prefix, range.start);
    let end = concat(this.prefix, range.end);
    let left = options.limit ?? Infinity;
    let revision: string | undefined;
    while (left > 0) {
      const res = await this.call("/v3/kv/range", {
        key: toB64(start),
        range_end: toB64(end),
        limit: String(Math.min(left, options.page ?? PAGE, PAGE)),
        sort_order: options.reverse ? "DESCEND" : "ASCEND",
        sort_target: "KEY",
        // Later pages read the same snapshot as the first.
        revision,
      });
      revision ??= res.header?.revision;
      const kvs: RawKv[] = res.kvs ?? [];
      for (const kv of kvs) yield this.entry<T>(this.unkey(kv.key), kv);
      left -= kvs.length;
      if (!res.more || kvs.length === 0) return;
      const last = fromB64(kvs[kvs.length - 1].key);
      if (options.reverse) end = last;
      else start = concat(last, [0x00]);
    }
  }

  async commit(checks: Check[], mutations: Mutation[]): Promise<CommitResult> {
    const compare = checks.map((c) => this.compare(c));
    const ops = this.operations(mutations);
    if (checks.length > LIMITS.checks) {
      throw new StoreLimitError(`${checks.length} checks in one commit (at most ${LIMITS.checks})`);
    }
    let res;
    try {
      res = await this.call("/v3/kv/txn", { compare, success: ops });
    } catch (err) {
      if (err instanceof EtcdError && /too many operations/.test(err.message)) {
        throw new StoreLimitError(
          `etcd refused a transaction of ${ops.length} writes (${err.message}): start etcd with ` +
            `--max-txn-ops=${LIMITS.mutations + 24} or more, as manager/README.md says`,
          { cause: err },
        );
      }
      if (err instanceof EtcdError && /request is too large/.test(err.message)) {
        throw new StoreLimitError(`etcd refused a transaction that large (${err.message})`, {
          cause: err,
        });
      }
      throw err;
    }
    if (!res.succeeded) {
      await this.backOff();
      return { ok: false };
    }
    this.conflicts = Math.max(0, this.conflicts - 1);
    return { ok: true, version: formatVersion(res.header.revision) };
  }

  /**
   * Replicas racing for one pool head would otherwise retry in lockstep until the services give
   * up: the loser waits a random while, longer as conflicts pile up, so that one writer gets
   * through and the others re-read after it.
   */
  private async backOff(): Promise<void> {
    this.conflicts = Math.min(this.conflicts + 1, 8);
    const ms = Math.random() * (1 << this.conflicts);
    await new Promise((r) => setTimeout(r, ms));
  }

  close(): void {
    this.closed = true;
    this.client.close();
  }

  private compare(c: Check): unknown {
    const key = toB64(this.key(c.key));
    // An absent key has create revision 0; a present one has the mod revision it was read at.
    return c.version === null
      ? { key, target: "CREATE", result: "EQUAL", create_revision: "0" }
      : { key, target: "MOD", result: "EQUAL", mod_revision: String(parseVersion(c.version)) };
  }

  /** etcd refuses a key twice in one transaction; as in Deno KV, the last write of a key wins. */
  private operations(mutations: Mutation[]): unknown[] {
    const last = new Map<string, { key: Uint8Array; m: Mutation }>();
    for (const m of mutations) {
      const key = this.key(m.key);
      const id = toB64(key);
      last.delete(id);
      last.set(id, { key, m });
    }
    if (last.size > LIMITS.mutations) {
      throw new StoreLimitError(`${last.size} writes in one commit (at most ${LIMITS.mutations})`);
    }
    let bytes = 0;
    const ops = [];
    for (const [id, { key, m }] of last) {
      if (key.length - this.prefix.length > LIMITS.keyBytes) {
        throw new StoreLimitError(`a key of ${key.length} bytes (at most ${LIMITS.keyBytes})`);
      }
      if (m.type === "delete") {
        ops.push({ request_delete_range: { key: id } });
        bytes += key.length;
        continue;
      }
      const value = encodeValue(m.value);
      if (value.length > LIMITS.valueBytes) {
        throw new StoreLimitError(
          `a value of ${value.length} bytes (at most ${LIMITS.valueBytes})`,
        );
      }
      bytes += key.length + value.length;
      ops.push({ request_put: { key: id, value: toB64(value) } });
    }
    if (bytes > LIMITS.commitBytes) {
      throw new StoreLimitError(`a commit of ${bytes} bytes (at most ${LIMITS.commitBytes})`);
    }
    return ops;
  }

  // deno-lint-ignore no-explicit-any
  private async call(path: string, body: unknown): Promise<any> {
    if (this.closed) throw new StoreUnavailableError("The etcd store is closed");
    let res;
    try {
      res = await this.client.call(path, body);
    } catch (err) {
      if (err instanceof EtcdError && /no leader|timed out|leader changed/.test(err.message)) {
        throw new StoreUnavailableError(`etcd cannot serve the request: ${err.message}`, {
          cause: err,
        });
      }
      throw err;
    }
    this.seen(res.header);
    return res;
  }

  private seen(header: { revision?: string; cluster_id?: string } | undefined): void {
    const rev = Number(header?.revision ?? 0);
    if (rev > this.revision) this.revision = rev;
    if (header?.cluster_id && !this.clusterId) {
      this.clusterId = BigInt(header.cluster_id).toString(16).padStart(16, "0");
    }
  }

  private entry<T>(key: Key, kv: RawKv | undefined): Entry<T> {
    if (!kv) return { key, value: null, version: null };
    return {
      key,
      value: decodeValue(fromB64(kv.value)) as T,
      version: formatVersion(kv.mod_revision ?? "0"),
    };
  }
}
