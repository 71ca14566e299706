/**
 * One request to the node agent over its unix socket, with a deadline. Failures are classified
 * into `AgentFailure` kinds here; errors.ts decides what the runtime is told.
 */
import { AgentFailure, type AgentFailureKind } from "./errors.ts";
import { encodeRequest, type HttpReply, parseReply } from "./http1.ts";

export type AgentCall = (
  socket: string,
  route: string,
  body: string,
  timeoutMs: number,
) => Promise<HttpReply>;

function connectFailure(err: unknown): AgentFailureKind {
  if (err instanceof Deno.errors.NotFound) return "missing";
  if (err instanceof Deno.errors.ConnectionRefused) return "refused";
  if (err instanceof Deno.errors.PermissionDenied) return "denied";
  if (err instanceof Deno.errors.NotCapable) return "not-permitted";
  return "broken";
}

async function exchange(
  socket: string,
  request: Uint8Array,
  onConn: (c: Deno.Conn) => void,
): Promise<HttpReply> {
  let conn: Deno.Conn;
  try {
    conn = await Deno.connect({ transport: "unix", path: socket });
  } catch (e) {
    throw new AgentFailure(connectFailure(e), socket, `connect: ${(e as Error).message}`);
  }
  onConn(conn);
  let buf = new Uint8Array(0);
  const parse = (eof: boolean) => {
    try {
      return parseReply(buf, eof);
    } catch (e) {
      throw new AgentFailure("bad-reply", socket, (e as Error).message);
    }
  };
  // Plain read/write rather than conn.readable/writable: the streams machinery costs start-up time.
  try {
    for (let sent = 0; sent < request.length;) sent += await conn.write(request.subarray(sent));
    const chunk = new Uint8Array(16 * 1024);
    for (;;) {
      const n = await conn.read(chunk);
      if (n === null) break;
      const grown = new Uint8Array(buf.length + n);
      grown.set(buf);
      grown.set(chunk.subarray(0, n), buf.length);
      buf = grown;
      const reply = parse(false);
      if (reply) return reply;
    }
  } catch (e) {
    if (e instanceof AgentFailure) throw e;
    throw new AgentFailure("broken", socket, `connection dropped: ${(e as Error).message}`);
  }
  // A crash between accept and reply looks like this: transient, not a protocol mismatch.
  if (buf.length === 0) {
    throw new AgentFailure("broken", socket, "connection closed without a reply");
  }
  return parse(true)!;
}

/** POSTs `body` to `route` on the agent's socket; resolves with any HTTP reply, 2xx or not. */
export const callAgent: AgentCall = async (socket, route, body, timeoutMs) => {
  let conn: Deno.Conn | undefined;
  // AbortSignal.timeout, not setTimeout: the latter loads Deno's Node-style timers, ~4 ms at start.
  const signal = AbortSignal.timeout(timeoutMs);
  const deadline = new Promise<never>((_, reject) => {
    signal.addEventListener("abort", () => {
      reject(new AgentFailure("timeout", socket, `no answer within ${timeoutMs / 1000}s`));
    }, { once: true });
  });
  try {
    return await Promise.race([
      exchange(socket, encodeRequest(route, body), (c) => (conn = c)),
      deadline,
    ]);
  } finally {
    try {
      conn?.close();
    } catch { /* already closed by the reader */ }
  }
};
