/**
 * A budget per key (a client address, a switch port): token buckets of `perSecond` tokens, at most
 * `burst` saved up. A key whose bucket filled up again is forgotten once many are held, since a new
 * bucket would be the same.
 * @module
 */

/** How many buckets are held before the full ones are forgotten. */
const FORGET_ABOVE = 10_000;

export class TokenBuckets<K> {
  private readonly buckets = new Map<K, { tokens: number; at: number }>();

  /** `perSecond` ≤ 0: no limit. `now` in milliseconds (tests pass their own clock). */
  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes one for `key`; false when it has none left. */
  take(key: K): boolean {
    if (this.perSecond <= 0) return true;
    const now = this.now();
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    this.buckets.set(key, b);
    if (this.buckets.size > FORGET_ABOVE) this.forgetFull(now);
    return true;
  }

  private forgetFull(now: number): void {
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
  }
}
