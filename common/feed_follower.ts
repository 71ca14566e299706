/**
 * The one follower of the manager's change feed, used by the agent (remote.ts) and the monitor
 * (port_index.ts). It takes a cursor, lists everything, then long-polls from the cursor, and looks
 * after itself:
 *
 * - a feed that answers 410 (the cursor is too old, or the manager restarted: another epoch) is
 *   listed again, and followed from the new cursor;
 * - a failed poll (the manager down, refusing, 5xx) is retried from the same cursor after a
 *   growing backoff, so a short outage costs no list;
 * - a poll that has not answered `waitSeconds + hangMs` after it was asked (a connection dropped
 *   half-open, a stalled manager) is abandoned and counts as failed;
 * - `stale` says that the feed has not answered for longer than a live one ever stays silent
 *   (`waitSeconds + hangMs`): what the follower holds may be behind. Readiness uses it.
 * @module
 */
import { Backoff, type BackoffOptions, type Clock, systemClock } from "./backoff.ts";
import type { Logger } from "./log.ts";
import { type FeedEvent, ManagerUnavailableError } from "./manager_client.ts";

/** The calls of the manager's API a follower makes (ManagerClient has them). */
export interface FeedSource {
  feedCursor(signal?: AbortSignal): Promise<string>;
  feedSince(
    cursor: string,
    timeoutS: number,
    signal?: AbortSignal,
  ): Promise<{ cursor: string; events: FeedEvent[] } | "expired">;
  /** The feed as one streamed answer (ManagerClient.feedStream); absent: long polls only. */
  feedStream?(
    cursor: string,
    heartbeatS: number,
    page: (page: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<"ended" | "expired" | "unsupported">;
}

export interface FeedFollowerOptions {
  /** For the log and the readiness reasons: "ports", "the manager's feed". */
  what: string;
  source: FeedSource;
  /**
   * Lists everything and replaces what the caller holds with it (called after a cursor is taken,
   * so that nothing that happens during the list is lost: it is in the feed after the cursor).
   */
  relist(signal: AbortSignal): Promise<void>;
  /** One page of events, in order. */
  apply(events: FeedEvent[]): void;
  /** How long the manager may hold a poll open when nothing happens (default 25 s). */
  waitSeconds?: number;
  /** How much longer than that a poll may take before it is abandoned as hung (default 15 s). */
  hangMs?: number;
  /**
   * Follow one streamed answer (a page a line, an empty one every `waitSeconds`) instead of a
   * long poll a page, when the source can; a manager that predates streams is long-polled.
   */
  stream?: boolean;
  /** Between failed attempts (default 200 ms doubling to 5 s, less up to 20% at random). */
  backoff?: BackoffOptions;
  clock?: Clock;
  log: Logger;
}

export interface FeedHealth {
  what: string;
  /** The first list is in. */
  synced: boolean;
  /** Nothing heard from the feed for longer than a live one stays silent. */
  stale: boolean;
  lastAliveMsAgo: number;
  /** Failed polls and lists. */
  errors: number;
  /** Lists made: the first, then one after each 410 or failed list. */
  lists: number;
  /** Polls abandoned because they outlived the hang deadline. */
  hung: number;
}

export class FeedFollower {
  private readonly waitS: number;
  private readonly deadlineMs: number;
  private readonly clock: Clock;
  private readonly backoff: Backoff;
  private stopping = new AbortController();
  private loop?: Promise<void>;
  private cursor?: string;
  private lastAlive: number;
  private syncedOnce = false;
  private readonly synced: Promise<void>;
  private markSynced!: () => void;
  errors = 0;
  lists = 0;
  hung = 0;
  /** Whether the feed is followed by a stream now (false: long polls). */
  streaming: boolean;

  constructor(private readonly o: FeedFollowerOptions) {
    this.waitS = o.waitSeconds ?? 25;
    this.deadlineMs = this.waitS * 1000 + (o.hangMs ?? 15_000);
    this.clock = o.clock ?? systemClock;
    this.backoff = new Backoff({ firstMs: 200, maxMs: 5000, jitter: 0.2, ...o.backoff });
    this.lastAlive = this.clock.now();
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    this.streaming = (o.stream ?? false) && o.source.feedStream !== undefined;
  }

  /**
   * Takes a cursor and lists once, then follows in the background. Throws when that first list
   * fails; nothing runs then, and start() may be called again. Called when already following,
   * it does nothing.
   */
  async start(): Promise<void> {
    if (this.loop) return;
    if (this.stopping.signal.aborted) this.stopping = new AbortController();
    await this.list();
    this.loop ??= this.follow();
  }

  /** Resolves once the first list is in. */
  whenSynced(): Promise<void> {
    return this.synced;
  }

  get isSynced(): boolean {
    return this.syncedOnce;
  }

  /** Nothing heard for longer than a live feed stays silent: what was listed may be behind. */
  get isStale(): boolean {
    return this.clock.now() - this.lastAlive > this.deadlineMs;
  }

  health(): FeedHealth {
    return {
      what: this.o.what,
      synced: this.syncedOnce,
      stale: this.isStale,
      lastAliveMsAgo: this.clock.now() - this.lastAlive,
      errors: this.errors,
      lists: this.lists,
      hung: this.hung,
    };
  }

  /** Why this follower's data may not be acted on; undefined when it is current. */
  notReady(): string | undefined {
    if (!this.syncedOnce) return `${this.o.what}: not listed yet`;
    if (!this.isStale) return undefined;
    return `${this.o.what}: nothing heard for ${
      Math.round((this.clock.now() - this.lastAlive) / 1000)
    } s (a live feed answers within ${Math.round(this.deadlineMs / 1000)} s)`;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    this.loop = undefined;
  }

  private async list(): Promise<void> {
    const signal = this.stopping.signal;
    const cursor = await this.bounded((s) => this.o.source.feedCursor(s), signal);
    await this.bounded((s) => this.o.relist(s), signal);
    this.cursor = cursor;
    this.lists++;
    this.alive();
    if (!this.syncedOnce) {
      this.syncedOnce = true;
      this.markSynced();
    }
  }

  private async follow(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        if (this.cursor === undefined) await this.list();
        if (this.streaming) {
          await this.followStream(signal);
          continue;
        }
        const page = await this.bounded(
          (s) => this.o.source.feedSince(this.cursor!, this.waitS, s),
          signal,
        );
        this.alive();
        this.backoff.reset();
        if (page === "expired") {
          this.o.log.info("change feed expired (410); listing again", { what: this.o.what });
          this.cursor = undefined;
          continue;
        }
        if (page.events.length > 0) this.o.apply(page.events);
        this.cursor = page.cursor;
      } catch (err) {
        if (signal.aborted) return;
        this.errors++;
        const wait = this.backoff.next();
        const fields = { what: this.o.what, error: messageOf(err), retryInMs: wait };
        // The manager away is expected now and then (a restart); anything else is worth a warning.
        if (err instanceof ManagerUnavailableError || err instanceof HungError) {
          this.o.log.info("change feed interrupted; resuming", fields);
        } else this.o.log.warn("change feed failed; resuming", fields);
        await this.clock.sleep(wait, signal);
      }
    }
  }

  /**
   * Follows one stream until it ends: each page applied as it comes. The manager writes a line at
   * least every `waitSeconds`; a stream silent for longer than the hang deadline is abandoned
   * (HungError). An expired cursor is listed again; a manager without streams is long-polled from
   * then on; a stream that ended before its first page counts as a failed attempt (backoff).
   */
  private async followStream(stop: AbortSignal): Promise<void> {
    // Stopped as the list before it ended: a listener added now would never run, and the stream
    // would outlive stop().
    if (stop.aborted) return;
    const mine = new AbortController();
    const onStop = () => mine.abort(stop.reason);
    stop.addEventListener("abort", onStop, { once: true });
    let heard = this.clock.now();
    let pages = 0;
    let late = false;
    const watchdog = (async () => {
      while (!mine.signal.aborted) {
        await this.clock.sleep(heard + this.deadlineMs - this.clock.now(), mine.signal);
        if (mine.signal.aborted) return;
        if (this.clock.now() - heard >= this.deadlineMs) {
          late = true;
          mine.abort(new HungError(`no line within ${Math.round(this.deadlineMs / 1000)} s`));
        }
      }
    })();
    try {
      const outcome = await this.o.source.feedStream!(this.cursor!, this.waitS, (page) => {
        heard = this.clock.now();
        pages++;
        this.alive();
        this.backoff.reset();
        if (page.events.length > 0) this.o.apply(page.events);
        this.cursor = page.cursor;
      }, mine.signal);
      if (outcome === "expired") {
        this.o.log.info("change feed expired (410); listing again", { what: this.o.what });
        this.cursor = undefined;
      } else if (outcome === "unsupported") {
        this.o.log.info("the manager does not stream its feed; long-polling it", {
          what: this.o.what,
        });
        this.streaming = false;
      } else if (pages === 0) {
        throw new ManagerUnavailableError(
          "the manager ended the feed stream before its first page",
        );
      }
    } catch (err) {
      if (late) {
        this.hung++;
        throw new HungError(
          `${this.o.what}: the manager's feed stream was silent for ${
            Math.round(this.deadlineMs / 1000)
          } s; it was abandoned`,
        );
      }
      throw err;
    } finally {
      stop.removeEventListener("abort", onStop);
      if (!mine.signal.aborted) mine.abort();
      await watchdog;
    }
  }

  /** `call`, abandoned (aborted, and a HungError thrown) when it outlives the deadline. */
  private async bounded<T>(
    call: (signal: AbortSignal) => Promise<T>,
    stop: AbortSignal,
  ): Promise<T> {
    const mine = new AbortController();
    const onStop = () => mine.abort(stop.reason);
    stop.addEventListener("abort", onStop, { once: true });
    let late = false;
    const timer = this.clock.sleep(this.deadlineMs, mine.signal).then(() => {
      if (mine.signal.aborted) return;
      late = true;
      mine.abort(new HungError(`no answer within ${Math.round(this.deadlineMs / 1000)} s`));
    });
    try {
      const answer = call(mine.signal);
      // A call that does not honour its signal is still left behind.
      const abandoned = new Promise<never>((_, reject) =>
        mine.signal.addEventListener("abort", () => reject(mine.signal.reason), { once: true })
      );
      abandoned.catch(() => {});
      return await Promise.race([answer, abandoned]);
    } catch (err) {
      if (late) {
        this.hung++;
        throw new HungError(
          `${this.o.what}: the manager did not answer within ${
            Math.round(this.deadlineMs / 1000)
          } s; the request was abandoned`,
        );
      }
      throw err;
    } finally {
      stop.removeEventListener("abort", onStop);
      if (!mine.signal.aborted) mine.abort();
      await timer;
    }
  }

  private alive(): void {
    this.lastAlive = this.clock.now();
  }
}

/** A request to the manager outlived its deadline and was abandoned. */
export class HungError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HungError";
  }
}

function messageOf(err: unknown): string {
  return String((err as Error)?.message ?? err);
}
