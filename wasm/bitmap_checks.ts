/** Argument checks and layout helpers shared by both bitmap implementations. */

// Both implementations read and write the stored bytes as u32 words through typed arrays, which
// use the host's byte order; WASM memory and the stored layout are little-endian. Every
// platform Deno ships for is little-endian: fail loudly rather than corrupt bitmaps elsewhere.
if (new Uint8Array(Uint32Array.of(1).buffer)[0] !== 1) {
  throw new Error("bitmaps need a little-endian host");
}

/** Largest supported size: indexes must fit the i32 that `findFree` returns. */
export const MAX_BITMAP_SIZE = 2 ** 31 - 1;

/** Throws unless size is an integer in [0, MAX_BITMAP_SIZE]. */
export function checkSize(size: number): void {
  if (!Number.isInteger(size) || size < 0 || size > MAX_BITMAP_SIZE) {
    throw new RangeError(`bitmap size ${size} is not an integer in [0, ${MAX_BITMAP_SIZE}]`);
  }
}

/** Throws unless i is an integer in [0, size). `>>> 0` rejects fractions, negatives and NaN. */
export function checkIndex(i: number, size: number): void {
  if ((i >>> 0) !== i || i >= size) {
    throw new RangeError(`bit ${i} is outside [0, ${size})`);
  }
}

/** Throws unless lo <= hi are integers within [0, size]. */
export function checkRange(lo: number, hi: number, size: number): void {
  if ((lo >>> 0) !== lo || (hi >>> 0) !== hi || lo > hi || hi > size) {
    throw new RangeError(`range [${lo}, ${hi}) is not within [0, ${size}]`);
  }
}

/** Throws unless start <= from <= end are within [0, size]. */
export function checkSearch(start: number, end: number, from: number, size: number): void {
  if (
    (start >>> 0) !== start || (end >>> 0) !== end || (from >>> 0) !== from ||
    start > from || from > end || end > size
  ) {
    throw new RangeError(
      `findFree(${start}, ${end}, ${from}) needs start <= from <= end <= ${size}`,
    );
  }
}

/** Throws unless bytes fit a bitmap of `size` bits. */
export function checkBytes(bytes: Uint8Array, size: number): void {
  const max = Math.ceil(size / 8);
  if (bytes.length > max) {
    throw new RangeError(`${bytes.length} bytes do not fit a ${size}-bit bitmap (${max} max)`);
  }
}

/** Mask of the bits of the last byte that lie inside a `size`-bit bitmap. */
export function lastByteMask(size: number): number {
  return size % 8 === 0 ? 0xff : (1 << (size % 8)) - 1;
}

/** Throws unless every index is an integer in [0, size). */
export function checkIndices(indices: ArrayLike<number>, size: number): void {
  for (let k = 0; k < indices.length; k++) checkIndex(indices[k], size);
}

/** Index of the lowest set bit of a non-zero int32: isolate it, then count from the top. */
export function ctz32(x: number): number {
  return 31 - Math.clz32(x & -x);
}
