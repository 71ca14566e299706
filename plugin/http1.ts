/**
 * Just enough HTTP/1.1 for one POST and its reply over a unix socket. Hand-rolled rather than
 * fetch + Deno.createHttpClient because it starts a few milliseconds faster and needs no extra
 * net permission for the fake host name (measured; see README.md).
 */

export interface HttpReply {
  status: number;
  body: string;
}

const encoder = new TextEncoder();
const CRLF2 = [13, 10, 13, 10];

export function encodeRequest(path: string, body: string): Uint8Array {
  const payload = encoder.encode(body);
  const head = encoder.encode(
    `POST ${path} HTTP/1.1\r\nHost: knitter-agent\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${payload.length}\r\nConnection: close\r\n\r\n`,
  );
  const out = new Uint8Array(head.length + payload.length);
  out.set(head);
  out.set(payload, head.length);
  return out;
}

function indexOfSeq(buf: Uint8Array, seq: number[], from: number): number {
  outer: for (let i = from; i <= buf.length - seq.length; i++) {
    for (let j = 0; j < seq.length; j++) if (buf[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

/** Decodes a chunked body; undefined while incomplete. Trailers are skipped. */
function dechunk(buf: Uint8Array, start: number): Uint8Array | undefined {
  const parts: Uint8Array[] = [];
  let pos = start;
  for (;;) {
    const eol = indexOfSeq(buf, [13, 10], pos);
    if (eol < 0) return undefined;
    const sizeText = new TextDecoder().decode(buf.subarray(pos, eol)).split(";")[0].trim();
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw new Error(`bad chunk size "${sizeText}"`);
    const size = parseInt(sizeText, 16);
    if (size === 0) {
      // Last chunk: wait for the blank line that ends the (usually empty) trailer section.
      if (indexOfSeq(buf, CRLF2, eol) < 0) return undefined;
      break;
    }
    if (buf.length < eol + 2 + size + 2) return undefined;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Parses a reply from the bytes received so far. Returns undefined when more bytes are needed;
 * with `eof` set, a reply without a length takes the rest of the stream as its body.
 * Throws on anything that is not HTTP/1.x.
 */
export function parseReply(buf: Uint8Array, eof: boolean): HttpReply | undefined {
  let start = 0;
  for (;;) {
    const end = indexOfSeq(buf, CRLF2, start);
    if (end < 0) {
      if (eof) throw new Error(`connection closed after ${buf.length} bytes, inside the headers`);
      return undefined;
    }
    const head = new TextDecoder().decode(buf.subarray(start, end)).split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
    if (!m) throw new Error(`not an HTTP/1.x status line: ${JSON.stringify(head[0].slice(0, 80))}`);
    const status = Number(m[1]);
    const bodyStart = end + 4;
    // 1xx replies are interim; the real one follows.
    if (status < 200) {
      start = bodyStart;
      continue;
    }
    const headers = new Map<string, string>();
    for (const line of head.slice(1)) {
      const colon = line.indexOf(":");
      if (colon > 0) {
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    let body: Uint8Array | undefined;
    if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
      body = dechunk(buf, bodyStart);
    } else if (headers.has("content-length")) {
      const length = Number(headers.get("content-length"));
      if (!Number.isInteger(length) || length < 0) throw new Error("bad Content-Length");
      if (buf.length >= bodyStart + length) body = buf.subarray(bodyStart, bodyStart + length);
    } else if (eof) {
      body = buf.subarray(bodyStart);
    }
    if (body === undefined) {
      if (eof) throw new Error("connection closed before the end of the reply body");
      return undefined;
    }
    return { status, body: new TextDecoder().decode(body) };
  }
}
