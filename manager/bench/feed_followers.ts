/**
 * Light feed followers in a process of their own (convergence_bench.ts starts a few): each one a
 * node with its own token, long-polling `GET /api/v1/feed` as the agent's RemoteView does. Their
 * JSON parsing runs here, not in the process that measures.
 *
 * Reads one JSON line from stdin: { url, tokens: string[] } (follower i is tokens[i]). Writes
 * "ready" once every follower has its first cursor and its first long poll sent, then one line per
 * port it hears of: "heard <i> <bare port ID> <epoch ms>". Stops when stdin closes.
 */
import { linesOf } from "./lines.ts";

interface Setup {
  url: string;
  tokens: string[];
}

const encoder = new TextEncoder();
let out: string[] = [];
let writing = Promise.resolve();

/** Lines are written in batches, one write per turn of the event loop. */
function say(line: string): void {
  out.push(line);
  if (out.length > 1) return;
  writing = writing.then(async () => {
    await Promise.resolve();
    const text = out.join("\n") + "\n";
    out = [];
    const bytes = encoder.encode(text);
    for (let at = 0; at < bytes.length;) at += await Deno.stdout.write(bytes.subarray(at));
  });
}

async function firstCursor(url: string, token: string): Promise<string> {
  const r = await fetch(`${url}/api/v1/feed`, { headers: { authorization: `Bearer ${token}` } });
  const page = await r.json();
  if (!r.ok) throw new Error(`feed: ${r.status} ${JSON.stringify(page)}`);
  return page.cursor;
}

async function follow(
  url: string,
  token: string,
  index: number,
  cursor: string,
  signal: AbortSignal,
  sent: () => void,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const asked = fetch(`${url}/api/v1/feed?after=${cursor}&timeout=25`, {
        headers: { authorization: `Bearer ${token}` },
        signal,
      });
      sent();
      const r = await asked;
      const page = await r.json();
      if (!r.ok) throw new Error(`feed: ${r.status} ${JSON.stringify(page)}`);
      const at = performance.timeOrigin + performance.now();
      cursor = page.cursor;
      for (const e of page.events) {
        if (e.type === "port" && e.op === "put") {
          say(`heard ${index} ${e.port.id.split("@")[0]} ${at}`);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
  }
}

async function main(): Promise<void> {
  const lines = linesOf(Deno.stdin.readable);
  const first = await lines.next();
  if (first.done) return;
  const { url, tokens } = JSON.parse(first.value) as Setup;
  const stop = new AbortController();
  const cursors = await Promise.all(tokens.map((t) => firstCursor(url, t)));
  let waiting = 0;
  const followed = tokens.map((t, i) =>
    follow(url, t, i, cursors[i], stop.signal, () => {
      if (++waiting === tokens.length) say("ready");
    })
  );
  while (!(await lines.next()).done) { /* until stdin closes */ }
  stop.abort();
  await Promise.all(followed);
  await writing;
}

if (import.meta.main) await main();
