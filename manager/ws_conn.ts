/**
 * A server's WebSocket on a raw connection (feed_listener.ts), for the feed: it sends binary
 * messages (each page's frame made once, ws_frames.ts) and answers the client's control frames (a
 * ping its pong, a close its close); a client that sends anything else is dropped. It offers what
 * the feed's socket sink (feed_sockets.ts) uses of a WebSocket: send, close, bufferedAmount (the
 * bytes of writes not yet done) and the open and close events.
 */
import {
  binaryFrameOf,
  CLIENT_FRAME_MAX,
  closeFrame,
  FrameError,
  OP,
  readClientFrame,
  serverFrame,
} from "./ws_frames.ts";

/** How long a closing socket may take to send what it still has queued. */
const CLOSING_MS = 10_000;

export class ConnSocket {
  onopen: ((ev: Event) => unknown) | null = null;
  onclose: ((ev: Event) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  /** Bytes queued in writes not yet done. */
  bufferedAmount = 0;
  private queue: Uint8Array[] = [];
  private writing = false;
  /** A close frame is queued: nothing more is. */
  private closing = false;
  private ended = false;
  private closingTimer: ReturnType<typeof setTimeout> | undefined;
  /** Resolves when the connection is closed. */
  readonly done: Promise<void>;
  private markDone!: () => void;

  constructor(private readonly conn: Deno.Conn) {
    this.done = new Promise((resolve) => (this.markDone = resolve));
  }

  /** The handshake's answer went out: the socket is open and reads the client's frames. */
  open(): void {
    this.onopen?.(new Event("open"));
    this.readFrames();
  }

  send(line: Uint8Array): void {
    this.enqueue(binaryFrameOf(line));
  }

  /**
   * Closes after what is queued, with a close frame; a follower cut off for not reading (1008) is
   * closed at once, since what is queued would never go.
   */
  close(code = 1000, reason = ""): void {
    if (this.closing || this.ended) return;
    if (code === 1008) return this.end();
    this.enqueue(closeFrame(code, reason));
    this.closing = true;
    this.closingTimer = setTimeout(() => this.end(), CLOSING_MS);
  }

  /** Closes the connection now, queued bytes or not. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.closingTimer);
    this.queue = [];
    try {
      this.conn.close();
    } catch { /* gone */ }
    this.markDone();
    this.onclose?.(new Event("close"));
  }

  private enqueue(frame: Uint8Array): void {
    if (this.closing || this.ended) return;
    this.queue.push(frame);
    this.bufferedAmount += frame.length;
    if (!this.writing) this.flush();
  }

  private async flush(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length > 0 && !this.ended) {
        const frame = this.queue[0];
        let done = 0;
        while (done < frame.length) done += await this.conn.write(frame.subarray(done));
        this.queue.shift();
        this.bufferedAmount -= frame.length;
      }
    } catch {
      return this.end(); // the follower went away
    } finally {
      this.writing = false;
    }
    if (this.closing) this.end();
  }

  /** Reads the client's frames (control frames only) until the connection ends. */
  private async readFrames(): Promise<void> {
    const buffer = new Uint8Array(CLIENT_FRAME_MAX);
    let have = 0;
    try {
      for (;;) {
        const n = await this.conn.read(buffer.subarray(have));
        if (n === null) return this.end();
        have += n;
        for (;;) {
          const frame = readClientFrame(buffer.subarray(0, have));
          if (!frame) break;
          this.answer(frame.op, frame.payload);
          buffer.copyWithin(0, frame.size, have);
          have -= frame.size;
        }
      }
    } catch (err) {
      // A frame the feed does not take: its close frame says why, unless a write is under way
      // (its bytes must not be split), then the connection ends, whatever is queued.
      if (err instanceof FrameError && !this.writing && !this.ended) {
        this.writing = true;
        await this.conn.write(closeFrame(err.code, err.message)).catch(() => {});
      }
      this.end();
    }
  }

  private answer(op: number, payload: Uint8Array): void {
    if (op === OP.ping) this.enqueue(serverFrame(OP.pong, payload));
    // The client closes: its close answered (a normal closure), then the connection.
    else if (op === OP.close) this.close(1000, "");
  }
}

/** The sockets the listener hands with its requests to the feed's route, by request. */
const HANDED = new WeakMap<Request, ConnSocket>();
/** The sockets the route took (it answers their follower with pages). */
const TAKEN = new WeakSet<ConnSocket>();

/** Hands `socket` to whoever serves `req` (the feed's route, feed_sockets.ts). */
export function handSocket(req: Request, socket: ConnSocket): void {
  HANDED.set(req, socket);
}

/** The socket handed with `req`, now taken; undefined for a request of the HTTP server. */
export function takeSocket(req: Request): ConnSocket | undefined {
  const socket = HANDED.get(req);
  if (socket) TAKEN.add(socket);
  return socket;
}

/** Whether the route took `socket` (else its request was answered in HTTP). */
export function wasTaken(socket: ConnSocket): boolean {
  return TAKEN.has(socket);
}
