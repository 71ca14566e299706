/**
 * Bitmaps of addresses / IDs for the IPAM, backed by WebAssembly memory.
 *
 * Bit layout (shared with the stored form and with `tsBitmap`): bit i lives in byte i >> 3 at
 * bit position i & 7, least significant bit first.
 *
 * @module
 */

import {
  checkBytes,
  checkIndex,
  checkRange,
  checkSearch,
  checkSize,
  lastByteMask,
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

// Safety net only: a bitmap dropped without free() returns its region when collected.
const registry = new FinalizationRegistry<number>((ptr) => wasm.release(ptr));

// Growing the WASM memory replaces memory.buffer and detaches the old one, with every view on
// it. Only allocation can grow it, so allocRegion bumps this epoch when the buffer changed and
// each bitmap re-creates its view when its epoch is stale: one integer compare per operation
// (cheaper than asking a view for its length, which V8 must check for detachment).
let memoryBuffer = wasm.memory.buffer;
let memoryEpoch = 0;

function allocRegion(bits: number): number {
  const ptr = wasm.alloc(bits) >>> 0;
  if (wasm.memory.buffer !== memoryBuffer) {
    memoryBuffer = wasm.memory.buffer;
    memoryEpoch++;
  }
  return ptr;
}

/** Bytes currently reserved by the WASM memory (diagnostics and tests; not re-exported). */
export function wasmMemoryBytes(): number {
  return wasm.memory.buffer.byteLength;
}

/**
 * A region of WASM memory. Every bit operation is a call into WASM; the u32 view (WASM memory is
 * little-endian, as the host must be: see bitmap_checks.ts) serves only to copy the stored bytes
 * in and out and to notice use after free.
 */
class WasmBitmap implements Bitmap {
  readonly size: number;
  /** Byte address of the region; 0 once freed (never a heap address). */
  #ptr: number;
  #words: Uint32Array;
  /** memoryEpoch when #words was made; -1 once freed, so #live always takes the slow path. */
  #epoch: number;

  constructor(size: number) {
    this.size = size;
    this.#ptr = allocRegion(size);
    this.#words = new Uint32Array(memoryBuffer, this.#ptr, Math.ceil(size / 32));
    this.#epoch = memoryEpoch;
    registry.register(this, this.#ptr, this);
  }

  /** The region's current view; throws after free(). */
  #live(): Uint32Array {
    return this.#epoch === memoryEpoch ? this.#words : this.#refresh();
  }

  #refresh(): Uint32Array {
    if (this.#ptr === 0) throw new Error("bitmap used after free()");
    this.#words = new Uint32Array(memoryBuffer, this.#ptr, Math.ceil(this.size / 32));
    this.#epoch = memoryEpoch;
    return this.#words;
  }

  test(i: number): boolean {
    this.#live();
    checkIndex(i, this.size);
    return wasm.test(this.#ptr, i) !== 0;
  }

  set(i: number): void {
    this.#live();
    checkIndex(i, this.size);
    wasm.set(this.#ptr, i);
  }

  clear(i: number): void {
    this.#live();
    checkIndex(i, this.size);
    wasm.clear(this.#ptr, i);
  }

  findFree(start: number, end: number, from: number): number {
    this.#live();
    checkSearch(start, end, from, this.size);
    return wasm.findFree(this.#ptr, start, end, from);
  }

  count(start = 0, end = this.size): number {
    this.#live();
    checkRange(start, end, this.size);
    return wasm.count(this.#ptr, start, end);
  }

  load(bytes: Uint8Array): void {
    checkBytes(bytes, this.size);
    const view = this.#bytes();
    view.set(bytes);
    view.fill(0, bytes.length);
    // Bits past size stay zero so word scans and popcounts need no extra masking.
    if (view.length > 0) view[view.length - 1] &= lastByteMask(this.size);
  }

  toBytes(): Uint8Array {
    return this.#bytes().slice();
  }

  /** The stored bytes of the region, ceil(size/8) of them. */
  #bytes(): Uint8Array {
    const words = this.#live();
    return new Uint8Array(words.buffer, words.byteOffset, Math.ceil(this.size / 8));
  }

  free(): void {
    this.#live();
    registry.unregister(this);
    wasm.release(this.#ptr);
    this.#ptr = 0;
    this.#epoch = -1;
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
