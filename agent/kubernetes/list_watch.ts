/**
 * Following objects through the API server with the node's own credentials: a list, then a watch
 * from the list's resourceVersion with bookmarks and a server-side timeout; a clean end resumes
 * from the last version seen; an ERROR (410 Expired), a failure, or no sign of life for
 * `deadlineMs` (a watch dropped half-open) lists again after a backoff. Every list hands over all
 * the objects, so a change missed while the agent was down or deaf is seen then. Used for the
 * node's pods (node_pod_watch.ts) and its Node object (node_watch.ts).
 */
import { Backoff, type Logger, sleep } from "@knitter/common";
import { KubeApiError, type Listed, type WatchEvent, type WatchOptions } from "./kube_pods.ts";

export interface ListWatchHandler<T> {
  /** Every object, after each list (one not in it is gone). */
  listed(items: T[]): void;
  changed(item: T, type: "ADDED" | "MODIFIED" | "DELETED"): void;
}

/** Where the objects come from: one kind, narrowed by the caller (a field selector). */
export interface ListWatchSource<T> {
  /** What is followed, in log lines: "the node's pods". */
  what: string;
  /** What to do when the API server answers 403. */
  forbidden: string;
  list(): Promise<Listed<T>>;
  watch(from: string, opts: WatchOptions<T>): Promise<void>;
}

export interface ListWatchSettings {
  /** The API server ends each watch after this (a sign of life at least that often). */
  timeoutSeconds: number;
  /** No event, bookmark or end for this long: the watch is dead. */
  deadlineMs: number;
}

/** Thrown inside the loop: the watch must list again (410, an ERROR line, a dead watch). */
class Relist extends Error {}

export class ListWatch<T> {
  private readonly stopping = new AbortController();
  private running?: Promise<void>;
  private readonly backoff = new Backoff({ firstMs: 200, maxMs: 30_000, jitter: 0.2 });

  constructor(
    private readonly source: ListWatchSource<T>,
    private readonly handler: ListWatchHandler<T>,
    private readonly log: Logger,
    private readonly settings: ListWatchSettings = { timeoutSeconds: 30, deadlineMs: 45_000 },
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async loop(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        const list = await this.source.list();
        this.handler.listed(list.items);
        let version = list.resourceVersion;
        for (;;) {
          version = await this.watchOnce(version);
          this.backoff.reset();
          if (signal.aborted) return;
        }
      } catch (err) {
        if (signal.aborted) return;
        const retryInMs = this.backoff.next();
        this.log.warn(`${this.source.what}: listing again`, {
          error: String((err as Error)?.message ?? err),
          retryInMs,
          ...(err instanceof KubeApiError && err.status === 403
            ? { fix: this.source.forbidden }
            : {}),
        });
        await sleep(retryInMs, signal);
      }
    }
  }

  /** One watch, to its end; answers the last resourceVersion seen. */
  private async watchOnce(from: string): Promise<string> {
    let version = from;
    const dead = new AbortController();
    let timer = setTimeout(() => dead.abort(), this.settings.deadlineMs);
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => dead.abort(), this.settings.deadlineMs);
    };
    try {
      await this.source.watch(from, {
        timeoutSeconds: this.settings.timeoutSeconds,
        signal: AbortSignal.any([this.stopping.signal, dead.signal]),
        onEvent: (e: WatchEvent<T>) => {
          alive();
          if (e.type === "ERROR") throw new Relist(`the watch ended: ${e.code} ${e.message}`);
          version = e.resourceVersion || version;
          if (e.type !== "BOOKMARK") this.handler.changed(e.object, e.type);
        },
      });
    } catch (err) {
      if (dead.signal.aborted && !this.stopping.signal.aborted) {
        throw new Relist(`no sign of life for ${this.settings.deadlineMs} ms`);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return version;
  }
}
