/**
 * A list-watch of one kind of object, kept in memory and supervised: it lists, watches from the
 * list's resourceVersion, and decides for itself whether the watch is still alive. The client
 * library's watch is used for the request only; whether it reports a broken connection is not
 * relied on (under Deno a connection dropped without a close is never reported). The supervision:
 *
 * - every watch asks the server to end it cleanly after `timeoutSeconds` (and for bookmarks), so a
 *   live watch shows a sign of life (an event, a bookmark, its clean end) at least that often; one
 *   that shows none for `deadlineMs` is dead: it is abandoned and a fresh list is made;
 * - every `probeMs` a list with limit=1 asks how many objects the server holds; when that differs
 *   from the cache, it asks again 2 s later, and when it still differs with no event heard in
 *   between, the watch is deaf: same remedy;
 * - an ERROR 410 Expired, a failed list or watch request, an abrupt end: a fresh list, after an
 *   exponential backoff for failures (200 ms to 30 s); a clean end resumes from the last version.
 *
 * Handlers hear every change once, a replaced object (same name, new UID) as a delete of the old
 * one and an add of the new one, also when it happened while the watch was broken (the fresh list
 * is compared with the cache).
 */
import { type KubeConfig, Watch } from "@kubernetes/client-node";
import { Backoff, type Logger, sleep } from "@knitter/common";
import type { KubeList } from "./kube.ts";

export interface Handlers<T> {
  add?(obj: T): void;
  update?(obj: T): void;
  delete?(obj: T): void;
  /**
   * A fresh list replaced the cache after a break (not the first list). What a list cannot show,
   * an object created and deleted while nobody was watching, is for the caller to look for.
   */
  relisted?(): void;
}

export interface WatchSettings {
  /** Asked of the server for every watch: it ends the watch cleanly after this long. */
  timeoutSeconds: number;
  /** No event, bookmark or clean end for this long: the watch is dead. */
  deadlineMs: number;
  /** How often the server's object count is compared with the cache; 0: never. */
  probeMs: number;
}

/** The API calls an informer makes besides the watch. */
export interface Lister<T> {
  list(): Promise<KubeList<T>>;
  /** How many objects the server holds now (a one-item list); undefined when it cannot say. */
  count?(): Promise<number | undefined>;
}

export interface InformerHealth {
  what: string;
  synced: boolean;
  /** No sign of life within the deadline: whatever happened since is unknown to the monitor. */
  stale: boolean;
  lastAliveMsAgo: number;
  errors: number;
  /** Watches found dead (deadline or probe) and started again with a fresh list. */
  restarts: number;
  lists: number;
}

type Meta = {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
};

type End =
  | { kind: "closed"; ms: number }
  | { kind: "expired" }
  | { kind: "dead"; why: string }
  | { kind: "error"; error: unknown }
  | { kind: "stopped" };

/** A count that differs is checked again this soon; unchanged and nothing heard: deaf. */
const CONFIRM_MS = 2000;
/** A watch that ends cleanly sooner than this did not really run: the next waits a backoff. */
const SHORT_WATCH_MS = 1000;

export class Informer<T extends Meta> {
  private readonly objects = new Map<string, Map<string, T>>();
  private count = 0;
  private resourceVersion = "";
  private readonly watcher: Watch;
  private stopped = false;
  private loop?: Promise<void>;
  /** After a failure: 200 ms doubling to 30 s. */
  private readonly backoff = new Backoff({ firstMs: 200, maxMs: 30_000 });
  /** Aborted by stop(): ends a backoff wait at once. */
  private stopping = new AbortController();
  /** The watch in progress: how to end it, and its number. */
  private current?: { gen: number; finish: (end: End) => void };
  private gen = 0;
  private probeTimer?: ReturnType<typeof setInterval>;
  private probing = false;
  private confirmTimer?: ReturnType<typeof setTimeout>;
  private suspect?: { gen: number; events: number };
  private events = 0;
  private lastAlive = Date.now();
  private syncedOnce = false;
  private readonly synced: Promise<void>;
  private markSynced!: () => void;
  /** Errors seen (a watch or a list that failed), for tests and the log. */
  errors = 0;
  restarts = 0;
  lists = 0;
  /** Watches ended by 410 Expired (and listed again). */
  expired = 0;
  /** Watch events applied, by type (metrics.ts). */
  readonly eventCounts = new Map<string, number>();

  constructor(
    readonly what: string,
    kc: KubeConfig,
    private readonly path: string,
    private readonly lister: Lister<T>,
    private readonly handlers: Handlers<T>,
    private readonly settings: WatchSettings,
    private readonly log: Logger,
  ) {
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    this.watcher = new Watch(kc);
    // The library's own inactivity timer (private, 30 s) would race ours; ours decides.
    (this.watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs =
      settings.deadlineMs + 60_000;
  }

  /** Starts listing and watching; answers at once (whenSynced() tells when the list is in). */
  start(): Promise<void> {
    if (this.stopped) this.stopping = new AbortController();
    this.stopped = false;
    this.loop ??= this.run();
    if (this.settings.probeMs > 0) {
      this.probeTimer = setInterval(() => void this.probe(), this.settings.probeMs);
    }
    return Promise.resolve();
  }

  /** Resolves once the first list is in memory. */
  whenSynced(): Promise<void> {
    return this.synced;
  }

  get isSynced(): boolean {
    return this.syncedOnce;
  }

  /** Synced, and alive within the deadline: what the cache says can be acted on. */
  get isFresh(): boolean {
    return this.syncedOnce && !this.isStale;
  }

  get isStale(): boolean {
    return Date.now() - this.lastAlive > this.settings.deadlineMs;
  }

  health(): InformerHealth {
    return {
      what: this.what,
      synced: this.syncedOnce,
      stale: this.isStale,
      lastAliveMsAgo: Date.now() - this.lastAlive,
      errors: this.errors,
      restarts: this.restarts,
      lists: this.lists,
    };
  }

  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(namespace ?? "")?.get(name);
  }

  list(namespace?: string): readonly T[] {
    if (namespace !== undefined) return [...this.objects.get(namespace)?.values() ?? []];
    const out: T[] = [];
    for (const m of this.objects.values()) out.push(...m.values());
    return out;
  }

  get size(): number {
    return this.count;
  }

  /**
   * Abandons the watch and lists again, as when it is found dead: for a caller that learnt from
   * elsewhere (a fresh read) that the cache is behind.
   */
  restart(why: string): void {
    this.current?.finish({ kind: "dead", why });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.probeTimer);
    clearTimeout(this.confirmTimer);
    this.current?.finish({ kind: "stopped" });
    this.stopping.abort();
    await this.loop;
    this.loop = undefined;
  }

  // ---- the loop

  private async run(): Promise<void> {
    let fresh = true;
    while (!this.stopped) {
      try {
        if (fresh) {
          await this.relist();
          fresh = false;
        }
        const end = await this.watchOnce();
        if (end.kind === "stopped") return;
        if (end.kind === "closed") {
          // The server's timeout, or a clean close: resume from the last version seen.
          if (end.ms < SHORT_WATCH_MS) await this.pause();
          else this.backoff.reset();
          continue;
        }
        fresh = true;
        if (end.kind === "error") throw end.error;
        if (end.kind === "expired") {
          this.expired++;
          this.log.info("watch expired (410); listing again", { what: this.what });
        } else {
          this.restarts++;
          this.log.warn("watch dead; listing again", { what: this.what, why: end.why });
        }
      } catch (err) {
        if (this.stopped) return;
        this.errors++;
        fresh = true;
        this.log.warn("watch failed; starting again with a fresh list", {
          what: this.what,
          error: String((err as Error)?.message ?? err),
          retryInMs: this.backoff.peek(),
        });
        await this.pause();
      }
    }
  }

  private async pause(): Promise<void> {
    await sleep(this.backoff.next(), this.stopping.signal);
  }

  /** A fresh list, compared with the cache: handlers hear what changed while we were not looking. */
  private async relist(): Promise<void> {
    // A list that hangs (a connection dropped mid-answer) is a failed one, not a stuck monitor.
    const listed = await within(this.lister.list(), this.settings.deadlineMs, `list ${this.what}`);
    if (this.stopped) return;
    this.lists++;
    const next = new Map<string, Map<string, T>>();
    let n = 0;
    for (const obj of listed.items) {
      const ns = obj.metadata?.namespace ?? "";
      let m = next.get(ns);
      if (!m) next.set(ns, m = new Map());
      if (!m.has(obj.metadata?.name ?? "")) n++;
      m.set(obj.metadata?.name ?? "", obj);
    }
    const old = new Map(this.objects);
    for (const [ns, m] of old) {
      for (const [name, o] of m) {
        const now = next.get(ns)?.get(name);
        if (!now || !sameUid(o, now)) this.handlers.delete?.(o);
      }
    }
    this.objects.clear();
    for (const [ns, m] of next) this.objects.set(ns, m);
    this.count = n;
    for (const [ns, m] of next) {
      for (const [name, o] of m) {
        const before = old.get(ns)?.get(name);
        if (!before || !sameUid(before, o)) this.handlers.add?.(o);
        else if (before.metadata?.resourceVersion !== o.metadata?.resourceVersion) {
          this.handlers.update?.(o);
        }
      }
    }
    this.resourceVersion = listed.metadata?.resourceVersion ?? "";
    this.alive();
    this.backoff.reset();
    if (!this.syncedOnce) {
      this.syncedOnce = true;
      this.markSynced();
    } else this.handlers.relisted?.();
  }

  /** One watch, to its end; the deadline timer ends it when it goes quiet. */
  private watchOnce(): Promise<End> {
    const gen = ++this.gen;
    const started = Date.now();
    this.alive();
    return new Promise<End>((resolve) => {
      let settled = false;
      let controller: AbortController | undefined;
      const finish = (end: End) => {
        if (settled) return;
        settled = true;
        clearInterval(deadline);
        if (this.current?.gen === gen) this.current = undefined;
        controller?.abort();
        resolve(end);
      };
      this.current = { gen, finish };
      const tick = Math.max(50, Math.min(1000, this.settings.deadlineMs / 4));
      const deadline = setInterval(() => {
        const quiet = Date.now() - this.lastAlive;
        if (quiet > this.settings.deadlineMs) {
          finish({
            kind: "dead",
            why: `no event, bookmark or end for ${Math.round(quiet / 1000)} s`,
          });
        }
      }, tick);
      this.watcher.watch(
        this.path,
        {
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: this.settings.timeoutSeconds,
        },
        (type: string, obj: T & { code?: number; message?: string }) => {
          if (settled) return; // a late word of an abandoned watch
          if (type === "ERROR") {
            if (obj.code === 410) finish({ kind: "expired" });
            else finish({ kind: "error", error: new Error(`watch error: ${obj.message}`) });
            return;
          }
          this.apply(type, obj);
        },
        (err: unknown) => {
          if (settled) return;
          if (err === null || err === undefined) {
            finish({ kind: "closed", ms: Date.now() - started });
          } else if (statusOf(err) === 410) finish({ kind: "expired" });
          else finish({ kind: "error", error: err });
        },
      ).then(
        (c) => {
          controller = c;
          if (settled) c.abort();
          else this.alive();
        },
        (err) => finish({ kind: "error", error: err }),
      );
    });
  }

  private apply(type: string, obj: T): void {
    this.events++;
    this.eventCounts.set(type, (this.eventCounts.get(type) ?? 0) + 1);
    this.alive();
    const rv = obj.metadata?.resourceVersion;
    if (type === "BOOKMARK") {
      if (rv) this.resourceVersion = rv;
      return;
    }
    const ns = obj.metadata?.namespace ?? "";
    const name = obj.metadata?.name ?? "";
    let m = this.objects.get(ns);
    const before = m?.get(name);
    if (type === "ADDED" || type === "MODIFIED") {
      if (!m) this.objects.set(ns, m = new Map());
      m.set(name, obj);
      if (!before) {
        this.count++;
        this.handlers.add?.(obj);
      } else if (!sameUid(before, obj)) {
        this.handlers.delete?.(before);
        this.handlers.add?.(obj);
      } else if (before.metadata?.resourceVersion !== rv) this.handlers.update?.(obj);
    } else if (type === "DELETED") {
      if (before && sameUid(before, obj)) {
        m!.delete(name);
        this.count--;
        if (m!.size === 0) this.objects.delete(ns);
      }
      this.handlers.delete?.(obj);
    }
    if (rv) this.resourceVersion = rv;
  }

  /** The server's count against the cache; twice different with nothing heard between: deaf. */
  private async probe(): Promise<void> {
    const cur = this.current;
    if (this.probing || !cur || !this.syncedOnce || !this.lister.count) return;
    this.probing = true;
    try {
      const events = this.events;
      const server = await within(this.lister.count(), this.settings.deadlineMs, "count");
      if (server === undefined || this.current !== cur) return;
      if (server === this.count) {
        this.suspect = undefined;
        return;
      }
      const s = this.suspect;
      if (s && s.gen === cur.gen && s.events === events && this.events === events) {
        cur.finish({
          kind: "dead",
          why: `the server holds ${server}, the watch knows ${this.count} and heard nothing for ${
            Math.round(this.settings.probeMs / 1000)
          } s`,
        });
        this.suspect = undefined;
      } else {
        // Confirmed (or not) soon, not a whole interval later: a live watch delivers in moments.
        this.suspect = { gen: cur.gen, events: this.events };
        clearTimeout(this.confirmTimer);
        this.confirmTimer = setTimeout(
          () => void this.probe(),
          Math.min(CONFIRM_MS, this.settings.probeMs),
        );
      }
    } catch {
      // The API is not answering: the watch's own end or its deadline says what to do.
    } finally {
      this.probing = false;
    }
  }

  private alive(): void {
    this.lastAlive = Date.now();
  }
}

/** `p`, or an error once `ms` have passed without its answer. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

function sameUid(a: Meta, b: Meta): boolean {
  const x = a.metadata?.uid;
  const y = b.metadata?.uid;
  return x === undefined || y === undefined || x === y;
}

function statusOf(err: unknown): number | undefined {
  const e = err as { statusCode?: number; code?: number };
  return e?.statusCode ?? (typeof e?.code === "number" ? e.code : undefined);
}
