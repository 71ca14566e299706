/**
 * One end of an application-traffic check, run inside a pod's netns by traffic.ts:
 *
 *   traffic_peer.ts serve tcp|udp PORT SECONDS   echo what arrives, print "ready" once listening
 *   traffic_peer.ts send tcp ADDR PORT BYTES SECONDS [RATE]   send BYTES random bytes (at most
 *                                                     RATE bytes a second), read the echo
 *   traffic_peer.ts send udp ADDR PORT SIZE,SIZE,... SECONDS   one datagram of each size
 *
 * `send` prints one JSON line: {ok, sent, received, ms, error?}; ok means every byte came back in
 * order. Each process ends by itself after SECONDS.
 */
import dgram from "node:dgram";

const [verb, proto, ...rest] = Deno.args;

if (verb === "serve") {
  const [port, seconds] = rest.map(Number);
  setTimeout(() => Deno.exit(0), seconds * 1000);
  if (proto === "tcp") await serveTcp(port);
  else await serveUdp(port);
} else if (verb === "send") {
  const [addr, port, what, seconds, rate] = rest;
  setTimeout(() => {
    console.log(JSON.stringify({ ok: false, error: `no answer within ${seconds} s` }));
    Deno.exit(1);
  }, Number(seconds) * 1000);
  const result = proto === "tcp"
    ? await sendTcp(addr, Number(port), Number(what), rate ? Number(rate) : undefined)
    : await sendUdp(addr, Number(port), what.split(",").map(Number));
  console.log(JSON.stringify(result));
  Deno.exit(result.ok ? 0 : 1);
} else {
  console.error(`usage: traffic_peer.ts serve|send tcp|udp ...`);
  Deno.exit(2);
}

async function serveTcp(port: number): Promise<void> {
  const listener = Deno.listen({ hostname: "::", port, transport: "tcp" });
  console.log("ready");
  for await (const conn of listener) {
    // Echo as it arrives; the client reads while it writes, so neither side's buffer fills up.
    conn.readable.pipeTo(conn.writable).catch(() => {});
  }
}

function serveUdp(port: number): Promise<void> {
  const socket = dgram.createSocket({ type: "udp6" });
  socket.on("message", (msg, from) => socket.send(msg, from.port, from.address));
  return new Promise(() => socket.bind(port, "::", () => console.log("ready")));
}

interface Result {
  ok: boolean;
  sent: number;
  received: number;
  ms: number;
  error?: string;
}

async function sendTcp(
  addr: string,
  port: number,
  bytes: number,
  rate?: number,
): Promise<Result> {
  const payload = randomBytes(bytes);
  const started = performance.now();
  const conn = await Deno.connect({ hostname: addr, port, transport: "tcp" });
  const writing = (async () => {
    const writer = conn.writable.getWriter();
    for (let at = 0; at < payload.length; at += 65536) {
      await writer.write(payload.subarray(at, at + 65536));
      // Paced: the chunk's share of a second, measured from the start (a stream, not a burst).
      const due = rate ? started + ((at + 65536) / rate) * 1000 : 0;
      if (due > performance.now()) await new Promise((r) => setTimeout(r, due - performance.now()));
    }
    await conn.closeWrite();
  })();
  const echo = new Uint8Array(bytes);
  let received = 0;
  let mismatch: number | undefined;
  for await (const chunk of conn.readable) {
    if (received + chunk.length > bytes) {
      return {
        ok: false,
        sent: bytes,
        received: received + chunk.length,
        ms: 0,
        error: "echo too long",
      };
    }
    echo.set(chunk, received);
    received += chunk.length;
  }
  await writing;
  for (let i = 0; i < bytes && mismatch === undefined; i++) {
    if (echo[i] !== payload[i]) mismatch = i;
  }
  const ms = performance.now() - started;
  if (received !== bytes) {
    return {
      ok: false,
      sent: bytes,
      received,
      ms,
      error: `${received} of ${bytes} bytes came back`,
    };
  }
  if (mismatch !== undefined) {
    return { ok: false, sent: bytes, received, ms, error: `byte ${mismatch} differs` };
  }
  return { ok: true, sent: bytes, received, ms };
}

async function sendUdp(addr: string, port: number, sizes: number[]): Promise<Result> {
  const socket = dgram.createSocket({ type: addr.includes(":") ? "udp6" : "udp4" });
  const started = performance.now();
  let sent = 0;
  let received = 0;
  try {
    for (const size of sizes) {
      const payload = randomBytes(size);
      // UDP may lose a datagram; a few tries each, so only a path that never delivers fails.
      let echoed: Uint8Array | undefined;
      for (let attempt = 0; attempt < 5 && !echoed; attempt++) {
        echoed = await exchange(socket, addr, port, payload, 500);
      }
      sent += size;
      if (!echoed) {
        return { ok: false, sent, received, ms: 0, error: `no echo of a ${size}-byte datagram` };
      }
      if (echoed.length !== size || echoed.some((b, i) => b !== payload[i])) {
        return {
          ok: false,
          sent,
          received,
          ms: 0,
          error: `the ${size}-byte datagram came back changed`,
        };
      }
      received += echoed.length;
    }
    return { ok: true, sent, received, ms: performance.now() - started };
  } finally {
    socket.close();
  }
}

function exchange(
  socket: dgram.Socket,
  addr: string,
  port: number,
  payload: Uint8Array,
  ms: number,
): Promise<Uint8Array | undefined> {
  return new Promise((resolve) => {
    const done = (value?: Uint8Array) => {
      clearTimeout(timer);
      socket.off("message", onMessage);
      resolve(value);
    };
    const onMessage = (msg: Uint8Array) => {
      if (msg.length === payload.length) done(msg);
    };
    const timer = setTimeout(() => done(), ms);
    socket.on("message", onMessage);
    socket.send(payload, port, addr);
  });
}

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let at = 0; at < n; at += 65536) crypto.getRandomValues(out.subarray(at, at + 65536));
  return out;
}
