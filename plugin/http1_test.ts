import assert from "node:assert/strict";
import { encodeRequest, parseReply } from "./http1.ts";

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("http1: the request is one POST with an exact length and Connection: close", () => {
  const text = new TextDecoder().decode(encodeRequest("/v1/cni/add", '{"é":1}'));
  assert.equal(
    text,
    "POST /v1/cni/add HTTP/1.1\r\nHost: knitter-agent\r\nContent-Type: application/json\r\n" +
      'Content-Length: 8\r\nConnection: close\r\n\r\n{"é":1}',
  );
});

Deno.test("http1: Content-Length replies complete without waiting for EOF", () => {
  const full = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}";
  for (let cut = 0; cut < full.length; cut++) {
    assert.equal(parseReply(enc(full.slice(0, cut)), false), undefined, `cut ${cut}`);
  }
  assert.deepEqual(parseReply(enc(full), false), { status: 200, body: "{}" });
  assert.deepEqual(parseReply(enc(full + "junk"), false), { status: 200, body: "{}" });
});

Deno.test("http1: chunked replies, with extensions and trailers", () => {
  const full = "HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n" +
    '4;x=y\r\n{"co\r\n6\r\nde":7}\r\n0\r\nX-Trailer: 1\r\n\r\n';
  for (let cut = 0; cut < full.length; cut++) {
    assert.equal(parseReply(enc(full.slice(0, cut)), false), undefined, `cut ${cut}`);
  }
  assert.deepEqual(parseReply(enc(full), false), { status: 500, body: '{"code":7}' });
  assert.throws(
    () => parseReply(enc("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), false),
    /bad chunk size/,
  );
});

Deno.test("http1: no length means read to EOF; 1xx is skipped", () => {
  const bare = enc("HTTP/1.0 200 OK\r\n\r\n{}");
  assert.equal(parseReply(bare, false), undefined);
  assert.deepEqual(parseReply(bare, true), { status: 200, body: "{}" });
  const interim = enc(
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
  );
  assert.deepEqual(parseReply(interim, false), { status: 204, body: "" });
});

Deno.test("http1: non-HTTP and truncated replies throw", () => {
  assert.throws(() => parseReply(enc("SSH-2.0-OpenSSH\r\n\r\n"), false), /not an HTTP\/1.x status/);
  assert.throws(() => parseReply(enc("HTTP/1.1 200"), true), /inside the headers/);
  assert.throws(
    () => parseReply(enc("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}"), true),
    /before the end of the reply body/,
  );
  assert.throws(
    () => parseReply(enc("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), false),
    /Content-Length/,
  );
});
