/**
 * Lists give way to calls (issue 33). A list of thousands of ports is milliseconds of the manager's
 * one thread (reading and decoding the store's values), and another tenant's call that comes in
 * meanwhile would wait behind all of it. So a list reads in pages and, between two pages, lets the
 * event loop turn and then waits while calls (any caller's) are in progress: a call waits for one
 * page at most. Lists read their pages one at a time across the manager (the read and decoding of
 * a page is the costly part), so that however many lists run, what another request waits for
 * between two of its own steps is one page. The wait is capped (`maxWaitMs` a page), so a steady stream of calls slows lists
 * but never stops them. What a list answers does not change (the same listing, in the same order).
 * @module
 */
import { setImmediate } from "node:timers";
import { type Clock, systemClock } from "../common/backoff.ts";
import { Mutex } from "../common/mutex.ts";

/** Entries a list reads at once before it gives way (the store's page: store.ts, ListOptions). */
export const LIST_PAGE = 100;

export class ListTurns {
  private calls = 0;
  private readonly waiters = new Set<() => void>();
  private readonly pages = new Mutex();

  constructor(readonly maxWaitMs = 10, private readonly clock: Clock = systemClock) {}

  /** A call starts; the function answered ends it (once, however often it is called). */
  call(): () => void {
    this.calls++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.calls > 0) return;
      for (const wake of this.waiters) wake();
    };
  }

  /** Reads one page of a list: one list's page at a time. */
  page<T>(read: () => Promise<T>): Promise<T> {
    return this.pages.run(read);
  }

  /** Lists waiting now for calls to end. */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * Between two pages of a list: one turn of the event loop (so that requests that arrived are
   * read), then until no call is in progress, at most maxWaitMs.
   */
  async giveWay(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.calls === 0) return;
    const timeUp = new AbortController();
    let wake!: () => void;
    const idle = new Promise<void>((resolve) => wake = resolve);
    this.waiters.add(wake);
    try {
      await Promise.race([idle, this.clock.sleep(this.maxWaitMs, timeUp.signal)]);
    } finally {
      this.waiters.delete(wake);
      timeUp.abort();
    }
  }
}
