/**
 * Waiting between attempts: an exponential backoff, a clock that tests can replace, and `retry`,
 * the one retry loop the components share (issue 20: no hand-written loops).
 * @module
 */

/** Time as the code that waits sees it; tests pass a fake one and move it by hand. */
export interface Clock {
  /** Milliseconds, monotonic enough to measure how long ago something happened. */
  now(): number;
  /** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The process's own clock: `Date.now()` and `setTimeout`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep,
};

/**
 * Resolves after `ms`, or as soon as `signal` aborts; never rejects, so a loop that sleeps then
 * checks its signal stops promptly.
 *
 * @example
 * ```ts
 * import { sleep } from "@knitter/common";
 * const stop = new AbortController();
 * stop.abort();
 * await sleep(60_000, stop.signal); // at once
 * ```
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

export interface BackoffOptions {
  /** The first wait (default 200 ms). */
  firstMs?: number;
  /** No wait is longer (default 30 s). */
  maxMs?: number;
  /** Each wait is this many times the one before (default 2). */
  factor?: number;
  /**
   * Each wait is shortened by up to this fraction at random (default 0: exact), so that many
   * clients cut off together (a manager restart) do not all come back in the same instant.
   */
  jitter?: number;
  /** A number in [0, 1), for the jitter (default Math.random). */
  random?: () => number;
}

/**
 * The wait before attempt `attempt + 1` after `attempt` failures in a row (1: the first failure):
 * `firstMs × factor^(attempt-1)`, at most `maxMs`, less the jitter.
 *
 * @example
 * ```ts
 * import { backoffMs } from "@knitter/common";
 * backoffMs(1, { firstMs: 250 }); // 250
 * backoffMs(3, { firstMs: 250 }); // 1000
 * backoffMs(20, { firstMs: 250, maxMs: 60_000 }); // 60000
 * ```
 */
export function backoffMs(attempt: number, options: BackoffOptions = {}): number {
  const { firstMs = 200, maxMs = 30_000, factor = 2, jitter = 0, random = Math.random } = options;
  const exact = Math.min(firstMs * factor ** Math.max(0, attempt - 1), maxMs);
  return jitter > 0 ? Math.round(exact * (1 - jitter * random())) : exact;
}

/**
 * A backoff that remembers how many attempts failed in a row: `next()` after each failure,
 * `reset()` after a success.
 *
 * @example
 * ```ts
 * import { Backoff } from "@knitter/common";
 * const b = new Backoff({ firstMs: 100, maxMs: 300 });
 * [b.next(), b.next(), b.next()]; // [100, 200, 300]
 * b.reset();
 * b.next(); // 100
 * ```
 */
export class Backoff {
  private failures = 0;

  constructor(private readonly options: BackoffOptions = {}) {}

  /** Failures in a row so far. */
  get attempts(): number {
    return this.failures;
  }

  /** Counts a failure and answers how long to wait before the next attempt. */
  next(): number {
    return backoffMs(++this.failures, this.options);
  }

  /** The wait `next()` would answer, without counting a failure. */
  peek(): number {
    return backoffMs(this.failures + 1, this.options);
  }

  reset(): void {
    this.failures = 0;
  }
}

export interface RetryOptions extends BackoffOptions {
  /** Stops retrying: the last error is thrown (or an AbortError when none happened). */
  signal?: AbortSignal;
  /** At most this many attempts (default: no limit). */
  attempts?: number;
  /** Which errors are worth another attempt (default: all). */
  retryable?: (err: unknown) => boolean;
  /** Told of each failure that will be retried, and after how long (for the log, a readiness note). */
  onError?: (err: unknown, retryInMs: number, attempt: number) => void;
  /**
   * The wait after `err`, given the backoff's (default: the backoff's): a server that says when to
   * come back (Retry-After) may ask for longer.
   */
  waitAfter?: (err: unknown, backoffMs: number) => number;
  clock?: Clock;
}

/**
 * Runs `fn` until it succeeds, waiting a growing backoff after each failure. Stops with the error
 * when it is not retryable, the attempts are used up, or `signal` aborts.
 *
 * @example
 * ```ts
 * import { retry } from "@knitter/common";
 * let calls = 0;
 * const n = await retry(() => ++calls < 3 ? Promise.reject(new Error("not yet")) : Promise.resolve(calls), {
 *   firstMs: 1,
 * });
 * // n === 3
 * ```
 */
export async function retry<T>(
  fn: (attempt: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const { signal, attempts = Infinity, retryable = () => true, onError } = options;
  const waitAfter = options.waitAfter ?? ((_err: unknown, ms: number) => ms);
  const clock = options.clock ?? systemClock;
  const backoff = new Backoff(options);
  for (let attempt = 1;; attempt++) {
    signal?.throwIfAborted();
    try {
      return await fn(attempt);
    } catch (err) {
      if (signal?.aborted || attempt >= attempts || !retryable(err)) throw err;
      const wait = waitAfter(err, backoff.next());
      onError?.(err, wait, attempt);
      await clock.sleep(wait, signal);
      if (signal?.aborted) throw err;
    }
  }
}
