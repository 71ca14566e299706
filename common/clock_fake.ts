/** For tests: a clock that moves only when told. */
import type { Clock } from "./backoff.ts";

/** A clock that moves only when told: sleepers wake when advance() passes their time. */
export class FakeClock implements Clock {
  private t = 0;
  private sleepers: { at: number; wake: () => void }[] = [];
  /** Every sleep asked for, in order. */
  readonly slept: number[] = [];

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.slept.push(ms);
    if (signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const s = { at: this.t + ms, wake: resolve };
      this.sleepers.push(s);
      signal?.addEventListener("abort", () => {
        this.sleepers = this.sleepers.filter((x) => x !== s);
        resolve();
      }, { once: true });
    });
  }

  /** Moves time on and wakes who is due, then lets the woken code run. */
  async advance(ms: number): Promise<void> {
    this.t += ms;
    const due = this.sleepers.filter((s) => s.at <= this.t);
    this.sleepers = this.sleepers.filter((s) => s.at > this.t);
    for (const s of due) s.wake();
    await settle();
  }

  get sleeping(): number {
    return this.sleepers.length;
  }
}

/** Lets every promise chain that can move, move (a few turns of the event loop). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
}
