/**
 * A controller's queue (the monitor's reconciles, the agent's hot-plug): keys, not events. A key queued again while waiting runs once; a key
 * queued while running runs again after; a failed key comes back after a growing delay. Handlers
 * read the current state, so running a key late or twice is harmless.
 */
import { backoffMs } from "./backoff.ts";
import type { Logger } from "./log.ts";

/** A failed key's n-th retry waits 250 ms doubling to 60 s. */
const RETRY = { firstMs: 250, maxMs: 60_000 };

/** Throw from a handler to run the key again later without logging an error. */
export class Requeue extends Error {
  constructor(readonly afterMs: number, message = "requeued") {
    super(message);
  }
}

export class WorkQueue {
  private readonly waiting = new Set<string>();
  private readonly running = new Set<string>();
  private readonly again = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private active = 0;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];
  /** Keys handled, successfully or not. */
  handled = 0;
  /** Keys whose handler failed (a Requeue is no failure). */
  failed = 0;

  constructor(
    readonly name: string,
    private readonly handler: (key: string) => Promise<void>,
    private readonly concurrency: number,
    private readonly log: Logger,
  ) {}

  add(key: string): void {
    if (this.stopped) return;
    if (this.running.has(key)) {
      this.again.add(key);
      return;
    }
    this.waiting.add(key);
    this.pump();
  }

  /** Queues the key after a delay (a later check), unless it is queued sooner. */
  addAfter(key: string, ms: number): void {
    if (this.stopped || this.timers.has(key)) return;
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.add(key);
      }, ms),
    );
  }

  get size(): number {
    return this.waiting.size + this.running.size;
  }

  /** Resolves when nothing is waiting or running (delayed keys do not count). */
  idle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.waiting.clear();
  }

  private pump(): void {
    while (this.active < this.concurrency && this.waiting.size > 0) {
      const key = this.waiting.values().next().value!;
      this.waiting.delete(key);
      this.running.add(key);
      this.active++;
      this.runOne(key).finally(() => {
        this.active--;
        this.running.delete(key);
        this.handled++;
        if (this.again.delete(key)) this.waiting.add(key);
        this.pump();
        if (this.size === 0) {
          for (const wake of this.idleWaiters.splice(0)) wake();
        }
      });
    }
  }

  private async runOne(key: string): Promise<void> {
    try {
      await this.handler(key);
      this.failures.delete(key);
    } catch (err) {
      if (err instanceof Requeue) {
        this.addAfter(key, err.afterMs);
        return;
      }
      this.failed++;
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const wait = backoffMs(n, RETRY);
      this.log.warn("reconcile failed; trying again", {
        queue: this.name,
        key,
        attempt: n,
        retryInMs: wait,
        error: String((err as Error)?.message ?? err),
      });
      this.addAfter(key, wait);
    }
  }
}
