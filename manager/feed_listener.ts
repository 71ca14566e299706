/**
 * The feed's socket listener: a port of its own on which followers open the feed's WebSocket
 * (`GET /api/v1/feed?after=…&stream=websocket`), served by the manager's JavaScript on raw
 * connections, never by Deno's HTTP server (which, on the guard's connections, closes an upgraded
 * socket at once: conn_guard.ts). So sockets live with every protection on: the request head must
 * arrive within the guard's header timeout and fit HEAD_MAX_BYTES, and each client address spends
 * the guard's budget of new connections (the same buckets as the API's port).
 *
 * Only a WebSocket handshake for the feed is taken; anything else is answered a plain HTTP error
 * and closed. The handshake's request goes through the app as any API request does (its token,
 * the follower's view and cursor: the feed route makes its first page and group), with the
 * connection's socket handed along (ws_conn.ts); the route's answer, when it takes no socket (401,
 * 403, 410, ...), is written as it is. A socket costs its follower's group entry, a small pending
 * read and the frames queued for it: each page's frame is made once for all (ws_frames.ts).
 */
import { ApiError } from "./errors.ts";
import { acceptBudgeted, type GuardLimits } from "./conn_guard.ts";
import { Slots, type TokenBuckets } from "@knitter/common";
import { ConnSocket, handSocket, wasTaken } from "./ws_conn.ts";
import { acceptOf, validKey } from "./ws_frames.ts";

/** The feed's path (routes.ts API_BASE and the feed route's). */
export const FEED_PATH = "/api/v1/feed";

/** The longest a shutdown waits for the sockets' close frames to go. */
const SHUTDOWN_MS = 1000;

/** A request head longer than this is refused (431): a handshake is a few hundred bytes. */
export const HEAD_MAX_BYTES = 16 * 1024;

/**
 * Complete handshakes served by the app at a time. Every node reconnects at once after a manager
 * restart; thousands of handshakes in the app together leave the process holding what they needed
 * at their peak (5,000 at once: 282–287 MiB after collection, 193–197 MiB 64 at a time; see
 * docs/benchmarks.md). A handshake takes its turn once its head is in, so a trickling head never
 * holds one, and a turn ends when the 101 (or the refusal) is written.
 */
export const HANDSHAKES_AT_ONCE = 64;

const PORTS = new WeakMap<object, number>();

/** Records that the manager of `ctx` serves feed sockets on `port` (its feed route tells). */
export function recordSocketPort(ctx: object, port: number): void {
  PORTS.set(ctx, port);
}

/** The feed socket port of the manager of `ctx`; undefined when it has none. */
export function socketPortOf(ctx: object): number | undefined {
  return PORTS.get(ctx);
}

export interface FeedListenerOptions {
  hostname: string;
  port: number;
  tls?: { cert: string; key: string };
  /** The guard's limits: its header timeout (0: none, a proxy in front times heads). */
  limits: GuardLimits;
  /** The budget of new connections per client address, shared with the API's port. */
  budget: TokenBuckets<string>;
  /** The app's handler: the handshake's request is served as any API request. */
  handler: (req: Request) => Response | Promise<Response>;
  onSlowClient?: (what: { remote: string; reason: string }) => void;
  onRefusedConnection?: () => void;
  /** Complete handshakes in the app at a time (default HANDSHAKES_AT_ONCE). */
  handshakesAtOnce?: number;
}

export interface FeedListener {
  addr: Deno.NetAddr;
  /** Stops accepting and closes every socket (their followers resume elsewhere). */
  shutdown(): Promise<void>;
}

export function serveFeedSockets(options: FeedListenerOptions): FeedListener {
  const listener: Deno.Listener = options.tls
    ? Deno.listenTls({ hostname: options.hostname, port: options.port, ...options.tls })
    : Deno.listen({ hostname: options.hostname, port: options.port });
  const open = new Set<Deno.Conn>();
  const sockets = new Set<ConnSocket>();
  const turns = new Slots(options.handshakesAtOnce ?? HANDSHAKES_AT_ONCE);
  const accepting = acceptBudgeted(
    listener,
    options.budget,
    options.onRefusedConnection,
    (conn) => {
      open.add(conn);
      const forget = () => void open.delete(conn);
      serveConn(conn, options, turns).then(
        // Nothing of the handshake (its request, head, answer) is held while the socket lives.
        (socket) => {
          if (!socket) return forget();
          sockets.add(socket);
          socket.done.then(() => {
            sockets.delete(socket);
            forget();
          });
        },
        () => {
          forget();
          closeQuietly(conn);
        },
      );
    },
  );
  return {
    addr: listener.addr as Deno.NetAddr,
    async shutdown() {
      closeQuietly(listener);
      await accepting;
      // The manager's feed closed first: each socket's close frame (1000) goes out if it can
      // within SHUTDOWN_MS, so that its follower comes back at once rather than after a backoff.
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.all([...sockets].map((socket) => socket.done)),
        new Promise((r) => (timer = setTimeout(r, SHUTDOWN_MS))),
      ]);
      clearTimeout(timer);
      for (const conn of open) closeQuietly(conn);
    },
  };
}

/** One connection: its head read and checked, then its socket opened (or the refusal answered). */
async function serveConn(
  conn: Deno.Conn,
  options: FeedListenerOptions,
  turns: Slots,
): Promise<ConnSocket | undefined> {
  try {
    (conn as Deno.TcpConn).setNoDelay?.(true);
  } catch { /* not TCP */ }
  const head = await timedHead(conn, options);
  if (head === undefined) return;
  return await turns.run(() => handshake(conn, head, options.handler));
}

/** A complete head answered: the app's refusal, or the socket opened. */
async function handshake(
  conn: Deno.Conn,
  head: Head | ApiError,
  handler: FeedListenerOptions["handler"],
): Promise<ConnSocket | undefined> {
  if (head instanceof ApiError) return void await answer(conn, errorResponse(head));
  const refused = handshakeRefusal(head);
  if (refused) return void await answer(conn, errorResponse(refused));
  const req = new Request(`http://feed-socket${head.target}`, { headers: head.headers });
  const socket = new ConnSocket(conn);
  handSocket(req, socket);
  const res = await handler(req);
  if (!wasTaken(socket)) return void await answer(conn, res);
  const accept = await acceptOf(head.headers.get("sec-websocket-key")!);
  await writeAll(
    conn,
    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
      `sec-websocket-accept: ${accept}\r\n\r\n`,
  ).then(() => socket.open(), () => socket.end());
  return socket;
}

interface Head {
  method: string;
  target: string;
  version: string;
  headers: Headers;
}

/** The head, read within the header timeout; undefined when the client was cut off or left. */
async function timedHead(
  conn: Deno.Conn,
  options: FeedListenerOptions,
): Promise<Head | ApiError | undefined> {
  const ms = options.limits.headerTimeoutMs;
  let late = false;
  const timer = ms > 0
    ? setTimeout(() => {
      late = true;
      const addr = conn.remoteAddr as Deno.NetAddr;
      options.onSlowClient?.({
        remote: `${addr.hostname}:${addr.port}`,
        reason: `no complete request header within ${ms} ms`,
      });
      closeQuietly(conn);
    }, ms)
    : undefined;
  try {
    return await readHead(conn);
  } catch (err) {
    if (late || !(err instanceof ApiError)) return closeQuietly(conn);
    return err;
  } finally {
    clearTimeout(timer);
  }
}

const CRLF2 = [13, 10, 13, 10];

/** A head's first buffer: a handshake fits; a longer head doubles it, up to HEAD_MAX_BYTES. */
const HEAD_FIRST_BYTES = 1024;

/** Reads up to the head's blank line; an ApiError for a head too large or not HTTP. */
async function readHead(conn: Deno.Conn): Promise<Head | undefined> {
  let buffer = new Uint8Array(HEAD_FIRST_BYTES);
  let have = 0;
  for (;;) {
    if (have === buffer.length) {
      if (have === HEAD_MAX_BYTES) {
        throw new ApiError(
          "header_too_large",
          `The request head is over ${HEAD_MAX_BYTES} bytes; a WebSocket handshake needs a few hundred`,
        );
      }
      const grown = new Uint8Array(Math.min(HEAD_MAX_BYTES, have * 2));
      grown.set(buffer);
      buffer = grown;
    }
    const n = await conn.read(buffer.subarray(have));
    if (n === null) return undefined;
    const from = Math.max(0, have - 3);
    have += n;
    const end = endOfHead(buffer, from, have);
    if (end >= 0) {
      if (end + 4 < have) throw notHandshake("data came after the handshake's head");
      return parseHead(new TextDecoder().decode(buffer.subarray(0, end)));
    }
  }
}

function endOfHead(buffer: Uint8Array, from: number, to: number): number {
  for (let i = from; i + 4 <= to; i++) {
    if (CRLF2.every((b, j) => buffer[i + j] === b)) return i;
  }
  return -1;
}

function parseHead(text: string): Head {
  const [line, ...fields] = text.split("\r\n");
  const m = line.match(/^([A-Z]+) (\/\S*) (HTTP\/\d\.\d)$/);
  if (!m) throw notHandshake(`the request line is not HTTP: ${JSON.stringify(line.slice(0, 80))}`);
  const headers = new Headers();
  for (const field of fields) {
    const colon = field.indexOf(":");
    if (colon <= 0) throw notHandshake(`a header line without a name: ${JSON.stringify(field)}`);
    try {
      headers.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
    } catch {
      throw notHandshake(`a header that is not HTTP: ${JSON.stringify(field.slice(0, 80))}`);
    }
  }
  return { method: m[1], target: m[2], version: m[3], headers };
}

/** Why `head` is not a WebSocket handshake for the feed; undefined when it is one. */
function handshakeRefusal({ method, target, version, headers }: Head): ApiError | undefined {
  const url = new URL(target, "http://feed-socket");
  if (method !== "GET" || url.pathname !== FEED_PATH) {
    return new ApiError(
      "not_found",
      `This port serves only the feed's WebSocket (GET ${FEED_PATH}?after=…&stream=websocket), not ${method} ${url.pathname}: use the API's port`,
    );
  }
  const checks: [boolean, string][] = [
    [version === "HTTP/1.1", "a WebSocket handshake is HTTP/1.1"],
    [url.searchParams.get("stream") === "websocket", "ask stream=websocket on this port"],
    [
      headers.get("upgrade")?.toLowerCase() === "websocket",
      "the handshake needs Upgrade: websocket",
    ],
    [
      /\bupgrade\b/i.test(headers.get("connection") ?? ""),
      "the handshake needs Connection: Upgrade",
    ],
    [headers.get("sec-websocket-version") === "13", "only Sec-WebSocket-Version 13 is served"],
    [
      validKey(headers.get("sec-websocket-key") ?? undefined),
      "Sec-WebSocket-Key must be 16 bytes in base64",
    ],
  ];
  const failed = checks.find(([ok]) => !ok);
  return failed ? notHandshake(failed[1]) : undefined;
}

function notHandshake(why: string): ApiError {
  return new ApiError("invalid_request", `Not a WebSocket handshake for the feed: ${why}`);
}

function errorResponse(err: ApiError): Response {
  const headers = { "content-type": "application/json", "sec-websocket-version": "13" };
  return new Response(JSON.stringify(err.toBody()), { status: err.status, headers });
}

/** Writes `res` as a plain HTTP/1.1 answer, then closes the connection. */
async function answer(conn: Deno.Conn, res: Response): Promise<void> {
  const body = new Uint8Array(await res.arrayBuffer());
  let head = `HTTP/1.1 ${res.status} ${res.statusText || (res.ok ? "OK" : "Refused")}\r\n`;
  for (const [name, value] of res.headers) {
    if (name !== "content-length" && name !== "connection") head += `${name}: ${value}\r\n`;
  }
  head += `content-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  try {
    await writeAll(conn, head, body);
  } catch { /* the client left */ }
  closeQuietly(conn);
}

async function writeAll(conn: Deno.Conn, head: string, body?: Uint8Array): Promise<void> {
  const text = new TextEncoder().encode(head);
  const bytes = body ? new Uint8Array(text.length + body.length) : text;
  if (body) {
    bytes.set(text);
    bytes.set(body, text.length);
  }
  let done = 0;
  while (done < bytes.length) done += await conn.write(bytes.subarray(done));
}

function closeQuietly(closable: { close(): void }): undefined {
  try {
    closable.close();
  } catch { /* closed */ }
  return undefined;
}
