/**
 * Compiles wasm/assembly/bitmap.ts to wasm/build/bitmap.wasm with the AssemblyScript compiler.
 * Run from anywhere as `deno task build:wasm`; paths are resolved against this file.
 * Silent when the output is newer than every source (and this script, since it holds the flags).
 */
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const here = new URL(".", import.meta.url);
const sourceDir = new URL("assembly/", here);
const entry = new URL("bitmap.ts", sourceDir);
const outDir = new URL("build/", here);
const outFile = new URL("bitmap.wasm", outDir);

async function mtime(url: URL): Promise<number> {
  try {
    return (await Deno.stat(url)).mtime?.getTime() ?? 0;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 0;
    throw err;
  }
}

async function newestSource(): Promise<number> {
  let newest = await mtime(new URL(import.meta.url));
  for await (const e of Deno.readDir(sourceDir)) {
    if (e.isFile && e.name.endsWith(".ts")) {
      newest = Math.max(newest, await mtime(new URL(e.name, sourceDir)));
    }
  }
  return newest;
}

if ((await mtime(outFile)) <= (await newestSource())) {
  await Deno.mkdir(outDir, { recursive: true });
  const started = performance.now();
  const { error, stderr } = await asc.main([
    fileURLToPath(entry),
    "--outFile",
    fileURLToPath(outFile),
    // Speed over size; no assertions or debug info in the hot paths.
    "-O3",
    "--noAssert",
    // findFree skips full 64-byte blocks with v128 ops; every V8 that Deno ships has SIMD.
    "--enable",
    "simd",
    // TLSF heap so freed bitmap regions are reused; no GC needed since nothing is managed.
    "--runtime",
    "minimal",
  ]);
  if (error) {
    console.error(stderr.toString());
    console.error(`wasm build failed: ${error.message}`);
    Deno.exit(1);
  }
  const { size } = await Deno.stat(outFile);
  const ms = Math.round(performance.now() - started);
  console.log(`built wasm/build/bitmap.wasm (${size} bytes) in ${ms} ms`);
}
