/**
 * A list-watch of one kind of object, kept in memory: the client library's ListWatch lists, then
 * watches from the list's resourceVersion, resumes from the last one it saw when a watch ends, and
 * lists again on 410 Gone. What it leaves to us: asking for bookmarks (so a quiet watch is not cut
 * as idle and resumes from a recent version), and starting again, with backoff, after an error.
 */
import { type KubeConfig, ListWatch, Watch } from "@kubernetes/client-node";
import type { Logger } from "@knitter/common";
import type { KubeList } from "./kube.ts";

export interface Handlers<T> {
  add?(obj: T): void;
  update?(obj: T): void;
  delete?(obj: T): void;
}

const FIRST_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 30_000;

export class Informer<T extends { metadata?: { name?: string; namespace?: string } }> {
  private readonly lw: ListWatch<T & object>;
  private stopped = false;
  private backoff = FIRST_BACKOFF_MS;
  private retry?: ReturnType<typeof setTimeout>;
  private syncedOnce = false;
  private readonly synced: Promise<void>;
  private markSynced!: () => void;
  /** Errors seen (a watch or a list that failed), for tests and the log. */
  errors = 0;

  constructor(
    readonly what: string,
    kc: KubeConfig,
    path: string,
    list: () => Promise<KubeList<T>>,
    handlers: Handlers<T>,
    private readonly log: Logger,
  ) {
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    const listed = async () => {
      const result = await list();
      this.backoff = FIRST_BACKOFF_MS;
      // The library stores the items after this returns: mark synced once it has.
      setTimeout(() => this.onSynced(), 0);
      return result as KubeList<T & object> & { metadata: object };
    };
    // deno-lint-ignore no-explicit-any
    this.lw = new ListWatch<T & object>(path, bookmarking(kc), listed as any, false);
    if (handlers.add) this.lw.on("add", handlers.add);
    if (handlers.update) this.lw.on("update", handlers.update);
    if (handlers.delete) this.lw.on("delete", handlers.delete);
    this.lw.on("error", (err: unknown) => this.failed(err));
  }

  async start(): Promise<void> {
    await this.lw.start();
  }

  /** Resolves once the first list is in memory. */
  whenSynced(): Promise<void> {
    return this.synced;
  }

  get isSynced(): boolean {
    return this.syncedOnce;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.lw.list(namespace);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.lw.stop();
  }

  private onSynced(): void {
    if (this.syncedOnce) return;
    this.syncedOnce = true;
    this.markSynced();
  }

  private failed(err: unknown): void {
    this.errors++;
    if (this.stopped) return;
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    this.log.warn("watch failed; starting again", {
      what: this.what,
      error: String((err as Error)?.message ?? err),
      retryInMs: wait,
    });
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      if (!this.stopped) this.lw.start().catch((e) => this.failed(e));
    }, wait);
  }
}

/** The library's watch with bookmarks asked for: they keep the resume point fresh. */
function bookmarking(kc: KubeConfig): Watch {
  const inner = new Watch(kc);
  const outer = Object.create(inner) as Watch;
  outer.watch = (path, query, callback, done) =>
    inner.watch(path, { ...query, allowWatchBookmarks: true }, callback, done);
  return outer;
}
