/**
 * At most `size` async sections at a time within this process; the others wait their turn in the
 * order they asked. A Mutex (mutex.ts) is the one-slot case.
 */
export class Slots {
  private free: number;
  private readonly queue: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`slots: ${size} is not a count`);
    this.free = size;
  }

  /** Sections waiting for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Whether a section runs or waits. */
  get busy(): boolean {
    return this.free < this.size;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) {
      this.free--;
      // A section starts after its caller's turn, never within the call.
      await undefined;
    } else await new Promise<void>((turn) => this.queue.push(turn));
    try {
      return await fn();
    } finally {
      // The slot passes to the next in line, or is free again.
      const next = this.queue.shift();
      if (next) next();
      else this.free++;
    }
  }
}
