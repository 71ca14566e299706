/**
 * Bitmaps of addresses / IDs for the IPAM, backed by WebAssembly memory.
 *
 * Bit layout (shared with the stored form and with `tsBitmap`): bit i lives in byte i >> 3 at
 * bit position i & 7, least significant bit first.
 *
 * Each operation runs where it is fastest (figures in docs/benchmarks.md): single-bit operations
 * (test, set, clear) and the first word of a search run in JS directly on the region in WASM
 * memory, since a call into WASM costs more than they do; longer searches, counts and the batch
 * operations (allocate, setRange, clearMany) run in WASM, one call each.
 *
 * @module
 */

import {
  bytesOf,
  checkBytes,
  checkIndices,
  checkRange,
  checkSearch,
  checkSize,
  clearBit,
  ctz32,
  loadBytes,
  setBit,
  testBit,
} from "./bitmap_checks.ts";

/** A fixed-size set of bits `[0, size)`. */
export interface Bitmap {
  /** Number of bits. */
  readonly size: number;
  test(i: number): boolean;
  /** RangeError when i is outside [0, size). */
  set(i: number): void;
  /** RangeError when i is outside [0, size). */
  clear(i: number): void;
  /**
   * First clear bit in [from, end), then wrapping around in [start, from); -1 when every bit of
   * [start, end) is set. start <= from <= end required (from may equal end: then search starts
   * at start).
   */
  findFree(start: number, end: number, from: number): number;
  /**
   * Batch allocation: sets up to `out.length` clear bits, the ones that successive
   * `i = findFree(start, end, cursor); set(i); cursor = i + 1` steps from `cursor = from` would
   * pick (first [from, end) in order, then [start, from)), writes them to `out` in that order and
   * returns how many (fewer than out.length when [start, end) became full). Same argument rules
   * as findFree.
   */
  allocate(out: Uint32Array, start: number, end: number, from: number): number;
  /** Sets every bit of [start, end); returns how many of them were clear. */
  setRange(start: number, end: number): number;
  /**
   * Clears the given bits; returns how many of them were set. RangeError, with nothing cleared,
   * when one is outside [0, size).
   */
  clearMany(indices: ArrayLike<number>): number;
  /** Number of set bits in [start, end) (defaults: whole bitmap). */
  count(start?: number, end?: number): number;
  /** Replace the contents from stored bytes (length ceil(size/8); shorter input = the rest is zero). */
  load(bytes: Uint8Array): void;
  /** A copy of the contents, length ceil(size/8). */
  toBytes(): Uint8Array;
  /** Release memory (WASM); further use throws. */
  free(): void;
}

/** Signatures of the functions wasm/assembly/bitmap.ts exports (pointers are byte addresses). */
interface Exports {
  memory: WebAssembly.Memory;
  alloc(bits: number): number;
  release(ptr: number): void;
  test(ptr: number, i: number): number;
  set(ptr: number, i: number): void;
  clear(ptr: number, i: number): void;
  findFree(ptr: number, start: number, end: number, from: number): number;
  count(ptr: number, lo: number, hi: number): number;
  allocate(ptr: number, start: number, end: number, from: number, out: number, max: number): number;
  setRange(ptr: number, lo: number, hi: number): number;
  clearList(ptr: number, size: number, list: number, n: number): number;
}

const wasmUrl = new URL("./build/bitmap.wasm", import.meta.url);

async function instantiate(): Promise<Exports> {
  let code: Uint8Array<ArrayBuffer>;
  try {
    code = await Deno.readFile(wasmUrl);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new Error(
        'wasm/build/bitmap.wasm is missing: run "deno task build:wasm" (or "make build")',
        { cause: err },
      );
    }
    throw err;
  }
  // Filled in once instantiated; abort needs it to read its message out of memory.
  const self: { exports?: Exports } = {};
  // AssemblyScript's runtime reports fatal errors (e.g. out of memory) through env.abort.
  const abort = (msg: number, file: number, line: number, col: number): never => {
    const at = self.exports
      ? `${readString(self.exports, msg)} at ${readString(self.exports, file)}`
      : "";
    throw new Error(`wasm bitmap abort: ${at}:${line}:${col}`);
  };
  const { instance } = await WebAssembly.instantiate(code, { env: { abort } });
  self.exports = instance.exports as unknown as Exports;
  return self.exports;
}

/** Decodes an AssemblyScript string: UTF-16LE, byte length stored just before the data. */
function readString(exports: Exports, ptr: number): string {
  if (ptr === 0) return "";
  const buffer = exports.memory.buffer;
  const length = new Uint32Array(buffer, (ptr >>> 0) - 4, 1)[0];
  return new TextDecoder("utf-16le").decode(new Uint8Array(buffer, ptr >>> 0, length));
}

const wasm = await instantiate();

/** What the finalization registry needs to free a forgotten bitmap. */
interface Held {
  ptr: number;
  ref: WeakRef<WasmBitmap>;
}

// Safety net only: a bitmap dropped without free() returns its region when collected.
const registry = new FinalizationRegistry<Held>(({ ptr, ref }) => {
  wasm.release(ptr);
  live.delete(ref);
});

// Growing the WASM memory replaces memory.buffer and detaches the old one, with every view on
// it. Only allocation can grow it, so allocRegion re-creates the view of every live bitmap (and of
// the scratch region) right then: the operations themselves use their view without any check
// beyond the freed one, as the TypeScript twin does.
let memoryBuffer = wasm.memory.buffer;
/** Every bitmap not yet freed, weakly, so that the registry's safety net still works. */
const live = new Set<WeakRef<WasmBitmap>>();

function allocRegion(bits: number): number {
  const ptr = wasm.alloc(bits) >>> 0;
  if (wasm.memory.buffer !== memoryBuffer) {
    memoryBuffer = wasm.memory.buffer;
    for (const ref of live) {
      const bitmap = ref.deref();
      if (bitmap) WasmBitmap.remap(bitmap);
      else live.delete(ref);
    }
    if (scratchPtr !== 0) scratchView = new Uint32Array(memoryBuffer, scratchPtr, BATCH);
  }
  return ptr;
}

/** Words findFree looks at in JS before it hands the search to WASM. */
const JS_WORDS = 4;

/** nearFree's answer when the first JS_WORDS words hold no clear bit. */
const NOT_NEAR = -2;

/**
 * First clear bit in [lo, hi) within the JS_WORDS words from lo's; -1 when [lo, hi) has none,
 * NOT_NEAR when those words are full but [lo, hi) goes on past them. Requires lo < hi.
 */
function nearFree(words: Uint32Array, lo: number, hi: number): number {
  let w = lo >>> 5;
  const last = (hi - 1) >>> 5;
  const stop = w + JS_WORDS - 1;
  let free = ~words[w] & (-1 << (lo & 31));
  while (free === 0) {
    if (w === last) return -1;
    if (w === stop) return NOT_NEAR;
    free = ~words[++w];
  }
  const bit = (w << 5) + ctz32(free);
  return bit < hi ? bit : -1;
}

/** Most indexes one batch call passes through the scratch region (64 KiB of u32). */
const BATCH = 16384;

/** A region of WASM memory for the index lists of batch calls, BATCH u32 long, made on first use. */
let scratchPtr = 0;
let scratchView: Uint32Array<ArrayBufferLike> = new Uint32Array(0);

/** The scratch region's view (allocRegion keeps it current after any memory growth). */
function scratch(): Uint32Array {
  if (scratchPtr === 0) {
    const ptr = allocRegion(BATCH * 32);
    scratchPtr = ptr;
    scratchView = new Uint32Array(memoryBuffer, ptr, BATCH);
  }
  return scratchView;
}

/** Bytes currently reserved by the WASM memory (diagnostics and tests; not re-exported). */
export function wasmMemoryBytes(): number {
  return wasm.memory.buffer.byteLength;
}

/**
 * A region of WASM memory. Single-bit operations go through the u32 view (WASM memory is
 * little-endian, as the host must be: see bitmap_checks.ts); scans, counts and batches are calls
 * into WASM.
 */
class WasmBitmap implements Bitmap {
  readonly size: number;
  /** Byte address of the region; 0 once freed (never a heap address). */
  #ptr: number;
  /** The region's view; null once freed. */
  #words: Uint32Array | null;
  readonly #ref: WeakRef<WasmBitmap>;

  constructor(size: number) {
    this.size = size;
    this.#ptr = allocRegion(size);
    this.#words = new Uint32Array(memoryBuffer, this.#ptr, Math.ceil(size / 32));
    this.#ref = new WeakRef(this);
    live.add(this.#ref);
    registry.register(this, { ptr: this.#ptr, ref: this.#ref }, this);
  }

  /** Re-creates the view of a live bitmap on the current memory buffer (after growth). */
  static remap(bitmap: WasmBitmap): void {
    if (bitmap.#ptr === 0) return;
    bitmap.#words = new Uint32Array(memoryBuffer, bitmap.#ptr, Math.ceil(bitmap.size / 32));
  }

  /** The region's view; throws after free(). */
  #live(): Uint32Array {
    const words = this.#words;
    if (words === null) throw new Error("bitmap used after free()");
    return words;
  }

  test(i: number): boolean {
    return testBit(this.#live(), this.size, i);
  }

  set(i: number): void {
    setBit(this.#live(), this.size, i);
  }

  clear(i: number): void {
    clearBit(this.#live(), this.size, i);
  }

  findFree(start: number, end: number, from: number): number {
    const words = this.#live();
    checkSearch(start, end, from, this.size);
    let near = NOT_NEAR;
    if (from < end) {
      // The first words from the cursor, in JS: when allocating from a moving cursor the next free
      // bit is usually there, and looking costs less than a call into WASM.
      near = nearFree(words, from, end);
      if (near >= 0) return near;
    }
    return this.#farFree(start, end, from, near);
  }

  /**
   * The rest of findFree, in WASM: [start, from) when [from, end) has no clear bit (`near` -1),
   * else all of it from `from`. A separate method, and only one call, keeps findFree's JS path as
   * small as the TypeScript twin's, so that a caller's loop inlines all of it.
   */
  #farFree(start: number, end: number, from: number, near: number): number {
    if (near === -1) {
      end = from;
      from = start;
    }
    return start < end ? wasm.findFree(this.#ptr, start, end, from) : -1;
  }

  allocate(out: Uint32Array, start: number, end: number, from: number): number {
    this.#live();
    checkSearch(start, end, from, this.size);
    let n = 0;
    while (n < out.length) {
      const max = Math.min(BATCH, out.length - n);
      const list = scratch();
      const got = wasm.allocate(this.#ptr, start, end, from, list.byteOffset, max);
      out.set(list.subarray(0, got), n);
      n += got;
      if (got < max) break;
      // Carry on from just past the last bit taken, as the step-by-step loop would.
      from = list[got - 1] + 1;
    }
    return n;
  }

  setRange(start: number, end: number): number {
    this.#live();
    checkRange(start, end, this.size);
    return wasm.setRange(this.#ptr, start, end);
  }

  clearMany(indices: ArrayLike<number>): number {
    this.#live();
    if (indices instanceof Uint32Array && indices.length <= BATCH) {
      // Integers by construction: WASM checks the bounds before it clears anything.
      const list = scratch();
      list.set(indices);
      const cleared = wasm.clearList(this.#ptr, this.size, list.byteOffset, indices.length);
      if (cleared < 0) checkIndices(indices, this.size);
      return cleared;
    }
    checkIndices(indices, this.size);
    let cleared = 0;
    for (let k = 0; k < indices.length; k += BATCH) {
      const n = Math.min(BATCH, indices.length - k);
      const list = scratch();
      for (let j = 0; j < n; j++) list[j] = indices[k + j];
      cleared += wasm.clearList(this.#ptr, this.size, list.byteOffset, n);
    }
    return cleared;
  }

  count(start = 0, end = this.size): number {
    this.#live();
    checkRange(start, end, this.size);
    return wasm.count(this.#ptr, start, end);
  }

  load(bytes: Uint8Array): void {
    loadBytes(this.#live(), this.size, bytes);
  }

  toBytes(): Uint8Array {
    return bytesOf(this.#live(), this.size).slice();
  }

  free(): void {
    this.#live();
    registry.unregister(this);
    live.delete(this.#ref);
    wasm.release(this.#ptr);
    this.#ptr = 0;
    this.#words = null;
  }
}

/** A bitmap of `size` bits in WASM memory, optionally loaded from stored bytes. Call free(). */
export function wasmBitmap(size: number, bytes?: Uint8Array): Bitmap {
  checkSize(size);
  if (bytes) checkBytes(bytes, size);
  const bitmap = new WasmBitmap(size);
  if (bytes) bitmap.load(bytes);
  return bitmap;
}
