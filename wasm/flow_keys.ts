/**
 * The identity of a port's MAC and addresses for comparisons, by the compiler's own address rules
 * (assembly/keys.ts, run in WebAssembly): flow_conflicts.ts must know what a compile would reject
 * or see as the same claim before the compile runs.
 *
 * @module
 */

import { type Engine, engine, putText } from "./flow_engines.ts";

const decoder = new TextDecoder();

/** Writes `text` into the input area and runs `key` on it. */
function ask(text: string, key: (e: Engine, len: number) => number): [Engine, number] {
  const e = engine("wasm");
  putText(e, e.input(text.length), text);
  return [e, key(e, text.length)];
}

/** The canonical text of the key the last call wrote. */
function keyText(e: Engine, len: number): string {
  return decoder.decode(new Uint8Array(e.memory.buffer, e.keyPtr(), len));
}

/** A MAC's identity (lowercase), or null when it is not a unicast MAC the compilers accept. */
export function macKey(s: string): string | null {
  const [e, len] = ask(s, (e, n) => e.macKey(n));
  return len === 0 ? null : keyText(e, len);
}

/** An IPv4 or IPv6 address's canonical text, or null when the compilers reject it. */
export function addressKey(s: string): string | null {
  const [e, len] = ask(s, (e, n) => e.addressKey(n));
  return len === 0 ? null : keyText(e, len);
}

/** Whether a tunnel endpoint is one the compilers accept (a unicast IPv4). */
export function nodeIpValid(s: string): boolean {
  return ask(s, (e, n) => e.nodeIpValid(n))[1] === 1;
}
