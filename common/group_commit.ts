/**
 * Group commit: requests that arrive while a commit is in flight wait, then go into the next commit
 * together. One fsync carries many allocations, which is what makes a busy network fast; a lone
 * request still commits at once.
 */
export class GroupCommit<T> {
  private queue: T[] = [];
  private draining = false;

  /**
   * @param max most items per batch
   * @param key items with equal keys never share a batch (the later one waits for the next)
   * @param run commits one batch; settles each item itself, never throws
   */
  constructor(
    private readonly max: number,
    private readonly key: (item: T) => string,
    private readonly run: (batch: T[]) => Promise<void>,
  ) {}

  submit(item: T): void {
    this.queue.push(item);
    if (!this.draining) this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const batch: T[] = [];
        const rest: T[] = [];
        const keys = new Set<string>();
        for (const item of this.queue) {
          const k = this.key(item);
          if (batch.length < this.max && !keys.has(k)) {
            keys.add(k);
            batch.push(item);
          } else {
            rest.push(item);
          }
        }
        this.queue = rest;
        await this.run(batch);
      }
    } finally {
      this.draining = false;
    }
  }
}
