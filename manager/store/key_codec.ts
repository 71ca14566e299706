/**
 * Keys as bytes whose byte order is Deno KV's key order, so that a byte-range scan on a shared
 * store lists a prefix in the same order as Deno KV does. The encoding is the tuple layout Deno KV
 * uses itself: a type byte per part; strings as UTF-8 with 0x00 escaped as 0x00 0xFF and a 0x00
 * terminator; numbers as big-endian IEEE 754 doubles with the sign bit flipped (negatives: all
 * bits), so strings sort before numbers and numbers sort by value.
 */
import type { Key, KeyPart } from "./store.ts";

const STRING = 0x02;
const NUMBER = 0x21;

const utf8 = new TextEncoder();
const text = new TextDecoder("utf-8", { fatal: true });

export function encodeKey(key: Key): Uint8Array {
  const out: number[] = [];
  for (const part of key) encodePart(part, out);
  return Uint8Array.from(out);
}

function encodePart(part: KeyPart, out: number[]): void {
  if (typeof part === "string") {
    out.push(STRING);
    for (const b of utf8.encode(part)) {
      out.push(b);
      if (b === 0) out.push(0xff);
    }
    out.push(0);
  } else if (typeof part === "number") {
    const bytes = new Uint8Array(8);
    new DataView(bytes.buffer).setFloat64(0, part);
    if (bytes[0] & 0x80) { for (let i = 0; i < 8; i++) bytes[i] ^= 0xff; }
    else bytes[0] ^= 0x80;
    out.push(NUMBER, ...bytes);
  } else {
    throw new TypeError(`Key parts must be strings or numbers, not ${typeof part}`);
  }
}

export function decodeKey(bytes: Uint8Array): Key {
  const key: KeyPart[] = [];
  let i = 0;
  while (i < bytes.length) {
    const type = bytes[i++];
    if (type === STRING) {
      const raw: number[] = [];
      for (;;) {
        if (i >= bytes.length) throw new Error("Malformed key: unterminated string");
        const b = bytes[i++];
        if (b !== 0) raw.push(b);
        else if (bytes[i] === 0xff) (raw.push(0), i++);
        else break;
      }
      key.push(text.decode(Uint8Array.from(raw)));
    } else if (type === NUMBER) {
      if (i + 8 > bytes.length) throw new Error("Malformed key: short number");
      const b = bytes.slice(i, i + 8);
      i += 8;
      if (b[0] & 0x80) b[0] ^= 0x80;
      else for (let j = 0; j < 8; j++) b[j] ^= 0xff;
      key.push(new DataView(b.buffer).getFloat64(0));
    } else {
      throw new Error(`Malformed key: unknown part type 0x${type.toString(16)}`);
    }
  }
  return key;
}

/**
 * The byte range [start, end) of the keys strictly under `prefix` (the prefix itself excluded,
 * as in Deno KV). Every part starts with a type byte in 0x01..0xfe, so children lie between
 * prefix+0x00 and prefix+0xff.
 */
export function prefixRange(prefix: Key): { start: Uint8Array; end: Uint8Array } {
  const p = encodeKey(prefix);
  return { start: concat(p, [0x00]), end: concat(p, [0xff]) };
}

export function concat(a: Uint8Array, b: Uint8Array | number[]): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
