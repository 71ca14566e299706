/**
 * The two engines of the flow compiler, both built from the one AssemblyScript source
 * (assembly/flows.ts) by build.ts: build/flows.wasm, run in WebAssembly (`compileFlows`), and
 * build/flows_js.cjs, the same module as plain JavaScript (`compileFlowsTs`, the benchmark
 * yardstick and second opinion of the tests). Both have the same exports, so flows.ts encodes the
 * model and decodes the lines the same way for either.
 *
 * Each is loaded on first use, synchronously: importing this file (or mod.ts, as the manager does
 * for the bitmaps) reads nothing.
 *
 * @module
 */

import { createRequire } from "node:module";

/** The exports of wasm/assembly/flows.ts (the entry); pointers are byte addresses. */
export interface Engine {
  memory: { readonly buffer: ArrayBuffer };
  input(bytes: number): number;
  compile(words: number): number;
  errorArg(i: number): number;
  outPtr(): number;
  outLen(): number;
  acl(words: number): number;
  aclErrorArg(i: number): number;
  sampling(probability: number, collectorSet: number): void;
  inactive(words: number): number;
  inactiveErrorArg(): number;
  mirrors(words: number): number;
  mirrorErrorArg(): number;
  services(words: number): number;
  serviceErrorArg(i: number): number;
  keys(kind: number, count: number): number;
  keyPtr(): number;
}

/** The file each engine is built to, and what it is called in errors. */
const ENGINES = {
  wasm: { file: "flows.wasm", what: "wasm flow compiler" },
  js: { file: "flows_js.cjs", what: "flow compiler (JavaScript build)" },
} as const;

type EngineName = keyof typeof ENGINES;

const loaded: Partial<Record<EngineName, Engine>> = {};

/** The engine `name`, instantiated on first use. */
export function engine(name: EngineName): Engine {
  return loaded[name] ??= instantiate(name);
}

function instantiate(name: EngineName): Engine {
  const { file, what } = ENGINES[name];
  const url = new URL(`./build/${file}`, import.meta.url);
  // Only out-of-memory can abort (--noAssert); the message pointers are not worth decoding.
  const abort = (_msg: number, _file: number, line: number, col: number): never => {
    throw new Error(`${what} abort at ${line}:${col} (out of memory?)`);
  };
  const imports = { env: { abort } };
  try {
    if (name === "js") {
      const asmFunc = createRequire(import.meta.url)(url.pathname) as (i: object) => Engine;
      return asmFunc(imports);
    }
    const module = new WebAssembly.Module(Deno.readFileSync(url));
    return new WebAssembly.Instance(module, imports).exports as unknown as Engine;
  } catch (err) {
    if (!missing(err)) throw err;
    throw new Error(
      `wasm/build/${file} is missing: run "deno task build:wasm" (or "make build")`,
      { cause: err },
    );
  }
}

function missing(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound ||
    (err as { code?: string })?.code === "MODULE_NOT_FOUND";
}

const encoder = new TextEncoder();

/**
 * Writes `text` at `at`, one byte per UTF-16 unit (one encodeInto when all ASCII); a character
 * that is not ASCII becomes 0xff, which every parser of the compiler rejects.
 */
export function putText(e: Engine, at: number, text: string): void {
  const bytes = new Uint8Array(e.memory.buffer, at, text.length);
  if (encoder.encodeInto(text, bytes).read !== text.length) {
    for (let k = 0; k < text.length; k++) {
      const c = text.charCodeAt(k);
      bytes[k] = c < 0x80 ? c : 0xff;
    }
  }
}
