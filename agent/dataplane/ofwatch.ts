/**
 * Notices ovs-vswitchd going and coming back, at once: an idle OpenFlow connection to the bridge's
 * management socket (`$OVS_RUNDIR/BRIDGE.mgmt`, the one ovs-ofctl uses). ovs-vswitchd closes it
 * when it exits (or the bridge goes); while it is closed the socket is tried every `pollMs`, and
 * the first connection that works again is "up": a new ovs-vswitchd (no flows), or the bridge made
 * again. The database cannot tell: a restarted ovs-vswitchd writes back the same values.
 *
 * Only the OpenFlow header is spoken: HELLO, and ECHO_REPLY to the switch's ECHO_REQUEST (in the
 * version the switch chose).
 */

const OFP_VERSION_13 = 4;
const OFPT_HELLO = 0;
const OFPT_ECHO_REQUEST = 2;
const OFPT_ECHO_REPLY = 3;
/** How long the switch has to answer our HELLO before the connection is tried again. */
const HELLO_TIMEOUT_MS = 1000;

export type OfWatchEvent = { kind: "up"; first: boolean } | { kind: "down"; error: string };

export class OfWatch {
  private conn: Deno.UnixConn | null = null;
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  constructor(
    readonly socket: string,
    private readonly onEvent: (e: OfWatchEvent) => void,
    private readonly pollMs = 50,
  ) {}

  /** The management socket of `bridge` in `rundir` (default: the system's). */
  static socketOf(bridge: string, rundir?: string): string {
    const dir = rundir ?? Deno.env.get("OVS_RUNDIR") ?? "/var/run/openvswitch";
    return `${dir}/${bridge}.mgmt`;
  }

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    try {
      this.conn?.close();
    } catch { /* already closed */ }
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    let first = true;
    while (!this.stopped) {
      let conn: Deno.UnixConn;
      try {
        conn = await Deno.connect({ transport: "unix", path: this.socket });
      } catch {
        await this.sleep(this.pollMs);
        continue;
      }
      if (this.stopped) {
        conn.close();
        break;
      }
      this.conn = conn;
      let error = "ovs-vswitchd closed the OpenFlow connection";
      let up = false;
      // A connection the switch never accepts (it died with ours in its backlog) never ends.
      const unanswered = setTimeout(() => conn.close(), HELLO_TIMEOUT_MS);
      try {
        await write(conn, header(OFPT_HELLO, 8, 1));
        // Up once the switch answers, not when the socket takes the connection.
        await this.serve(conn, () => {
          clearTimeout(unanswered);
          up = true;
          this.onEvent({ kind: "up", first });
          first = false;
        });
      } catch (err) {
        error = `the OpenFlow connection failed: ${(err as Error).message}`;
      } finally {
        clearTimeout(unanswered);
      }
      this.conn = null;
      try {
        conn.close();
      } catch { /* closed already */ }
      if (this.stopped) break;
      if (up) this.onEvent({ kind: "down", error });
      else await this.sleep(this.pollMs);
    }
  }

  /** Reads until the switch closes the connection; answers echo requests. */
  private async serve(conn: Deno.UnixConn, onFirst: () => void): Promise<void> {
    let buf: Uint8Array = new Uint8Array(0);
    let answered = false;
    for await (const chunk of conn.readable) {
      if (!answered) {
        answered = true;
        onFirst();
      }
      buf = concat(buf, chunk);
      while (buf.length >= 8) {
        const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
        const length = view.getUint16(2);
        if (length < 8) throw new Error(`bad OpenFlow message length ${length}`);
        if (buf.length < length) break;
        if (buf[1] === OFPT_ECHO_REQUEST) {
          const reply = buf.slice(0, length);
          reply[1] = OFPT_ECHO_REPLY;
          await write(conn, reply);
        }
        buf = buf.slice(length);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

function header(type: number, length: number, xid: number): Uint8Array {
  const b = new Uint8Array(length);
  const v = new DataView(b.buffer);
  v.setUint8(0, OFP_VERSION_13);
  v.setUint8(1, type);
  v.setUint16(2, length);
  v.setUint32(4, xid);
  return b;
}

async function write(conn: Deno.UnixConn, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
