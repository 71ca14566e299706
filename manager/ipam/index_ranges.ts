/**
 * Sets of pool indexes as sorted, disjoint, half-open [start, end) ranges: a network's reserved
 * addresses (gateway, excludes) are kept and applied this way, so that a /9 exclude costs one pair,
 * not eight million bits.
 */

export type IndexRange = [number, number];

/** Sorted and merged (touching ranges join); empty ranges dropped. */
export function mergeRanges(ranges: readonly IndexRange[]): IndexRange[] {
  const sorted = ranges.filter(([s, e]) => e > s).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const out: IndexRange[] = [];
  for (const [s, e] of sorted) {
    const last = out.at(-1);
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else out.push([s, e]);
  }
  return out;
}

/** How many indexes merged ranges cover. */
export function rangesSize(ranges: readonly IndexRange[]): number {
  let n = 0;
  for (const [s, e] of ranges) n += e - s;
  return n;
}

/** [0, size) less merged `ranges`. */
export function complement(ranges: readonly IndexRange[], size: number): IndexRange[] {
  const out: IndexRange[] = [];
  let at = 0;
  for (const [s, e] of ranges) {
    if (s > at) out.push([at, Math.min(s, size)]);
    at = Math.max(at, e);
    if (at >= size) break;
  }
  if (at < size) out.push([at, size]);
  return out;
}

/** Whether merged `ranges` hold `index` (binary search). */
export function rangesHold(ranges: readonly IndexRange[], index: number): boolean {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [s, e] = ranges[mid];
    if (index < s) hi = mid - 1;
    else if (index >= e) lo = mid + 1;
    else return true;
  }
  return false;
}
