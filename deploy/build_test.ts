/**
 * The binary build where Deno's runtime cannot be downloaded (as on every machine of this
 * project): it must fail at once, say what failed and what to do, and leave nothing behind.
 * The child gets a DENO_DIR without a cached runtime and a proxy on a closed loopback port, so it
 * cannot reach any network whatever this machine can.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { BINARIES, compileArgs } from "./binaries.ts";

const BUILD = new URL("./build.ts", import.meta.url).pathname;

async function realDenoDir(): Promise<string> {
  const info = await run([Deno.execPath(), "info", "--json"], { timeoutMs: 30_000 });
  return JSON.parse(info.stdout).denoDir;
}

/** A port nothing listens on: taken, then given back. */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** The package caches shared (so nothing is fetched), but no downloaded runtime (dl/). */
async function offlineDenoDir(dir: string): Promise<string> {
  const real = await realDenoDir();
  const denoDir = `${dir}/deno-dir`;
  await Deno.mkdir(denoDir);
  for (const entry of Deno.readDirSync(real)) {
    if (entry.isDirectory && entry.name !== "dl") {
      await Deno.symlink(`${real}/${entry.name}`, `${denoDir}/${entry.name}`);
    }
  }
  return denoDir;
}

async function build(dir: string, env: Record<string, string>) {
  const proxy = `http://127.0.0.1:${closedPort()}`;
  return await run(
    [Deno.execPath(), "run", "--allow-all", BUILD, "--only", "knitctl", "--out", `${dir}/dist`],
    {
      env: {
        DENO_DIR: await offlineDenoDir(dir),
        HTTPS_PROXY: proxy,
        HTTP_PROXY: proxy,
        https_proxy: proxy,
        http_proxy: proxy,
        NO_PROXY: "",
        no_proxy: "",
        NO_COLOR: "1",
        DENORT_BIN: "",
        ...env,
      },
      check: false,
      timeoutMs: 180_000,
    },
  );
}

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-build-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("without a reachable runtime download the build says what failed and what to do", async () => {
  await withDir(async (dir) => {
    const result = await build(dir, {});
    assert.equal(result.code, 1, result.stderr);
    const version = Deno.version.deno;
    assert.match(result.stderr, /Cannot build knitctl: deno compile could not download/);
    assert.ok(result.stderr.includes(`denort ${version} for ${Deno.build.target}`), result.stderr);
    assert.match(result.stderr, /Connection refused|error sending request|connect/i);
    assert.match(result.stderr, /DENORT_BIN=\/path\/to\/denort deno task build:bin/);
    assert.match(result.stderr, /deploy\/README.md/);
    // All or nothing: no binary, no staging folder, no temporary file.
    assert.deepEqual([...Deno.readDirSync(`${dir}/dist`)], []);
  });
});

Deno.test("a DENORT_BIN that is not a file is named before anything is compiled", async () => {
  await withDir(async (dir) => {
    const result = await build(dir, { DENORT_BIN: `${dir}/no-denort` });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /DENORT_BIN is set to ".*no-denort", which is not a file/);
    assert.doesNotMatch(result.stderr, /compiling/);
  });
});

Deno.test("each binary is compiled with its permissions, KV where it keeps state, and the WASM it loads", () => {
  const argv = (name: string) =>
    compileArgs("deno", BINARIES.find((b) => b.name === name)!, { root: "/r", output: "/o" });
  const manager = argv("knitter-manager");
  assert.ok(manager.includes("--unstable-kv"));
  assert.deepEqual(
    manager.filter((_, i) => manager[i - 1] === "--include"),
    ["/r/wasm/build/bitmap.wasm", "/r/wasm/build/flows.wasm"],
  );
  assert.equal(manager.at(-1), "/r/manager/main.ts");
  assert.ok(argv("knitter-agent").includes("--unstable-kv"));
  // The CNI plugin is no Deno program: it is built with gcc, beside them.
  assert.ok(!BINARIES.some((b) => b.name === "knitter"));
  // Every file the WASM loader reads is one the build includes.
  const bitmap = Deno.readTextFileSync(new URL("../wasm/bitmap.ts", import.meta.url));
  assert.match(bitmap, /new URL\("\.\/build\/bitmap\.wasm", import\.meta\.url\)/);
  // The flow compiler's engines are a table of build files; production runs the WASM one.
  const engines = Deno.readTextFileSync(new URL("../wasm/flow_engines.ts", import.meta.url));
  assert.match(engines, /wasm: \{ file: "flows\.wasm"/);
  assert.match(engines, /new URL\(`\.\/build\/\$\{file\}`, import\.meta\.url\)/);
});
