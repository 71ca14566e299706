/**
 * Values as bytes for a store that keeps bytes (etcd, export files): JSON for records, and a
 * value that is itself a byte array (a bitmap chunk) as a 0x00 marker and the raw bytes. JSON text
 * never starts with 0x00, so the two cannot be confused. Fields holding `undefined` are dropped,
 * as JSON does; nothing in the manager tells an absent field from an undefined one.
 */
const BYTES = 0x00;
const utf8 = new TextEncoder();
const text = new TextDecoder();

export function encodeValue(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) {
    const out = new Uint8Array(value.length + 1);
    out[0] = BYTES;
    out.set(value, 1);
    return out;
  }
  return utf8.encode(JSON.stringify(value, refuseBytes));
}

export function decodeValue(bytes: Uint8Array): unknown {
  if (bytes.length > 0 && bytes[0] === BYTES) return bytes.slice(1);
  return JSON.parse(text.decode(bytes));
}

function refuseBytes(_key: string, v: unknown): unknown {
  if (ArrayBuffer.isView(v)) {
    throw new TypeError("Byte arrays can only be stored as a whole value, not inside a record");
  }
  if (typeof v === "bigint") throw new TypeError("BigInt values cannot be stored");
  return v;
}
