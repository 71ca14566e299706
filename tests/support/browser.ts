/**
 * A real browser for tests: Debian's headless Chromium (scripts/setup.sh installs it), started by
 * the test as a child process with a profile directory of its own, and driven by playwright-core
 * over the DevTools protocol. Closing it stops that pid and any process still naming the profile
 * (renderers, the zygote), so nothing is left even when the test fails.
 */
import { type Browser, chromium } from "playwright-core";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { pidAlive, stopPid } from "../../devstack/cleanup.ts";

/** Where Debian puts the browser binary (/usr/bin/chromium is a shell wrapper around it). */
const CHROMIUM_PATHS = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"];
const START_TIMEOUT_MS = 30_000;

export interface TestBrowser {
  browser: Browser;
  /** The browser's main process. */
  pid: number;
  /** The profile directory, named by every process of this browser. */
  profile: string;
  /** What the browser wrote on stderr (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

export async function chromiumPath(): Promise<string | undefined> {
  for (const path of CHROMIUM_PATHS) {
    if (await Deno.stat(path).then(() => true, () => false)) return path;
  }
  return undefined;
}

/**
 * Starts headless Chromium (as root it needs --no-sandbox) on a free DevTools port and connects to
 * it. Registered with `cleanup` before anything can fail, so it is closed whatever happens.
 */
export async function launchChromium(cleanup: Cleanup): Promise<TestBrowser> {
  const path = await chromiumPath();
  if (!path) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATHS.join(" or ")}: run scripts/setup.sh as root`,
    );
  }
  const profile = await cleanup.tempDir();
  // Chromium makes scratch directories (org.chromium.Chromium.*) in TMPDIR and leaves them behind
  // when it is stopped: one of the test's own, removed with it.
  const scratch = await cleanup.tempDir();
  const child = new Deno.Command(path, {
    env: { TMPDIR: scratch },
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--remote-debugging-address=127.0.0.1",
      "--remote-debugging-port=0",
      `--user-data-dir=${profile}`,
      "about:blank",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let closed = false;
  let drained: Promise<void> = Promise.resolve();
  const close = async () => {
    if (closed) return;
    closed = true;
    await stopPid(child.pid);
    await child.status;
    await stopNaming(profile);
    await drained;
  };
  cleanup.defer(close);

  let stderr = "";
  const endpoint = Promise.withResolvers<string>();
  // Read stderr to its end (a full pipe would stall the browser), watching for the endpoint.
  drained = (async () => {
    for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) {
      stderr = (stderr + text).slice(-20_000);
      const ws = stderr.match(/DevTools listening on (ws:\/\/\S+)/)?.[1];
      if (ws) endpoint.resolve(ws);
    }
    endpoint.reject(new Error(`Chromium exited before listening:\n${stderr}`));
  })();
  const timer = setTimeout(
    () => endpoint.reject(new Error(`Chromium did not listen within ${START_TIMEOUT_MS} ms`)),
    START_TIMEOUT_MS,
  );
  try {
    const browser = await chromium.connectOverCDP(await endpoint.promise);
    return {
      browser,
      pid: child.pid,
      profile,
      log: () => stderr,
      close: async () => {
        await browser.close().catch(() => {});
        await close();
      },
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Stops every process whose command line names `marker` (this browser's helpers). */
async function stopNaming(marker: string): Promise<void> {
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    const cmdline = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
    if (cmdline.includes(marker) && await pidAlive(pid)) await stopPid(pid);
  }
}
