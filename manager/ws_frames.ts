/**
 * WebSocket frames as the feed's socket listener (feed_listener.ts) writes and reads them (RFC
 * 6455): server frames are unmasked, so a page's frame is the same bytes for every follower and is
 * made once per page line; client frames are masked, and the feed only takes control frames
 * (close, ping, pong) from its followers, which never send data.
 */

/** The opcodes of RFC 6455 section 5.2. */
export const OP = {
  continuation: 0x0,
  text: 0x1,
  binary: 0x2,
  close: 0x8,
  ping: 0x9,
  pong: 0xa,
} as const;

/** A control frame carries at most this much (RFC 6455 section 5.5). */
export const CONTROL_MAX = 125;

/** The longest client frame the feed reads: a masked control frame at its largest. */
export const CLIENT_FRAME_MAX = 2 + 4 + CONTROL_MAX;

/** The RFC's GUID, appended to the client's key for Sec-WebSocket-Accept. */
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Whether `key` is a Sec-WebSocket-Key: 16 bytes in base64. */
export function validKey(key: string | undefined): key is string {
  if (key === undefined || !/^[A-Za-z0-9+/]{22}==$/.test(key)) return false;
  return atob(key).length === 16;
}

/** Sec-WebSocket-Accept for `key`: base64 of SHA-1 of the key and the GUID. */
export async function acceptOf(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(key + GUID));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/** An unmasked, final frame of `op` carrying `payload`. */
export function serverFrame(op: number, payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const frame = new Uint8Array(head + n);
  frame[0] = 0x80 | op;
  if (head === 2) frame[1] = n;
  else if (head === 4) {
    frame[1] = 126;
    new DataView(frame.buffer).setUint16(2, n);
  } else {
    frame[1] = 127;
    new DataView(frame.buffer).setBigUint64(2, BigInt(n));
  }
  frame.set(payload, head);
  return frame;
}

const FRAMES = new WeakMap<Uint8Array, Uint8Array>();

/**
 * A page's line as a binary frame, made once: the line is shared by every follower of a group
 * (feed_streams.ts lineOf), and so is its frame.
 */
export function binaryFrameOf(line: Uint8Array): Uint8Array {
  let frame = FRAMES.get(line);
  if (!frame) {
    frame = serverFrame(OP.binary, line);
    FRAMES.set(line, frame);
  }
  return frame;
}

/** A close frame with `code` and a reason (cut to fit a control frame). */
export function closeFrame(code: number, reason: string): Uint8Array {
  const text = new TextEncoder().encode(reason).subarray(0, CONTROL_MAX - 2);
  const payload = new Uint8Array(2 + text.length);
  new DataView(payload.buffer).setUint16(0, code);
  payload.set(text, 2);
  return serverFrame(OP.close, payload);
}

/** A client frame read: its opcode and unmasked payload, and how many bytes it took. */
export interface ClientFrame {
  op: number;
  payload: Uint8Array;
  size: number;
}

/** Why a client's frame ends its socket, and the close code that says so. */
export class FrameError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/** Close codes: a protocol error, and a frame the feed does not take (data, or too large). */
export const PROTOCOL_ERROR = 1002;
export const POLICY = 1008;

/**
 * The first frame in `bytes`, or undefined when it is not all there yet. A frame the feed does not
 * take throws FrameError: unmasked, fragmented or reserved-bit control frames (protocol errors),
 * data frames and anything longer than a control frame (the feed reads nothing from followers).
 */
export function readClientFrame(bytes: Uint8Array): ClientFrame | undefined {
  if (bytes.length < 2) return undefined;
  const op = bytes[0] & 0x0f;
  if ((bytes[0] & 0x70) !== 0) throw new FrameError(PROTOCOL_ERROR, "reserved bits set");
  if ((bytes[1] & 0x80) === 0) throw new FrameError(PROTOCOL_ERROR, "a client frame unmasked");
  if (op !== OP.close && op !== OP.ping && op !== OP.pong) {
    throw new FrameError(POLICY, "the feed takes no data from followers");
  }
  if ((bytes[0] & 0x80) === 0) throw new FrameError(PROTOCOL_ERROR, "a fragmented control frame");
  const n = bytes[1] & 0x7f;
  if (n > CONTROL_MAX) throw new FrameError(PROTOCOL_ERROR, "a control frame over 125 bytes");
  const size = 6 + n;
  if (bytes.length < size) return undefined;
  const mask = bytes.subarray(2, 6);
  const payload = new Uint8Array(n);
  for (let i = 0; i < n; i++) payload[i] = bytes[6 + i] ^ mask[i & 3];
  return { op, payload, size };
}
