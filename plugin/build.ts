/**
 * Builds the CNI plugin, the native forwarder of knitter.c, into plugin/build/knitter with the
 * system C compiler (gcc, libc only), statically linked: the one file the install-cni container
 * copies to /opt/cni/bin needs nothing on the node. The CNI versions it names in its VERSION
 * answer come from contract.ts, so they are defined once.
 *
 *   deno task build:plugin [--out FILE]
 *
 * Skipped when the output is newer than knitter.c, contract.ts and this script.
 */
import { parseArgs } from "node:util";
import { run } from "@knitter/common";
import { CNI_VERSIONS } from "./contract.ts";

const here = new URL(".", import.meta.url).pathname;
export const PLUGIN_SOURCE = `${here}knitter.c`;
/** Where the built forwarder goes; tests, the devstack and the bench run it from here. */
export const PLUGIN_BINARY = `${here}build/knitter`;

/** The gcc argv: C99, warnings as errors, static (no shared libc needed on a node). */
export function gccArgs(output: string): string[] {
  // A C string literal holding the JSON list: "\"0.4.0\",..."
  const versions = JSON.stringify(CNI_VERSIONS.map((v) => `"${v}"`).join(","));
  return [
    "gcc",
    "-std=c99",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-static",
    `-DCNI_VERSIONS_JSON=${versions}`,
    "-o",
    output,
    PLUGIN_SOURCE,
  ];
}

function mtime(path: string): number {
  try {
    return Deno.statSync(path).mtime?.getTime() ?? 0;
  } catch {
    return 0;
  }
}

/** Compiles the forwarder to `output` unless it is up to date; answers the output's path. */
export async function buildPlugin(output = PLUGIN_BINARY): Promise<string> {
  const inputs = [PLUGIN_SOURCE, `${here}contract.ts`, `${here}build.ts`];
  const built = mtime(output);
  if (built > 0 && inputs.every((f) => mtime(f) < built)) return output;
  await Deno.mkdir(output.slice(0, output.lastIndexOf("/")), { recursive: true });
  const tmp = `${output}.${Deno.pid}.tmp`;
  try {
    await run(gccArgs(tmp));
  } catch (e) {
    const missing = (e as Error).message.includes("No such file") && !(await hasGcc());
    throw new Error(
      missing
        ? "building the CNI plugin needs gcc and libc6-dev (as root: apt-get install gcc libc6-dev, or make setup)"
        : `building the CNI plugin failed: ${(e as Error).message}`,
    );
  }
  // Renamed into place: a runtime exec'ing the plugin meanwhile never sees half a file.
  await Deno.rename(tmp, output);
  return output;
}

async function hasGcc(): Promise<boolean> {
  try {
    return (await run(["gcc", "--version"], { check: false })).code === 0;
  } catch {
    return false;
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { out: { type: "string" } } });
  try {
    console.error(`built ${await buildPlugin(values.out)}`);
  } catch (e) {
    console.error((e as Error).message);
    Deno.exit(1);
  }
}
