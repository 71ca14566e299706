/**
 * Compiles the AssemblyScript modules of wasm/assembly/ to wasm/build/ with the AssemblyScript
 * compiler: bitmap.ts (IPAM bitmaps) and flows.ts (OpenFlow rule compiler).
 * Run from anywhere as `deno task build:wasm`; paths are resolved against this file.
 * A module is skipped (silently) when its output is newer than every source in assembly/ (modules
 * may import one another) and this script, since it holds the flags.
 */
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const here = new URL(".", import.meta.url);
const sourceDir = new URL("assembly/", here);
const outDir = new URL("build/", here);

/** Each module with its own flags. */
const modules: { name: string; flags: string[] }[] = [
  {
    name: "bitmap",
    flags: [
      // Speed over size; no assertions or debug info in the hot paths.
      "-O3",
      "--noAssert",
      // findFree skips full 64-byte blocks with v128 ops; every V8 that Deno ships has SIMD.
      "--enable",
      "simd",
      // TLSF heap so freed bitmap regions are reused; no GC needed since nothing is managed.
      "--runtime",
      "minimal",
    ],
  },
  {
    name: "flows",
    flags: [
      "-O3",
      "--noAssert",
      // puts narrows 8 UTF-16 characters of a string constant to bytes in one v128 op.
      "--enable",
      "simd",
      // Buffers grow with heap.realloc on the TLSF heap; nothing is managed.
      "--runtime",
      "minimal",
    ],
  },
];

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

const newest = await newestSource();
for (const { name, flags } of modules) {
  const entry = new URL(`${name}.ts`, sourceDir);
  const outFile = new URL(`${name}.wasm`, outDir);
  if ((await mtime(outFile)) > newest) continue;
  await Deno.mkdir(outDir, { recursive: true });
  const started = performance.now();
  const { error, stderr } = await asc.main([
    fileURLToPath(entry),
    "--outFile",
    fileURLToPath(outFile),
    ...flags,
  ]);
  if (error) {
    console.error(stderr.toString());
    console.error(`wasm build of ${name} failed: ${error.message}`);
    Deno.exit(1);
  }
  const { size } = await Deno.stat(outFile);
  const ms = Math.round(performance.now() - started);
  console.log(`built wasm/build/${name}.wasm (${size} bytes) in ${ms} ms`);
}
