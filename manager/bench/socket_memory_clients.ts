/**
 * The followers of socket_memory_bench.ts, in a process of their own: each (optionally) takes its
 * first cursor on an API connection closed after it (or kept open: `keep`), then opens the feed's WebSocket by a raw
 * handshake and holds it, reading nothing more. "ready" on stdout once all are open; they go when
 * stdin closes.
 *
 *   deno run --allow-net socket_memory_clients.ts SOCKET_PORT N CURSOR TOKEN_PREFIX API_PORT|0 \
 *     burst|one [keep]
 */
const [port, n, cursor, prefix, apiPort, arrival, cursorFirst] = Deno.args;
/** The API connection stays open beside the socket (an agent's pooled one). */
const keep = cursorFirst === "keep";
const ENC = new TextEncoder();
const held: Deno.Conn[] = [];

/** Reads `conn` to its end (an answer sent with `connection: close`). */
async function drain(conn: Deno.Conn): Promise<void> {
  const buffer = new Uint8Array(4096);
  while ((await conn.read(buffer)) !== null) { /* to its end */ }
}

/** Reads one answer on a kept connection: its head, then content-length bytes of body. */
async function answered(conn: Deno.Conn): Promise<void> {
  const buffer = new Uint8Array(8192);
  let text = "";
  for (;;) {
    const got = await conn.read(buffer);
    if (got === null) throw new Error("the manager closed a kept API connection");
    text += new TextDecoder().decode(buffer.subarray(0, got));
    const end = text.indexOf("\r\n\r\n");
    if (end < 0) continue;
    const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
    if (text.length - end - 4 >= length) return;
  }
}

async function follower(i: number): Promise<void> {
  const token = `${prefix}-${i}-token-0123456789`;
  if (apiPort !== "0") {
    const api = await Deno.connect({ hostname: "127.0.0.1", port: Number(apiPort) });
    await api.write(ENC.encode(
      `GET /api/v1/feed HTTP/1.1\r\nhost: x\r\nconnection: ${keep ? "keep-alive" : "close"}\r\n` +
        `authorization: Bearer ${token}\r\n\r\n`,
    ));
    if (keep) {
      await answered(api);
      held.push(api);
    } else {
      await drain(api);
      api.close();
    }
  }
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(port) });
  await conn.write(ENC.encode(
    `GET /api/v1/feed?after=${cursor}&timeout=60&stream=websocket HTTP/1.1\r\nhost: x\r\n` +
      "upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
      `sec-websocket-version: 13\r\nauthorization: Bearer ${token}\r\n\r\n`,
  ));
  const buffer = new Uint8Array(4096);
  const got = await conn.read(buffer);
  const answer = new TextDecoder().decode(buffer.subarray(0, got ?? 0));
  if (!answer.startsWith("HTTP/1.1 101")) throw new Error(`follower ${i}: ${answer.slice(0, 200)}`);
  held.push(conn);
}

const count = Number(n);
if (arrival === "burst") await Promise.all(Array.from({ length: count }, (_, i) => follower(i)));
else for (let i = 0; i < count; i++) await follower(i);
console.log("ready");
for await (const _ of Deno.stdin.readable) { /* until stdin closes */ }
