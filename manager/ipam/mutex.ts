/** Serialises async sections within this process; cross-process safety comes from version checks. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(() => {}, () => {});
    return result;
  }
}
