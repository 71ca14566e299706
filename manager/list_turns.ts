/**
 * Lists give way to calls (issue 33). A list of thousands of ports is milliseconds of the manager's
 * one thread (reading and decoding the store's values), and another tenant's call that comes in
 * meanwhile would wait behind all of it. So a list reads in pages and, between two pages, lets the
 * event loop turn and then waits while calls (any caller's) are in progress: an admitted call waits
 * for one page at most. The wait is capped (`maxWaitMs` a page), so a steady stream of calls slows
 * lists but never stops them.
 *
 * Lists read their pages one at a time across the manager, and while other lists wait for their
 * page, or calls are in progress or ended within RECENT_CALL_MS, each page is followed by a pause
 * (`paceMs`) before the next: a request still on its way in (not yet admitted, so not yet a call)
 * then meets at most one page between two of its steps, not one of every list in progress nor a
 * whole list. A list alone reads at full speed; beside others' calls, a list of 1,000 ports takes
 * about 10 ms more. What a list answers does not
 * change (the same listing, in the same order).
 * @module
 */
import { setImmediate } from "node:timers";
import { type Clock, Mutex, systemClock } from "@knitter/common";

/** Entries a list reads at once before it gives way (the store's page: store.ts, ListOptions). */
export const LIST_PAGE = 100;

/** How recent a call must be for lists to go on pacing their pages (callers come back soon). */
const RECENT_CALL_MS = 100;

export class ListTurns {
  private calls = 0;
  private readonly waiters = new Set<() => void>();
  private readonly pages = new Mutex();
  /** Lists reading a page or waiting for their turn to. */
  private reading = 0;
  /** When the last call ended (clock ms). */
  private lastCallEnded = -Infinity;

  constructor(
    readonly maxWaitMs = 10,
    private readonly clock: Clock = systemClock,
    readonly paceMs = 1,
  ) {}

  /** A call starts; the function answered ends it (once, however often it is called). */
  call(): () => void {
    this.calls++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.lastCallEnded = this.clock.now();
      if (--this.calls > 0) return;
      for (const wake of this.waiters) wake();
    };
  }

  /** Reads one page of a list: one list's page at a time, paced while other lists wait. */
  async page<T>(read: () => Promise<T>): Promise<T> {
    this.reading++;
    try {
      return await this.pages.run(async () => {
        const page = await read();
        if (this.reading > 1 || this.callsAround()) await this.clock.sleep(this.paceMs);
        return page;
      });
    } finally {
      this.reading--;
    }
  }

  /** Whether calls are in progress or one ended within RECENT_CALL_MS: others use the manager. */
  private callsAround(): boolean {
    return this.calls > 0 || this.clock.now() - this.lastCallEnded < RECENT_CALL_MS;
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
