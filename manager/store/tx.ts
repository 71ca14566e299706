/**
 * A transaction under construction: the reads it depends on become version checks, the writes
 * become mutations, and the callbacks run only once the commit is in.
 */
import type { Check, Entry, Key, Mutation, Store } from "./store.ts";

export class Tx {
  readonly checks: Check[] = [];
  readonly mutations: Mutation[] = [];
  private readonly committed: ((version: string) => void)[] = [];
  private readonly aborted: (() => void)[] = [];

  /** The commit fails if `entry` changed since it was read. */
  check(entry: Pick<Entry<unknown>, "key" | "version">): this {
    this.checks.push({ key: entry.key, version: entry.version });
    return this;
  }

  /** Replaces the check on `entry`'s key with its version now (it was read again). */
  recheck(entry: Pick<Entry<unknown>, "key" | "version">): this {
    const same = JSON.stringify(entry.key);
    const i = this.checks.findIndex((c) => JSON.stringify(c.key) === same);
    if (i < 0) return this.check(entry);
    this.checks[i] = { key: entry.key, version: entry.version };
    return this;
  }

  /** The commit fails if `key` exists. */
  checkAbsent(key: Key): this {
    this.checks.push({ key, version: null });
    return this;
  }

  set(key: Key, value: unknown): this {
    this.mutations.push({ type: "set", key, value });
    return this;
  }

  delete(key: Key): this {
    this.mutations.push({ type: "delete", key });
    return this;
  }

  onCommit(fn: (version: string) => void): this {
    this.committed.push(fn);
    return this;
  }

  onAbort(fn: () => void): this {
    this.aborted.push(fn);
    return this;
  }

  /** Commits; true when it went in, false when a check failed (the caller re-reads and retries). */
  async commit(store: Store): Promise<boolean> {
    let res;
    try {
      res = await store.commit(this.checks, this.mutations);
    } catch (err) {
      this.abort();
      throw err;
    }
    if (res.ok) {
      for (const fn of this.committed) fn(res.version);
    } else {
      this.abort();
    }
    return res.ok;
  }

  /** Runs the abort callbacks: caches built on the uncommitted state drop it. */
  abort(): void {
    for (const fn of this.aborted) fn();
    this.aborted.length = 0;
  }
}
