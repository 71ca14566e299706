/**
 * The manager's public listener, in front of `Deno.serve`: it closes connections whose clients are
 * too slow, which `Deno.serve` itself never does (it has no header read timeout, so a client that
 * sends a request's headers a byte at a time holds a connection, and the handler never hears of it).
 *
 * Each accepted connection (TLS is ended here) is relayed to a `Deno.serve` on loopback. The relay
 * knows when that server is handling a request of the connection (the handler reports it), so it
 * can time what lies between: a connection with no request in progress must deliver a complete
 * request header within `headerTimeoutMs` of its first byte (of its opening, for a new one), and
 * may sit idle between requests for `idleTimeoutMs`. Reading the body is timed by the handler
 * (app.ts), answering a request by nobody: a long-poll may take its minute.
 *
 * A connection answered a refusal of fairness.ts (a 429, its caller over its budget; a body too
 * large or too deep) is not read for a while (its Retry-After, at most HOLD_OFF_MAX_MS): a client
 * that retries at once, ignoring Retry-After, waits on its own connection instead of costing the
 * manager a refusal per round trip. Others' connections are read as ever.
 *
 * New connections cost more than requests on one (a relay, a loopback connection, the HTTP
 * server's own): each client address has a budget of them (a token bucket, `connectionsPerSecond`
 * and `connectionBurst`), beyond which a connection is closed as soon as it is accepted. Agents and
 * tools keep their connections open and never come near it.
 */
import { holdOffMs } from "./fairness.ts";

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
}

/** Each client address's budget of new connections (token buckets). */
class ConnectionBudget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly perSecond: number, private readonly burst: number) {}

  /** Takes one for `address`; false when it has none left. */
  take(address: string): boolean {
    if (this.perSecond <= 0) return true;
    const now = performance.now();
    const b = this.buckets.get(address) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    this.buckets.set(address, b);
    if (this.buckets.size > 10_000) this.forgetFull(now);
    return true;
  }

  /** Buckets that have filled up again are what new ones would be. */
  private forgetFull(now: number): void {
    for (const [address, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.perSecond >= this.burst) {
        this.buckets.delete(address);
      }
    }
  }
}

/** What the relay knows of one client connection. */
class Relayed {
  /** Requests of this connection that the server is handling. */
  active = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  closed = false;

  constructor(
    readonly outer: Deno.Conn,
    readonly inner: Deno.Conn,
    private readonly limits: GuardLimits,
    private readonly onTimeout: (reason: string) => void,
  ) {}

  /** Whether the clock running is the idle one (replaced by a header clock on the next byte). */
  private idle = false;
  /** Until when (ms, Date.now) the client's bytes are left unread. */
  private heldUntil = 0;

  /**
   * The client was refused for its budget: its next bytes wait `ms` (at most HOLD_OFF_MAX_MS),
   * less up to half at random, so that a crowd of connections refused at once is not read again
   * all at once.
   */
  holdOff(ms: number): void {
    const wait = Math.min(ms, HOLD_OFF_MAX_MS) * (0.5 + Math.random() / 2);
    this.heldUntil = Math.max(this.heldUntil, Date.now() + wait);
  }

  /** When the client's bytes may be read again; nothing when they may now. */
  released(): Promise<void> | undefined {
    if (this.heldUntil <= Date.now()) return undefined;
    return (async () => {
      for (let wait = this.heldUntil - Date.now(); wait > 0; wait = this.heldUntil - Date.now()) {
        await new Promise((r) => setTimeout(r, wait));
      }
    })();
  }

  /** Bytes came from the client. Between requests they start the header clock. */
  sawBytes(): void {
    if (this.active === 0 && (this.timer === undefined || this.idle)) this.arm("header");
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
    this.idle = kind === "idle";
  }

  disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.idle = false;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.disarm();
    for (const c of [this.outer, this.inner]) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
  }
}

export async function serveGuarded(
  options: GuardOptions,
  handler: (
    req: Request,
    info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ) => Response | Promise<Response>,
): Promise<GuardedServer> {
  const limits = { ...DEFAULT_GUARD, ...options.limits };
  /** Relayed connections by the local port of their loopback connection to the inner server. */
  const relayed = new Map<number, Relayed>();
  let innerReady!: () => void;
  const listening = new Promise<void>((r) => (innerReady = r));
  const inner = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => innerReady() },
    async (req, info) => {
      const r = relayed.get(info.remoteAddr.port);
      if (r) {
        r.began();
        info.completed.catch(() => {}).finally(() => r.ended());
      }
      const res = await handler(req, info);
      const hold = holdOffMs(res);
      if (r && hold > 0) r.holdOff(hold);
      return res;
    },
  );
  await listening;
  const innerPort = inner.addr.port;
  const listener: Deno.Listener = options.tls
    ? Deno.listenTls({ hostname: options.hostname, port: options.port, ...options.tls })
    : Deno.listen({ hostname: options.hostname, port: options.port });

  const relay = async (outer: Deno.Conn) => {
    const remote = `${(outer.remoteAddr as Deno.NetAddr).hostname}:${
      (outer.remoteAddr as Deno.NetAddr).port
    }`;
    let conn: Deno.Conn;
    try {
      conn = await Deno.connect({ hostname: "127.0.0.1", port: innerPort });
    } catch {
      outer.close();
      return;
    }
    // Small requests and answers go out at once, not after Nagle's delay.
    for (const c of [outer, conn]) {
      try {
        (c as Deno.TcpConn).setNoDelay?.(true);
      } catch { /* not TCP */ }
    }
    const key = (conn.localAddr as Deno.NetAddr).port;
    const r: Relayed = new Relayed(outer, conn, limits, (reason) => {
      options.onSlowClient?.({ remote, reason });
      r.close();
    });
    relayed.set(key, r);
    // A new connection owes its first request header (and, with TLS, the handshake) at once.
    r.arm("header");
    const up = pump(outer, conn, () => r.sawBytes(), () => r.released());
    const down = pump(conn, outer);
    const first = await Promise.race([up.then(() => "up"), down.then(() => "down")]);
    // The client stopped sending (or its bytes were refused): let the server's answer, a 400 for
    // a header too big to parse, reach it first, for a while.
    if (first === "up") {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        down,
        new Promise((res) => timer = setTimeout(res, limits.headerTimeoutMs)),
      ]);
      clearTimeout(timer);
    }
    r.close();
    await Promise.allSettled([up, down]);
    relayed.delete(key);
  };

  const budget = new ConnectionBudget(limits.connectionsPerSecond, limits.connectionBurst);
  const accepting = (async () => {
    for (;;) {
      let c: Deno.Conn;
      try {
        c = await listener.accept();
      } catch {
        return; // closed
      }
      if (!budget.take((c.remoteAddr as Deno.NetAddr).hostname)) {
        options.onRefusedConnection?.();
        try {
          c.close();
        } catch { /* gone */ }
        continue;
      }
      relay(c).catch(() => {});
    }
  })();

  return {
    addr: listener.addr as Deno.NetAddr,
    finished: inner.finished,
    async shutdown() {
      try {
        listener.close();
      } catch { /* closed */ }
      await accepting;
      for (const r of relayed.values()) if (r.active === 0) r.close();
      await inner.shutdown();
      for (const r of relayed.values()) r.close();
    },
  };
}

/**
 * Copies `from` to `to` until either ends; `seen` hears of every chunk, `gate` holds each read
 * back while it is pending.
 */
async function pump(
  from: Deno.Conn,
  to: Deno.Conn,
  seen?: () => void,
  gate?: () => Promise<void> | undefined,
): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const held = gate?.();
      if (held) await held;
      const n = await from.read(buf);
      if (n === null) break;
      seen?.();
      let off = 0;
      while (off < n) off += await to.write(buf.subarray(off, n));
    }
  } catch { /* either side went away */ }
  try {
    await to.closeWrite();
  } catch { /* closed */ }
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
