/**
 * Argument checks and the word-level operations both bitmap implementations run in JS on their u32
 * words (the TypeScript twin's own array, or the WASM bitmap's view of its region).
 */

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

/** Whether bit i is set; RangeError unless i is in [0, size). */
export function testBit(words: Uint32Array, size: number, i: number): boolean {
  checkIndex(i, size);
  return ((words[i >>> 5] >>> (i & 31)) & 1) !== 0;
}

/** Sets bit i; RangeError unless i is in [0, size). */
export function setBit(words: Uint32Array, size: number, i: number): void {
  checkIndex(i, size);
  words[i >>> 5] |= 1 << (i & 31);
}

/** Clears bit i; RangeError unless i is in [0, size). */
export function clearBit(words: Uint32Array, size: number, i: number): void {
  checkIndex(i, size);
  words[i >>> 5] &= ~(1 << (i & 31));
}

/** The stored bytes of the words of a `size`-bit bitmap: ceil(size/8) of them, not a copy. */
export function bytesOf(words: Uint32Array, size: number): Uint8Array {
  return new Uint8Array(words.buffer, words.byteOffset, Math.ceil(size / 8));
}

/** Replaces the words' contents from stored bytes (missing ones zero, bits past size dropped). */
export function loadBytes(words: Uint32Array, size: number, bytes: Uint8Array): void {
  checkBytes(bytes, size);
  const view = bytesOf(words, size);
  view.set(bytes);
  view.fill(0, bytes.length);
  // Bits past size stay zero so word scans and popcounts need no extra masking.
  if (view.length > 0) view[view.length - 1] &= lastByteMask(size);
}
