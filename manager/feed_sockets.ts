/**
 * The change feed over a WebSocket (`GET /feed?after=…&stream=websocket` with `Upgrade:
 * websocket`): one binary message a page, the same bytes as the page's NDJSON line (its JSON and a
 * newline), written once per group of followers (feed_streams.ts) and sent to every socket of the
 * group. A socket costs the manager less than a streamed answer (Deno holds a resource of about 40
 * KiB for a `ReadableStream` body, docs/benchmarks.md) and a page costs one send, not a chunk pulled
 * through a stream.
 *
 * A follower that does not read is cut off (close 1008) once more than MAX_BUFFERED_BYTES wait for
 * it in its socket, as a stream's is; it resumes from its last cursor. A last line (an error, as
 * the stream's) is sent before a close 1000.
 *
 * Deno's HTTP server on one accepted connection (the connection guard's, conn_guard.ts) closes a
 * socket upgraded on it as soon as the connection's HTTP part ends: on the guarded API port the
 * upgrade is refused (501 feed_socket_unavailable), and followers open their sockets on the feed
 * socket port (`listen.feedSocketPort`, feed_listener.ts: the same guard's protections, the socket
 * served in JavaScript on the raw connection) or use the NDJSON stream.
 */
import { ApiError } from "./errors.ts";
import { FeedSink, MAX_BUFFERED_BYTES } from "./feed_streams.ts";
import { servedPerConnection } from "./conn_guard.ts";
import { type ConnSocket, takeSocket } from "./ws_conn.ts";

/** Close codes: done (a last line said why), and a follower cut off for not reading. */
const NORMAL = 1000;
const CUT_OFF = 1008;

/** One follower's socket: lines queued before it opens go out when it does. */
export class FeedSocket extends FeedSink {
  private socket: WebSocket | ConnSocket | undefined;
  /** Lines waiting for the socket to open (its first page, maybe a heartbeat or a last line). */
  private pending: Uint8Array[] | undefined;
  /** Closing once the pending lines are sent (a last line came before the socket opened). */
  private closing = false;

  /** `first`: its first line (the page after the follower's cursor). */
  constructor(first: Uint8Array) {
    super();
    this.pending = [first];
  }

  /**
   * The answer to `req`: the upgrade to a socket that carries this follower's pages. A request that
   * is no WebSocket handshake, or one that came through the connection guard, is refused (and this
   * follower ends).
   */
  accept(req: Request): Response {
    try {
      // The feed's socket listener (feed_listener.ts) handed its connection's socket along.
      const handed = takeSocket(req);
      if (handed) {
        this.attach(handed);
        return new Response(null, { status: 200 });
      }
      if (servedPerConnection(req)) {
        throw new ApiError(
          "feed_socket_unavailable",
          "This manager serves its API through its connection guard, on which a WebSocket does not outlive its upgrade: open the socket on its feed socket port (GET /api/v1/feed/socket says which; a manager has one when listen.feedSocketPort is set), or follow the feed with stream=ndjson (or long polls)",
        );
      }
      if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") {
        throw new ApiError(
          "invalid_request",
          "stream=websocket needs a WebSocket handshake (Upgrade: websocket); without one use stream=ndjson",
          "query.stream",
        );
      }
      // No pings of Deno's own: the heartbeat pages keep the follower informed, and a dead one
      // fails the writes (a timer a socket costs about 3 KiB of 21, measured).
      const { socket, response } = Deno.upgradeWebSocket(req, { idleTimeout: 0 });
      socket.binaryType = "arraybuffer";
      this.attach(socket);
      return response;
    } catch (err) {
      this.finish();
      if (err instanceof ApiError) throw err;
      throw new ApiError("invalid_request", `Not a WebSocket handshake: ${(err as Error).message}`);
    }
  }

  write(line: Uint8Array): void {
    if (!this.isOpen || this.closing) return;
    if (this.pending) {
      this.pending.push(line);
      return;
    }
    const socket = this.socket!;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.closeSocket(CUT_OFF, `read nothing of ${MAX_BUFFERED_BYTES} bytes queued`);
      return;
    }
    socket.send(line);
  }

  close(last?: Uint8Array): void {
    if (!this.isOpen) return;
    if (this.pending) {
      // Not open yet: it ends once what waits is sent (accept() ends it if it never opens).
      if (last) this.pending.push(last);
      this.closing = true;
      return;
    }
    if (last) this.socket!.send(last);
    this.closeSocket(NORMAL, "");
  }

  private attach(socket: WebSocket | ConnSocket): void {
    this.socket = socket;
    socket.onopen = () => {
      const lines = this.pending ?? [];
      this.pending = undefined;
      for (const line of lines) socket.send(line);
      if (this.closing || !this.isOpen) this.closeSocket(NORMAL, "");
    };
    socket.onclose = () => this.finish();
    // An error is followed by a close; nothing to add.
    socket.onerror = () => {};
  }

  private closeSocket(code: number, reason: string): void {
    try {
      this.socket?.close(code, reason);
    } catch { /* already closing */ }
    this.finish();
  }
}
