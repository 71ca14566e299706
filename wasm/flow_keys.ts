/**
 * The identity of MACs and addresses for comparisons, by the compiler's own address rules
 * (assembly/keys.ts, run in WebAssembly): flow_conflicts.ts must know what a compile would reject,
 * and which claims are the same, before the compile runs. Many texts go in one call.
 *
 * @module
 */

import { engine, putText } from "./flow_engines.ts";

/** How keys reads its texts (the `kind` of `keys` in assembly/keys.ts). */
const KINDS = { address: 0, mac: 1, nodeIp: 2 } as const;

export type KeyKind = keyof typeof KINDS;

const decoder = new TextDecoder();

/**
 * The key of each text, in order, or null for a text the compiler rejects as `kind`: an address's
 * canonical text (IPv4 dotted quad, IPv6 as OVS prints it), a MAC in lowercase, "1" for a unicast
 * IPv4 tunnel endpoint.
 */
export function canonicalKeys(kind: KeyKind, texts: readonly string[]): (string | null)[] {
  if (texts.length === 0) return [];
  const e = engine("wasm");
  const blob = texts.join("");
  const words = texts.length;
  // Growing the memory detaches older views: take them after the last allocation.
  const base = e.input(words * 4 + blob.length);
  const lengths = new Uint32Array(e.memory.buffer, base, words);
  for (let i = 0; i < words; i++) lengths[i] = texts[i].length;
  putText(e, base + words * 4, blob);
  const len = e.keys(KINDS[kind], words);
  const keys = decoder.decode(new Uint8Array(e.memory.buffer, e.keyPtr(), len)).split("\n");
  return texts.map((_, i) => keys[i] === "" ? null : keys[i]);
}

/** The key of any of `texts` (one call into the compiler for all), by lookup; null for the rest. */
export function keyLookup(kind: KeyKind, texts: unknown[]): (text: unknown) => string | null {
  const strings = texts.filter((t): t is string => typeof t === "string");
  const keys = canonicalKeys(kind, strings);
  const map = new Map(strings.map((t, i) => [t, keys[i]]));
  return (t) => typeof t === "string" ? map.get(t) ?? null : null;
}
