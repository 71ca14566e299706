/**
 * Light feed followers in a process of their own (convergence_bench.ts starts a few): each one a
 * node with its own token, following `GET /api/v1/feed` as the agent's RemoteView does: streamed
 * (`stream`: `stream=ndjson`, one answer a follower, a page a line), over a WebSocket (`ws`:
 * `stream=websocket`, a page a message), or long-polled (`poll`). Their JSON parsing runs here,
 * not in the process that measures.
 *
 * Reads one JSON line from stdin: { url, tokens: string[], transport, cursorOverApi } (follower i
 * is tokens[i]). A stream or socket starts without a cursor (it follows from now, its first page
 * carrying the cursor) unless `cursorOverApi`; a long poll first asks one. Writes "ready" once
 * every follower has its stream or socket open (its first page read) or its first long poll sent, then one line per port it hears of:
 * "heard <i> <bare port ID> <epoch ms>". Stops when stdin closes.
 */
import { linesOf } from "./lines.ts";

/** How a follower follows the feed. */
export type Transport = "poll" | "stream" | "ws";

interface Setup {
  url: string;
  tokens: string[];
  transport: Transport;
  /** Each follower asks its first cursor on the API first (a stream or socket can start without). */
  cursorOverApi?: boolean;
}

interface Page {
  cursor: string;
  events: { type: string; op: string; port: { id: string } }[];
  error?: { code: string; message: string };
}

const encoder = new TextEncoder();
/** Bytes a stream's read takes at most (a page of one port is under 1 KB). */
const READ_BYTES = 16 * 1024;
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

/**
 * Asks the first cursors on connections that close after their answer: a follower's connection to
 * the manager is then its stream, socket or poll alone (a socket never reuses a pooled one).
 */
const NO_POOL = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });

async function firstCursor(url: string, token: string): Promise<string> {
  const r = await fetch(`${url}/api/v1/feed`, {
    headers: { authorization: `Bearer ${token}` },
    client: NO_POOL,
  });
  const page = await r.json();
  if (!r.ok) throw new Error(`feed: ${r.status} ${JSON.stringify(page)}`);
  return page.cursor;
}

/** One follower: where and as whom it follows, from which cursor (none: from now). */
interface Follower {
  url: string;
  token: string;
  index: number;
  cursor: string | undefined;
  signal: AbortSignal;
  /** Its socket or stream is open (its first page read), or its first long poll sent. */
  ready: () => void;
}

async function follow({ url, token, index, cursor, signal, ready }: Follower): Promise<void> {
  while (!signal.aborted) {
    try {
      const asked = fetch(`${url}/api/v1/feed?${afterOf(cursor)}timeout=25`, {
        headers: { authorization: `Bearer ${token}` },
        signal,
      });
      ready();
      const r = await asked;
      const page = await r.json();
      if (!r.ok) throw new Error(`feed: ${r.status} ${JSON.stringify(page)}`);
      cursor = heard(index, page);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
  }
}

/** Says the ports a page puts; its cursor. */
function heard(index: number, page: Page): string {
  const at = performance.timeOrigin + performance.now();
  if (page.error) throw new Error(`feed stream: ${page.error.code}: ${page.error.message}`);
  for (const e of page.events) {
    if (e.type === "port" && e.op === "put") say(`heard ${index} ${e.port.id.split("@")[0]} ${at}`);
  }
  return page.cursor;
}

/** Follows one stream, its lines as they come; `open` once its first line is in. */
async function stream(
  { url, token, index, cursor, signal, ready: open }: Follower,
): Promise<void> {
  try {
    const r = await fetch(`${url}/api/v1/feed?${afterOf(cursor)}timeout=25&stream=ndjson`, {
      headers: { authorization: `Bearer ${token}` },
      signal,
    });
    if (!r.ok) throw new Error(`feed: ${r.status} ${await r.text()}`);
    const decoder = new TextDecoder();
    let rest = "";
    let first = true;
    // Read into one buffer of its own, not a fresh 64 KiB one a read (the default reader's).
    const reader = r.body!.getReader({ mode: "byob" });
    let buffer = new Uint8Array(READ_BYTES);
    for (;;) {
      const { done, value } = await reader.read(buffer);
      if (done || !value) break;
      const bytes = value;
      buffer = new Uint8Array(value.buffer);
      rest += decoder.decode(bytes, { stream: true });
      for (let at = rest.indexOf("\n"); at >= 0; at = rest.indexOf("\n")) {
        heard(index, JSON.parse(rest.slice(0, at)));
        rest = rest.slice(at + 1);
        if (first) open();
        first = false;
      }
    }
    if (!signal.aborted) throw new Error("feed stream: the manager ended it");
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  }
}

const DECODER = new TextDecoder();

/** Follows one WebSocket, a page a message; `open` once its first page is in. */
function socket(
  { url, token, index, cursor, signal, ready: open }: Follower,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(
      `${url.replace(/^http/, "ws")}/api/v1/feed?${afterOf(cursor)}timeout=25&stream=websocket`,
      { headers: { authorization: `Bearer ${token}` } },
    );
    ws.binaryType = "arraybuffer";
    let first = true;
    ws.onmessage = (e) => {
      try {
        heard(index, JSON.parse(DECODER.decode(e.data as ArrayBuffer)));
      } catch (err) {
        reject(err);
        ws.close();
        return;
      }
      if (first) open();
      first = false;
    };
    ws.onerror = () => {};
    ws.onclose = (e) =>
      signal.aborted ? resolve() : reject(new Error(`feed socket closed: ${e.code} ${e.reason}`));
    signal.addEventListener("abort", () => ws.close(), { once: true });
  });
}

const FOLLOWERS = { poll: follow, stream, ws: socket };

/** The query's cursor part: none follows from now. */
function afterOf(cursor: string | undefined): string {
  return cursor === undefined ? "" : `after=${cursor}&`;
}

/** The manager's feed socket port (GET /feed/socket) as a URL; its API's URL when it has none. */
async function socketBase(url: string, token: string): Promise<string> {
  const r = await fetch(`${url}/api/v1/feed/socket`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (r.status === 404) {
    await r.body?.cancel();
    return url;
  }
  if (!r.ok) throw new Error(`GET /feed/socket: ${r.status} ${await r.text()}`);
  const { port } = await r.json();
  const at = new URL(url);
  at.port = String(port);
  return at.origin;
}

async function main(): Promise<void> {
  const lines = linesOf(Deno.stdin.readable);
  const first = await lines.next();
  if (first.done) return;
  const { url, tokens, transport, cursorOverApi } = JSON.parse(first.value) as Setup;
  const stop = new AbortController();
  // A stream or socket without a cursor follows from now, its first page carrying the cursor.
  const cursors = transport === "poll" || cursorOverApi
    ? await Promise.all(tokens.map((t) => firstCursor(url, t)))
    : tokens.map(() => undefined);
  let waiting = 0;
  const follower = FOLLOWERS[transport];
  // Sockets go where the manager says (its feed socket port), as the agents' client does.
  const at = transport === "ws" ? await socketBase(url, tokens[0]) : url;
  const followed = tokens.map((t, i) =>
    follower({
      url: at,
      token: t,
      index: i,
      cursor: cursors[i],
      signal: stop.signal,
      ready: () => {
        if (++waiting === tokens.length) say("ready");
      },
    })
  );
  while (!(await lines.next()).done) { /* until stdin closes */ }
  stop.abort();
  // Streams aborted in thousands may be slow to settle; what was heard is written, then we go.
  await Promise.race([Promise.all(followed), new Promise((r) => setTimeout(r, 1000))]);
  await writing;
  Deno.exit(0);
}

if (import.meta.main) await main();
