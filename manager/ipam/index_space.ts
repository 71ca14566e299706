/**
 * Maps a set of disjoint address (or ID) ranges onto a dense index 0..size-1, so one bitmap covers
 * exactly the allocatable addresses and nothing outside the pools.
 */

export interface Range {
  start: bigint;
  /** Inclusive. */
  end: bigint;
}

export class IndexSpace {
  readonly ranges: readonly Range[];
  /** offsets[i] is the index of ranges[i].start. */
  private readonly offsets: number[];
  readonly size: number;

  /** `ranges` must be sorted and disjoint. */
  constructor(ranges: readonly Range[]) {
    this.ranges = ranges;
    this.offsets = [];
    let total = 0;
    for (const r of ranges) {
      this.offsets.push(total);
      total += Number(r.end - r.start + 1n);
    }
    this.size = total;
  }

  /** The index of `value`, or -1 when it lies outside every range. */
  indexOf(value: bigint): number {
    let lo = 0;
    let hi = this.ranges.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = this.ranges[mid];
      if (value < r.start) hi = mid - 1;
      else if (value > r.end) lo = mid + 1;
      else return this.offsets[mid] + Number(value - r.start);
    }
    return -1;
  }

  valueAt(index: number): bigint {
    if (!Number.isInteger(index) || index < 0 || index >= this.size) {
      throw new RangeError(`index ${index} outside 0..${this.size - 1}`);
    }
    let lo = 0;
    let hi = this.offsets.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.offsets[mid] <= index) lo = mid;
      else hi = mid - 1;
    }
    return this.ranges[lo].start + BigInt(index - this.offsets[lo]);
  }

  /** Index ranges [start, end) covering the part of [from, to] (inclusive values) inside the space. */
  indexRanges(from: bigint, to: bigint): [number, number][] {
    const out: [number, number][] = [];
    this.ranges.forEach((r, i) => {
      const s = from > r.start ? from : r.start;
      const e = to < r.end ? to : r.end;
      if (s <= e) {
        const first = this.offsets[i] + Number(s - r.start);
        out.push([first, first + Number(e - s) + 1]);
      }
    });
    return out;
  }
}
