/** Serialises async sections within this process; cross-process safety comes from version checks. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  /** Whether a section runs or waits. */
  get busy(): boolean {
    return this.waiting > 0;
  }

  run<T>(fn: () => Promise<T>): Promise<T> {
    this.waiting++;
    const result = this.tail.then(async () => {
      try {
        return await fn();
      } finally {
        this.waiting--;
      }
    });
    this.tail = result.then(() => {}, () => {});
    return result;
  }
}
