/**
 * Builds the node binaries with `deno compile` into dist/ (or --out), and the CNI plugin (a static
 * C program, with this machine's gcc: plugin/build.ts) beside them, all or nothing: each is built
 * into a staging folder, and only when every one succeeded do they move into place.
 *
 *   deno task build:bin [--out DIR] [--only knitter-agent,knitter] [--target TRIPLE]
 *
 * `deno compile` embeds Deno's runtime binary (denort), which it downloads on first use. Where
 * that download cannot happen, point DENORT_BIN at a denort of this very Deno version.
 */
import { parseArgs } from "node:util";
import { run } from "@knitter/common";
import { buildPlugin } from "@knitter/plugin/build";
import { BINARIES, type Binary, compileArgs, PLUGIN } from "./binaries.ts";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
/** A compile type-checks and bundles the whole component: generous, but never endless. */
const COMPILE_TIMEOUT_MS = 10 * 60_000;

const USAGE = `deno task build:bin [--out DIR] [--only NAME,...] [--target TRIPLE]

Compiles ${
  BINARIES.map((b) => b.name).join(", ")
} and builds the CNI plugin ${PLUGIN} into DIR (default dist/).
  --only NAMES   just these binaries
  --target T     cross-compile, e.g. aarch64-unknown-linux-gnu (default: this machine)
Environment:
  DENORT_BIN     a denort binary of Deno ${Deno.version.deno} to embed instead of downloading one`;

export class BuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

interface Options {
  out: string;
  only: Binary[];
  /** Whether the CNI plugin is built too. */
  plugin: boolean;
  target?: string;
}

function parseOptions(args: string[]): Options | undefined {
  const { values } = parseArgs({
    args,
    options: {
      out: { type: "string", default: `${ROOT}/dist` },
      only: { type: "string" },
      target: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return undefined;
  const names = values.only?.split(",");
  return {
    out: values.out,
    only: selectBinaries(names?.filter((n) => n !== PLUGIN)),
    plugin: !names || names.includes(PLUGIN),
    target: values.target,
  };
}

function selectBinaries(only: string[] | undefined): Binary[] {
  if (!only) return BINARIES;
  return only.map((name) => {
    const binary = BINARIES.find((b) => b.name === name);
    if (!binary) {
      throw new BuildError(
        `Unknown binary "${name}": choose from ${
          [...BINARIES.map((b) => b.name), PLUGIN].join(", ")
        }`,
      );
    }
    return binary;
  });
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Everything a compile needs that can be checked before spending minutes on it. */
function checkInputs(binaries: Binary[]): void {
  const denort = Deno.env.get("DENORT_BIN");
  // Deno reads an empty DENORT_BIN as the path "": treat it as unset instead.
  if (denort === "") Deno.env.delete("DENORT_BIN");
  if (denort && !isFile(denort)) {
    throw new BuildError(
      `DENORT_BIN is set to "${denort}", which is not a file: point it at an unzipped denort ` +
        `binary of Deno ${Deno.version.deno}, or unset it to let deno compile download one`,
    );
  }
  for (const binary of binaries) {
    if (!isFile(`${ROOT}/${binary.entry}`)) {
      throw new BuildError(
        `Cannot build ${binary.name}: ${binary.entry} does not exist (is the component built ` +
          `yet?); leave it out with --only`,
      );
    }
    const missing = binary.include.filter((file) => !isFile(`${ROOT}/${file}`));
    if (missing.length > 0) {
      throw new BuildError(
        `Cannot build ${binary.name}: ${
          missing.join(", ")
        } missing; run "deno task build:wasm" first`,
      );
    }
  }
}

/** The innermost cause deno compile lists under "Caused by:" ("  4: dns error: ..."). */
function innermostCause(stderr: string): string {
  const block = stderr.split("Caused by:")[1]?.split("Stack backtrace:")[0] ?? "";
  const causes = block.split("\n").map((l) => l.match(/^\s*\d+: (.*)$/)?.[1]);
  return causes.filter((c) => c !== undefined).at(-1) ?? stderr.split("\n")[0];
}

function isRuntimeDownloadFailure(stderr: string): boolean {
  return /denort/.test(stderr) &&
    /(base binary|error sending request|Download|dns error|connect)/i.test(stderr);
}

function explainFailure(binary: Binary, stderr: string, target: string): BuildError {
  if (!isRuntimeDownloadFailure(stderr)) {
    return new BuildError(`deno compile of ${binary.name} (${binary.entry}) failed:\n${stderr}`);
  }
  const version = Deno.version.deno;
  return new BuildError(
    [
      `Cannot build ${binary.name}: deno compile could not download Deno's runtime binary ` +
      `(denort ${version} for ${target}): ${innermostCause(stderr)}`,
      "This machine cannot reach Deno's download server. Either:",
      "  - build where that download works (it is cached in DENO_DIR, later builds are offline), or",
      `  - unzip denort-${target}.zip of the Deno ${version} release and point DENORT_BIN at ` +
      "the binary:",
      `      DENORT_BIN=/path/to/denort deno task build:bin`,
      'See deploy/README.md ("1. Build the binaries"). Nothing was written to the output directory.',
    ].join("\n"),
  );
}

/** The plugin is built by this machine's gcc: for this machine's target only. */
async function buildNativePlugin(options: Options, staging: string): Promise<void> {
  if (options.target && options.target !== Deno.build.target) {
    throw new BuildError(
      `Cannot build the CNI plugin ${PLUGIN} for ${options.target}: it is built with this ` +
        `machine's gcc (${Deno.build.target}); build it on a ${options.target} machine, or leave ` +
        `it out with --only`,
    );
  }
  console.error(`build: building ${PLUGIN} from plugin/knitter.c with gcc`);
  try {
    await buildPlugin(`${staging}/${PLUGIN}`);
  } catch (e) {
    throw new BuildError((e as Error).message);
  }
}

async function compileAll(options: Options, staging: string): Promise<void> {
  if (options.plugin) await buildNativePlugin(options, staging);
  const target = options.target ?? Deno.build.target;
  for (const binary of options.only) {
    const argv = compileArgs(Deno.execPath(), binary, {
      root: ROOT,
      output: `${staging}/${binary.name}`,
      target: options.target,
    });
    console.error(`build: compiling ${binary.name} from ${binary.entry}`);
    const result = await run(argv, {
      check: false,
      timeoutMs: COMPILE_TIMEOUT_MS,
      env: { NO_COLOR: "1" },
    });
    if (result.code !== 0) throw explainFailure(binary, result.stderr, target);
  }
}

function names(options: Options): string[] {
  return [...options.only.map((b) => b.name), ...(options.plugin ? [PLUGIN] : [])];
}

export async function build(options: Options): Promise<string[]> {
  checkInputs(options.only);
  await Deno.mkdir(options.out, { recursive: true });
  const staging = await Deno.makeTempDir({ dir: options.out, prefix: ".staging-" });
  try {
    await compileAll(options, staging);
    for (const name of names(options)) {
      await Deno.rename(`${staging}/${name}`, `${options.out}/${name}`);
    }
  } finally {
    await Deno.remove(staging, { recursive: true });
  }
  return names(options).map((name) => `${options.out}/${name}`);
}

if (import.meta.main) {
  try {
    const options = parseOptions(Deno.args);
    if (!options) {
      console.log(USAGE);
      Deno.exit(0);
    }
    for (const path of await build(options)) {
      console.log(`${path} (${Math.round(Deno.statSync(path).size / 1e6)} MB)`);
    }
  } catch (err) {
    if (!(err instanceof BuildError || err instanceof TypeError)) throw err;
    console.error(`build: ${err.message}`);
    Deno.exit(1);
  }
}
