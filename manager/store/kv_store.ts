/** The embedded default store: Deno KV on a local file (or ":memory:"), one process per file. */
import { dirname } from "node:path";
import {
  type Check,
  type CommitResult,
  type Entry,
  type Key,
  type ListOptions,
  type Mutation,
  type Store,
  StoreLimitError,
  StoreUnavailableError,
} from "./store.ts";

/** Deno KV answers at most this many keys per getMany. */
const GET_MANY_LIMIT = 10;

export async function openKvStore(path: string): Promise<Store> {
  let kv: Deno.Kv;
  let lock: Deno.FsFile | undefined;
  try {
    if (path !== ":memory:") {
      await Deno.mkdir(dirname(path), { recursive: true });
      lock = await lockFor(path);
    }
    kv = await Deno.openKv(path);
  } catch (err) {
    lock?.close();
    if (err instanceof StoreUnavailableError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    const hint = /locked/i.test(why)
      ? " (another process has this file open: one manager process per Deno KV file; use a shared store for replicas)"
      : "";
    throw new StoreUnavailableError(`Cannot open Deno KV store at "${path}": ${why}${hint}`, {
      cause: err,
    });
  }
  return new KvStore(kv, lock);
}

/** How long a remote Deno KV may take to answer the first read before start-up gives up. */
const REMOTE_PROBE_MS = 5000;

/**
 * A Deno KV served over its remote protocol (Deno Deploy, a self-hosted KV server): shared by
 * several processes like etcd. The token goes where Deno's client reads it; a first read proves the
 * server answers, since the client would otherwise retry quietly at every request.
 */
export async function openRemoteKvStore(url: string, accessToken: string): Promise<Store> {
  Deno.env.set("DENO_KV_ACCESS_TOKEN", accessToken);
  let kv: Deno.Kv | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    kv = await Deno.openKv(url);
    const probe = kv.get(["tenant", "admin"]);
    probe.catch(() => {});
    await Promise.race([
      probe,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${REMOTE_PROBE_MS} ms`)),
          REMOTE_PROBE_MS,
        );
      }),
    ]);
  } catch (err) {
    kv?.close();
    const why = err instanceof Error ? err.message : String(err);
    throw new StoreUnavailableError(
      `Cannot reach the remote Deno KV at ${url}: ${why}; check the URL, the access token and that the KV server runs`,
      { cause: err },
    );
  } finally {
    clearTimeout(timer);
  }
  return new KvStore(kv);
}

/**
 * SQLite would let a second process open the file and then fail its writes with "database is
 * locked"; an exclusive lock beside the file turns that into a clear refusal at start.
 */
async function lockFor(path: string): Promise<Deno.FsFile> {
  const file = await Deno.open(`${path}.lock`, { create: true, write: true });
  if (!(await file.tryLock(true))) {
    file.close();
    throw new StoreUnavailableError(
      `Cannot open Deno KV store at "${path}": another process has it open (${path}.lock is locked). ` +
        "One manager process per Deno KV file; stop the other one, or use a shared store for replicas",
    );
  }
  return file;
}

class KvStore implements Store {
  constructor(private readonly kv: Deno.Kv, private readonly lock?: Deno.FsFile) {}

  async get<T>(key: Key): Promise<Entry<T>> {
    const res = await this.kv.get<T>(key as Deno.KvKey);
    return { key, value: res.value, version: res.versionstamp };
  }

  async getMany<T>(keys: Key[]): Promise<Entry<T>[]> {
    const out: Entry<T>[] = [];
    for (let i = 0; i < keys.length; i += GET_MANY_LIMIT) {
      const batch = keys.slice(i, i + GET_MANY_LIMIT) as Deno.KvKey[];
      const res = await this.kv.getMany<T[]>(batch);
      for (let j = 0; j < res.length; j++) {
        out.push({ key: keys[i + j], value: res[j].value, version: res[j].versionstamp });
      }
    }
    return out;
  }

  async *list<T>(prefix: Key, options: ListOptions = {}): AsyncIterable<Entry<T>> {
    const iter = this.kv.list<T>({ prefix: prefix as Deno.KvKey }, {
      limit: options.limit,
      reverse: options.reverse,
      batchSize: Math.min(options.limit ?? 500, options.page ?? 500, 500),
    });
    for await (const res of iter) {
      yield { key: res.key as Key, value: res.value, version: res.versionstamp };
    }
  }

  async commit(checks: Check[], mutations: Mutation[]): Promise<CommitResult> {
    const op = this.kv.atomic();
    for (const c of checks) op.check({ key: c.key as Deno.KvKey, versionstamp: c.version });
    for (const m of mutations) {
      if (m.type === "set") op.set(m.key as Deno.KvKey, m.value);
      else op.delete(m.key as Deno.KvKey);
    }
    let res;
    try {
      res = await op.commit();
    } catch (err) {
      // Deno KV refuses an atomic over 100 checks, 1000 mutations or 800 KiB.
      if (err instanceof TypeError && /too many|too large/i.test(err.message)) {
        throw new StoreLimitError(err.message, { cause: err });
      }
      throw err;
    }
    return res.ok ? { ok: true, version: res.versionstamp } : { ok: false };
  }

  close(): void {
    this.kv.close();
    this.lock?.close();
  }
}
