/**
 * A small OpenFlow 1.3 client of one bridge, enough for the router's slow path (agent/README.md,
 * "Router errors"): HELLO, ECHO, SET_CONFIG (packet-ins of whole frames), SET_ASYNC (which
 * packet-ins), PACKET_IN (with the registers the punting flow set, Open vSwitch's "pipeline
 * fields" in the match) and PACKET_OUT (output, set_field of a register, Nicira's resubmit).
 * Framing and fields per the OpenFlow 1.3.5 specification (ofp_header, ofp_packet_in,
 * ofp_packet_out, OXM TLVs), registers as Open vSwitch encodes them (NXM_NX_REGn, class 0x0001).
 * @module
 */

const VERSION = 4;
const T_HELLO = 0;
const T_ERROR = 1;
const T_ECHO_REQUEST = 2;
const T_ECHO_REPLY = 3;
const T_SET_CONFIG = 9;
const T_PACKET_IN = 10;
const T_PACKET_OUT = 13;
const T_SET_ASYNC = 28;
/** Packet-in reasons (ofp_packet_in_reason). */
export const REASON_ACTION = 1;
export const REASON_INVALID_TTL = 2;
/** miss_send_len: whole frames, never buffered in the switch. */
const NO_BUFFER_LEN = 0xffff;
const NO_BUFFER = 0xffffffff;
const PORT_CONTROLLER = 0xfffffffd;
const OXM_BASIC = 0x8000;
const OXM_IN_PORT = 0;
const NXM_1 = 0x0001;
const ACTION_OUTPUT = 0;
const ACTION_SET_FIELD = 25;
const ACTION_EXPERIMENTER = 0xffff;
const NICIRA = 0x00002320;
const NXAST_RESUBMIT_TABLE = 14;
/** OpenFlow 1.0's IN_PORT, as Nicira's resubmit spells "the packet's own in_port". */
const OFPP10_IN_PORT = 0xfff8;

/** A packet the switch sent up, with the registers the flows set (zero ones are left out). */
export interface PacketIn {
  reason: number;
  tableId: number;
  cookie: bigint;
  inPort: number;
  regs: number[];
  frame: Uint8Array;
}

/** One connection, after the switch answered HELLO. */
export class OpenFlowConn {
  private buf = new Uint8Array(0);
  private xid = 1;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  private constructor(private readonly conn: Deno.UnixConn) {
    this.reader = conn.readable.getReader();
  }

  /** Connects to a unix socket of the switch, says hello and asks for whole packet-ins. */
  static async open(path: string): Promise<OpenFlowConn> {
    const conn = await Deno.connect({ transport: "unix", path });
    const of = new OpenFlowConn(conn);
    try {
      await of.send(T_HELLO, new Uint8Array(0));
      const hello = await of.next();
      if (hello?.[1] !== T_HELLO) throw new Error("the switch did not answer HELLO");
      if (hello[0] < VERSION) throw new Error(`the switch speaks OpenFlow version ${hello[0]}`);
      const config = new Uint8Array(4);
      new DataView(config.buffer).setUint16(2, NO_BUFFER_LEN);
      await of.send(T_SET_CONFIG, config);
      // Packet-ins of the `controller` action and of `dec_ttl` with a TTL that ran out (Open
      // vSwitch leaves the latter off by default); no port status or flow removed messages.
      const async = new Uint8Array(24);
      new DataView(async.buffer).setUint32(0, (1 << REASON_ACTION) | (1 << REASON_INVALID_TTL));
      await of.send(T_SET_ASYNC, async);
      return of;
    } catch (err) {
      of.close();
      throw err;
    }
  }

  /**
   * The next packet-in; echo requests are answered on the way, errors thrown. null: the switch
   * closed the connection.
   */
  async packetIn(): Promise<PacketIn | null> {
    for (;;) {
      const m = await this.next();
      if (!m) return null;
      if (m[1] === T_ECHO_REQUEST) {
        const reply = m.slice();
        reply[1] = T_ECHO_REPLY;
        await this.write(reply);
      } else if (m[1] === T_ERROR) {
        const v = new DataView(m.buffer, m.byteOffset);
        throw new Error(
          `the switch refused a message: type ${v.getUint16(8)} code ${v.getUint16(10)}`,
        );
      } else if (m[1] === T_PACKET_IN) {
        return parsePacketIn(m);
      }
    }
  }

  /** Sends `frame` out of `port` (an ofport, or a reserved port such as IN_PORT). */
  packetOut(frame: Uint8Array, port: number): Promise<void> {
    return this.packetOutActions(frame, [outputAction(port)]);
  }

  /** Runs `actions` (outputAction, setRegAction, resubmitAction) on `frame`, as from `inPort`. */
  async packetOutActions(
    frame: Uint8Array,
    actions: Uint8Array[],
    inPort = PORT_CONTROLLER,
  ): Promise<void> {
    const length = actions.reduce((n, a) => n + a.length, 0);
    const body = new Uint8Array(16 + length + frame.length);
    const v = new DataView(body.buffer);
    v.setUint32(0, NO_BUFFER);
    v.setUint32(4, inPort);
    v.setUint16(8, length);
    let at = 16;
    for (const a of actions) {
      body.set(a, at);
      at += a.length;
    }
    body.set(frame, at);
    await this.send(T_PACKET_OUT, body);
  }

  close(): void {
    try {
      this.conn.close();
    } catch { /* closed already */ }
  }

  private async send(type: number, body: Uint8Array): Promise<void> {
    const m = new Uint8Array(8 + body.length);
    const v = new DataView(m.buffer);
    m[0] = VERSION;
    m[1] = type;
    v.setUint16(2, m.length);
    v.setUint32(4, this.xid++);
    m.set(body, 8);
    await this.write(m);
  }

  private async write(bytes: Uint8Array): Promise<void> {
    for (let off = 0; off < bytes.length;) off += await this.conn.write(bytes.subarray(off));
  }

  /** The next whole message; null at the end of the stream. */
  private async next(): Promise<Uint8Array | null> {
    for (;;) {
      if (this.buf.length >= 8) {
        const length = (this.buf[2] << 8) | this.buf[3];
        if (length < 8) throw new Error(`bad OpenFlow message length ${length}`);
        if (this.buf.length >= length) {
          const m = this.buf.subarray(0, length);
          this.buf = this.buf.subarray(length);
          return m;
        }
      }
      const { value, done } = await this.reader.read();
      if (done) return null;
      const joined = new Uint8Array(this.buf.length + value.length);
      joined.set(this.buf);
      joined.set(value, this.buf.length);
      this.buf = joined;
    }
  }
}

/** OFPAT_OUTPUT to `port`. */
export function outputAction(port: number): Uint8Array {
  const a = new Uint8Array(16);
  const v = new DataView(a.buffer);
  v.setUint16(0, ACTION_OUTPUT);
  v.setUint16(2, 16);
  v.setUint32(4, port);
  return a; // max_len 0: only output to the controller reads it
}

/** OFPAT_SET_FIELD of register `reg` (NXM_NX_REGn) to `value`. */
export function setRegAction(reg: number, value: number): Uint8Array {
  const a = new Uint8Array(16);
  const v = new DataView(a.buffer);
  v.setUint16(0, ACTION_SET_FIELD);
  v.setUint16(2, 16);
  v.setUint32(4, (NXM_1 << 16) | (reg << 9) | 4);
  v.setUint32(8, value);
  return a;
}

/** Open vSwitch's resubmit(,table) (NXAST_RESUBMIT_TABLE), from the packet's own in_port. */
export function resubmitAction(table: number): Uint8Array {
  const a = new Uint8Array(16);
  const v = new DataView(a.buffer);
  v.setUint16(0, ACTION_EXPERIMENTER);
  v.setUint16(2, 16);
  v.setUint32(4, NICIRA);
  v.setUint16(8, NXAST_RESUBMIT_TABLE);
  v.setUint16(10, OFPP10_IN_PORT);
  a[12] = table;
  return a;
}

/** ofp_packet_in: header, buffer_id, total_len, reason, table_id, cookie, match, pad, frame. */
export function parsePacketIn(m: Uint8Array): PacketIn {
  const v = new DataView(m.buffer, m.byteOffset, m.byteLength);
  const matchLength = v.getUint16(26);
  const fields = m.subarray(28, 24 + matchLength);
  const regs: number[] = [];
  let inPort = 0;
  for (let at = 0; at + 4 <= fields.length;) {
    const header = new DataView(fields.buffer, fields.byteOffset + at).getUint32(0);
    const cls = header >>> 16;
    const field = (header >>> 9) & 0x7f;
    const length = header & 0xff;
    const value = new DataView(fields.buffer, fields.byteOffset + at + 4, length);
    if (cls === OXM_BASIC && field === OXM_IN_PORT) inPort = value.getUint32(0);
    if (cls === NXM_1 && field < 16 && length === 4) regs[field] = value.getUint32(0);
    at += 4 + length;
  }
  const padded = (matchLength + 7) & ~7;
  return {
    reason: m[14],
    tableId: m[15],
    cookie: v.getBigUint64(16),
    inPort,
    regs: Array.from({ length: 8 }, (_, i) => regs[i] ?? 0),
    frame: m.subarray(24 + padded + 2),
  };
}
