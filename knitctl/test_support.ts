/** Runs knitctl as people do, a process with its exit code and output, for the tests. */
import { main } from "./main.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** Deno's cache as this process uses it (HOME is changed below, which would move it). */
const DENO_DIR = Deno.env.get("DENO_DIR") ??
  `${Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME")}/.cache`}/deno`;

export interface KnitctlRun {
  code: number;
  stdout: string;
  stderr: string;
  // deno-lint-ignore no-explicit-any
  json(): any;
}

/**
 * `knitctl ARGS` with only `env` of KNITCTL_* set and HOME pointing nowhere, so neither the
 * developer's environment nor their config file leaks into a test.
 */
export async function knitctl(
  args: string[],
  env: Record<string, string> = {},
): Promise<KnitctlRun> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      ...["run", "--quiet", "--allow-net", "--allow-read", "--allow-write", "--allow-env"],
      `${ROOT}knitctl/main.ts`,
      ...args,
    ],
    cwd: ROOT,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: "/nonexistent", DENO_DIR, ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  return {
    code: out.code,
    stdout,
    stderr,
    json() {
      try {
        return JSON.parse(stdout);
      } catch {
        throw new Error(`knitctl ${args.join(" ")} printed no JSON: ${stdout} ${stderr}`);
      }
    },
  };
}

/** Fails with what knitctl printed unless it exited with `code`. */
export function expectExit(r: KnitctlRun, code: number, what: string): KnitctlRun {
  if (r.code !== code) {
    throw new Error(
      `${what}: exit ${r.code}, wanted ${code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`,
    );
  }
  return r;
}

/** knitctl's main in this process, with no environment: its exit code and what it printed. */
export async function knitctlIn(
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(args, {
    env: () => undefined,
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
  });
  return { code, out, err };
}
