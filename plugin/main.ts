/**
 * The CNI plugin executable: `CNI_*` environment and the network config on stdin in, result or
 * CNI error JSON on stdout. All the work happens in the node agent; this only forwards.
 */
import { versionReply } from "./version.ts";

/** With a scoped --allow-env, reading anything else throws; treat it as unset. */
function getenv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** A plain read loop: `new Response(Deno.stdin.readable)` would load streams and add ~4 ms. */
function readStdin(): string {
  const parts: Uint8Array[] = [];
  const buf = new Uint8Array(64 * 1024);
  for (let n = Deno.stdin.readSync(buf); n !== null; n = Deno.stdin.readSync(buf)) {
    parts.push(buf.slice(0, n));
  }
  const all = new Uint8Array(parts.reduce((len, p) => len + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return new TextDecoder().decode(all);
}

const stdin = readStdin();
// VERSION is the runtime's probe and the hottest path: answer it before loading the rest.
if (getenv("CNI_COMMAND") === "VERSION") {
  console.log(versionReply(stdin));
  Deno.exit(0);
}
const { runCommand } = await import("./run_command.ts");
const out = await runCommand(getenv, stdin);
if (out.log) console.error(out.log);
if (out.stdout) console.log(out.stdout);
// Exit now: a timed-out connect may still hold the event loop open.
Deno.exit(out.exitCode);
