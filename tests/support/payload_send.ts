/**
 * Sends a file's bytes over TCP and reads the echo back (a server of traffic_peer.ts), run inside
 * a pod's netns: for a test that must know the payload, to find it again byte for byte elsewhere
 * (a mirror's capture).
 *
 *   payload_send.ts ADDR PORT FILE   prints {ok, sent, received, error?}
 */
const [addr, port, file] = Deno.args;
const payload = await Deno.readFile(file);
const conn = await Deno.connect({ hostname: addr, port: Number(port), transport: "tcp" });
const writing = (async () => {
  const writer = conn.writable.getWriter();
  await writer.write(payload);
  await conn.closeWrite();
})();
const echo: Uint8Array[] = [];
let received = 0;
for await (const chunk of conn.readable) {
  echo.push(chunk);
  received += chunk.length;
}
await writing;
const back = new Uint8Array(received);
echo.reduce((at, c) => (back.set(c, at), at + c.length), 0);
const same = received === payload.length && back.every((b, i) => b === payload[i]);
console.log(JSON.stringify({
  ok: same,
  sent: payload.length,
  received,
  ...(same ? {} : { error: "the echo differs from what was sent" }),
}));
