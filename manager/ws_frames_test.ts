/** The feed socket's frames (ws_frames.ts) against RFC 6455's own examples and bounds. */
import assert from "node:assert/strict";
import {
  acceptOf,
  binaryFrameOf,
  FrameError,
  readClientFrame,
  serverFrame,
  validKey,
} from "./ws_frames.ts";

Deno.test("ws frames: the RFC's handshake example, and keys that are not 16 bytes refused", async () => {
  assert.equal(await acceptOf("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  assert.ok(validKey("dGhlIHNhbXBsZSBub25jZQ=="));
  for (
    const bad of [undefined, "", "short", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZSE="]
  ) {
    assert.ok(!validKey(bad), String(bad));
  }
});

Deno.test("ws frames: a server frame's length in 7, 16 or 64 bits, unmasked; a page's frame made once", () => {
  for (const [n, head] of [[125, 2], [126, 4], [65535, 4], [65536, 10]]) {
    const frame = serverFrame(0x2, new Uint8Array(n).fill(7));
    assert.equal(frame.length, head + n);
    assert.equal(frame[0], 0x82);
    assert.equal(frame[1] & 0x80, 0, "unmasked");
    assert.equal(frame[head], 7);
  }
  const line = new TextEncoder().encode('{"cursor":"x","events":[]}\n');
  assert.equal(binaryFrameOf(line), binaryFrameOf(line), "the same bytes for every socket");
});

Deno.test("ws frames: a client's masked ping read whole or not yet; unmasked, data and long frames refused", () => {
  const ping = new Uint8Array([0x89, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2]);
  assert.equal(readClientFrame(ping.subarray(0, 7)), undefined);
  const frame = readClientFrame(ping)!;
  assert.deepEqual([frame.op, frame.size, new TextDecoder().decode(frame.payload)], [9, 8, "hi"]);
  const refused: [number[], number][] = [
    [[0x89, 0x02, 0x68, 0x69], 1002],
    [[0x82, 0x81, 1, 2, 3, 4, 0], 1008],
    [[0x89, 0xfe, 0, 200], 1002],
    [[0x09, 0x80, 1, 2, 3, 4], 1002],
    [[0xc9, 0x80, 1, 2, 3, 4], 1002],
  ];
  for (const [bytes, code] of refused) {
    assert.throws(
      () => readClientFrame(new Uint8Array(bytes)),
      (e) => e instanceof FrameError && e.code === code,
    );
  }
});
