/**
 * The manager's public listener: it accepts each connection itself and hands it to Deno's own HTTP
 * server (the one `Deno.serve` runs on each connection it accepts), so requests and answers never
 * pass through JavaScript on their way; what the guard adds is in the accept path and in the
 * handler's call, not in the bytes. It closes connections whose clients are too slow, which
 * `Deno.serve` itself never does (it has no header read timeout, so a client that sends a
 * request's headers a byte at a time holds a connection, and the handler never hears of it).
 *
 * The guard knows when the server is handling a request of a connection (the handler is called
 * once the header is complete, and the request's `completed` settles when its answer is sent), so
 * it times what lies between: a new connection must complete its first request header within
 * `headerTimeoutMs` (TLS handshake included), and a connection with no request in progress is
 * closed `idleTimeoutMs` after its last answer. The server reads the bytes, so the guard cannot
 * tell an idle client from one trickling its next header: the idle clock bounds both, as the
 * relay this replaces bounded them by idle + header time. Reading the body is timed by the
 * handler (app.ts), answering a request by nobody: a long-poll may take its minute.
 *
 * A connection answered a refusal of fairness.ts (a 429, its caller over its budget; a body too
 * large or too deep) has its next request held for a while (its Retry-After, at most
 * HOLD_OFF_MAX_MS) before the handler sees it: a client that retries at once, ignoring
 * Retry-After, waits on its own connection instead of costing the manager a refusal per round
 * trip. Others' connections are served as ever.
 *
 * New connections cost more than requests on one (an HTTP server's state per connection): each
 * client address has a budget of them (a token bucket, `connectionsPerSecond` and
 * `connectionBurst`), beyond which a connection is closed as soon as it is accepted. Agents and
 * tools keep their connections open and never come near it.
 *
 * A WebSocket does not work through the guard by default: Deno's server on one connection ends
 * when the connection's HTTP part does, which an upgrade is, and closing that server closes every
 * socket upgraded on it (Deno 2.9.6: the socket reads its end at once, close code 1005, whether the
 * server is closed gracefully or not; conn_guard_test.ts pins it). The guard marks the requests it
 * serves so (servedPerConnection), and a route that would upgrade refuses instead (feed_sockets.ts):
 * the feed's sockets have a listener of their own (feed_listener.ts), behind the same protections.
 */
import { holdOffMs } from "./fairness.ts";
import { TokenBuckets } from "@knitter/common";

/** The longest a throttled connection goes unread. */
export const HOLD_OFF_MAX_MS = 1000;

export interface GuardLimits {
  /** A request's header must arrive within this of its first byte. */
  headerTimeoutMs: number;
  /** A keep-alive connection with no request in progress is closed after this. */
  idleTimeoutMs: number;
  /** New connections a second from one client address, sustained (0: no limit). */
  connectionsPerSecond: number;
  /** New connections at once from one address after a quiet while. */
  connectionBurst: number;
}

export const DEFAULT_GUARD: GuardLimits = {
  headerTimeoutMs: 10_000,
  idleTimeoutMs: 120_000,
  connectionsPerSecond: 200,
  connectionBurst: 2000,
};

export interface GuardedServer {
  addr: Deno.NetAddr;
  finished: Promise<void>;
  shutdown(): Promise<void>;
}

export interface GuardOptions {
  hostname: string;
  port: number;
  tls?: { cert: string; key: string };
  limits?: Partial<GuardLimits>;
  /** A connection closed for being slow: for the log. */
  onSlowClient?: (what: { remote: string; reason: string }) => void;
  /** A connection closed at once, its address over its budget of new connections. */
  onRefusedConnection?: () => void;
  /** The budget of new connections per address, when shared with another port (feed_listener.ts). */
  budget?: TokenBuckets<string>;
}

type Handler = (
  req: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

/** What Deno's HTTP server on one connection answers (the shape `Deno.serve` returns). */
interface ConnectionServer {
  finished: Promise<void>;
  /** Graceful: the requests in progress are answered first; an idle connection closes at once. */
  shutdown(): Promise<void>;
}

type ServeOnConnection = (
  conn: Deno.Conn,
  signal: AbortSignal | undefined,
  handler: Handler,
  onError: (err: unknown) => Response,
  onListen: (scheme: string) => void,
) => ConnectionServer;

/**
 * Deno's HTTP server on one accepted connection: what `Deno.serve` runs for each connection it
 * accepts, which Deno keeps among its internals rather than as a public call. Looked up once; a
 * Deno without it is named at start (tests/architecture_test.ts checks the pinned one has it).
 */
export function serveOnConnection(): ServeOnConnection {
  const deno = Deno as unknown as Record<symbol, Record<string, unknown> | undefined> & {
    internal?: symbol;
  };
  const serve = deno.internal === undefined
    ? undefined
    : deno[deno.internal]?.serveHttpOnConnection;
  if (typeof serve !== "function") {
    throw new Error(
      `This Deno (${Deno.version.deno}) offers no HTTP server for one accepted connection, ` +
        "which the connection guard needs: run the manager with the Deno in .tools (make setup), " +
        "or serve it behind a proxy that times request headers with limits.headerTimeoutMs: 0",
    );
  }
  return serve as ServeOnConnection;
}

/** The requests handed to the handler by the guard's server on one connection. */
const PER_CONNECTION = new WeakSet<Request>();

/** Whether `req` came through the guard (whose server on one connection no WebSocket outlives). */
export function servedPerConnection(req: Request): boolean {
  return PER_CONNECTION.has(req);
}

/** What the guard knows of one accepted connection. */
class Watched {
  /** Requests of this connection that the server is handling. */
  private active = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Until when (ms, Date.now) the connection's next request waits. */
  private heldUntil = 0;
  private closed = false;
  server: ConnectionServer | undefined;

  constructor(
    private readonly limits: GuardLimits,
    private readonly onTimeout: (reason: string) => void,
  ) {}

  /**
   * The client was refused for its budget: its next request waits `ms` (at most HOLD_OFF_MAX_MS),
   * less up to half at random, so that a crowd of connections refused at once is not served again
   * all at once.
   */
  holdOff(ms: number): void {
    const wait = Math.min(ms, HOLD_OFF_MAX_MS) * (0.5 + Math.random() / 2);
    this.heldUntil = Math.max(this.heldUntil, Date.now() + wait);
  }

  /** When the connection's request may be handled; nothing when it may now. */
  released(): Promise<void> | undefined {
    const wait = this.heldUntil - Date.now();
    if (wait <= 0) return undefined;
    return new Promise((r) => setTimeout(r, wait));
  }

  began(): void {
    this.active++;
    this.disarm();
  }

  ended(): void {
    this.active = Math.max(0, this.active - 1);
    if (this.active === 0) this.arm("idle");
  }

  arm(kind: "header" | "idle"): void {
    this.disarm();
    if (this.closed) return;
    const ms = kind === "header" ? this.limits.headerTimeoutMs : this.limits.idleTimeoutMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.onTimeout(
        kind === "header"
          ? `no complete request header within ${ms} ms`
          : `idle for ${ms} ms between requests`,
      );
    }, ms);
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Closes the connection once its requests in progress are answered (at once when idle). */
  close(): Promise<void> {
    this.disarm();
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return this.server?.shutdown() ?? Promise.resolve();
  }

  /** The server on it has ended (the client left, or close()). */
  gone(): void {
    this.closed = true;
    this.disarm();
  }
}

export function serveGuarded(
  options: GuardOptions,
  handler: Handler,
): Promise<GuardedServer> {
  const limits = { ...DEFAULT_GUARD, ...options.limits };
  const serve = serveOnConnection();
  const watched = new Set<Watched>();
  const listener: Deno.Listener = options.tls
    ? Deno.listenTls({ hostname: options.hostname, port: options.port, ...options.tls })
    : Deno.listen({ hostname: options.hostname, port: options.port });

  const hand = (conn: Deno.Conn) => {
    const addr = conn.remoteAddr as Deno.NetAddr;
    const w: Watched = new Watched(limits, (reason) => {
      options.onSlowClient?.({ remote: `${addr.hostname}:${addr.port}`, reason });
      w.close();
    });
    // Small answers go out at once, not after Nagle's delay.
    try {
      (conn as Deno.TcpConn).setNoDelay?.(true);
    } catch { /* not TCP */ }
    const watch = async (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => {
      w.began();
      // A socket dies with its upgrade here: routes that would upgrade refuse (feed_sockets.ts).
      PER_CONNECTION.add(req);
      info.completed.catch(() => {}).finally(() => w.ended());
      const held = w.released();
      if (held) await held;
      const res = await handler(req, info);
      const hold = holdOffMs(res);
      if (hold > 0) w.holdOff(hold);
      return res;
    };
    try {
      w.server = serve(conn, undefined, watch, internalError, () => {});
    } catch {
      // The connection went before it could be served (reset while accepted).
      w.gone();
      try {
        conn.close();
      } catch { /* gone */ }
      return;
    }
    watched.add(w);
    // A new connection owes its first request header (and, with TLS, the handshake) at once.
    w.arm("header");
    w.server.finished.catch(() => {}).finally(() => {
      w.gone();
      watched.delete(w);
    });
  };

  const budget = options.budget ?? connectionBudget(limits);
  const accepting = acceptBudgeted(listener, budget, options.onRefusedConnection, hand);

  let stopped!: () => void;
  const finished = new Promise<void>((r) => stopped = r);
  return Promise.resolve({
    addr: listener.addr as Deno.NetAddr,
    finished,
    async shutdown() {
      try {
        listener.close();
      } catch { /* closed */ }
      await accepting;
      await Promise.allSettled([...watched].map((w) => w.close()));
      stopped();
    },
  });
}

/** Each client address's budget of new connections. */
export function connectionBudget(limits: GuardLimits): TokenBuckets<string> {
  return new TokenBuckets<string>(limits.connectionsPerSecond, limits.connectionBurst);
}

/**
 * Accepts `listener`'s connections until it closes, each handed to `hand` unless its address is
 * over its budget: then closed at once.
 */
export async function acceptBudgeted(
  listener: Deno.Listener,
  budget: TokenBuckets<string>,
  onRefused: (() => void) | undefined,
  hand: (conn: Deno.Conn) => void,
): Promise<void> {
  for (;;) {
    let c: Deno.Conn;
    try {
      c = await listener.accept();
    } catch {
      return; // closed
    }
    if (!budget.take((c.remoteAddr as Deno.NetAddr).hostname)) {
      onRefused?.();
      try {
        c.close();
      } catch { /* gone */ }
      continue;
    }
    hand(c);
  }
}

/** What `Deno.serve` answers for a handler that throws (the app answers its own errors first). */
function internalError(): Response {
  return new Response("Internal Server Error", { status: 500 });
}

/** `Deno.serve` as it is, for a manager whose proxy enforces the header timeout. */
export async function serveDirect(
  hostname: string,
  port: number,
  tls: { cert: string; key: string } | undefined,
  handler: (
    req: Request,
    info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ) => Response | Promise<Response>,
): Promise<GuardedServer> {
  let ready!: () => void;
  const listening = new Promise<void>((r) => (ready = r));
  const server = Deno.serve({ hostname, port, ...(tls ?? {}), onListen: () => ready() }, handler);
  await listening;
  return { addr: server.addr, finished: server.finished, shutdown: () => server.shutdown() };
}
