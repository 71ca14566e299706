/**
 * The manager's narrow view of its state: versioned reads, prefix listing and one atomic commit
 * with version checks. Everything the allocator and the API need fits through these four calls,
 * so a shared backend (etcd, a remote KV) can sit behind the same interface.
 */

export type KeyPart = string | number;
export type Key = readonly KeyPart[];

/** A read value and the version it had; both null when the key is absent. */
export interface Entry<T> {
  key: Key;
  value: T | null;
  version: string | null;
}

/** Commit only if `key` still has `version` (null: the key must be absent). */
export interface Check {
  key: Key;
  version: string | null;
}

export type Mutation =
  | { type: "set"; key: Key; value: unknown }
  | { type: "delete"; key: Key };

export type CommitResult = { ok: true; version: string } | { ok: false };

export interface ListOptions {
  limit?: number;
  reverse?: boolean;
  /**
   * At most this many entries read (and decoded) at once; a list that gives way to other requests
   * between pages asks for small ones (list_turns.ts). Default: the backend's (500).
   */
  page?: number;
}

export interface Store {
  get<T>(key: Key): Promise<Entry<T>>;
  getMany<T>(keys: Key[]): Promise<Entry<T>[]>;
  list<T>(prefix: Key, options?: ListOptions): AsyncIterable<Entry<T>>;
  commit(checks: Check[], mutations: Mutation[]): Promise<CommitResult>;
  close(): void;
}

/**
 * What one commit may hold, on every backend: Deno KV's limits, to which etcd is held too, so that
 * whatever one backend holds the other can. Code that loops over data into commits sizes its
 * commits by these.
 */
export const COMMIT_LIMITS = {
  checks: 100,
  mutations: 1000,
  valueBytes: 65536,
  keyBytes: 2048,
  commitBytes: 800 * 1024,
} as const;

/**
 * Thrown by a backend when one commit would exceed its limits (checks, mutations, sizes): the
 * request asked for too much at once, and asking for less succeeds.
 */
export class StoreLimitError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StoreLimitError";
  }
}

/** Thrown by a backend when it cannot be reached or refuses the operation for its own reasons. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StoreUnavailableError";
  }
}
