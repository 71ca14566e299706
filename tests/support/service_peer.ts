/**
 * The ends of a service check (tests/e2e_services_test.ts), run inside pods' netns:
 *
 *   service_peer.ts serve PORT NAME SECONDS [HOST]
 *                                              a backend: to each TCP connection its NAME, the
 *                                              client address it sees and a newline, then an echo
 *                                              of what arrives; "ready" once listening (on HOST,
 *                                              default 0.0.0.0; "::" for IPv6 too)
 *   service_peer.ts count ADDR PORT N         N connections one after the other, each reading the
 *                                              first line (the backend's name) and closing
 *   service_peer.ts hold ADDR PORT SECONDS    one connection kept for SECONDS, 8 bytes echoed every
 *                                              20 ms; "connected NAME" once it knows its backend
 *
 * count prints {names: {NAME: n}, failures, errors, slowest: {NAME: ms}, ms (all), seenAs:
 * {NAME: [client addresses]}}; hold prints {name, ok, rounds, error?}. Each
 * connection attempt, and each echo of hold, gives up after 2 s.
 */
const [verb, ...args] = Deno.args;
const CONNECT_MS = 2000;

if (verb === "serve") {
  const [port, name, seconds, hostname = "0.0.0.0"] = args;
  setTimeout(() => Deno.exit(0), Number(seconds) * 1000);
  const listener = Deno.listen({ hostname, port: Number(port), transport: "tcp" });
  console.log("ready");
  for await (const conn of listener) {
    const hello = new TextEncoder().encode(`${name} ${conn.remoteAddr.hostname}\n`);
    conn.write(hello).then(() => conn.readable.pipeTo(conn.writable)).catch(() => {});
  }
} else if (verb === "count") {
  const [addr, port, n] = args;
  const names: Record<string, number> = {};
  const slowest: Record<string, number> = {};
  const seenAs: Record<string, string[]> = {};
  const errors: string[] = [];
  let failures = 0;
  const began = performance.now();
  for (let i = 0; i < Number(n); i++) {
    try {
      const started = performance.now();
      const conn = await connect(addr, Number(port));
      const [name, client] = (await firstLine(conn)).split(" ");
      conn.close();
      names[name] = (names[name] ?? 0) + 1;
      seenAs[name] = [...new Set([...(seenAs[name] ?? []), client])];
      slowest[name] = Math.max(slowest[name] ?? 0, Math.round(performance.now() - started));
    } catch (err) {
      failures++;
      if (errors.length < 3) errors.push(String(err));
    }
  }
  const ms = Math.round(performance.now() - began);
  console.log(JSON.stringify({ names, failures, errors, slowest, ms, seenAs }));
  // A connect given up on is still pending in the runtime (the kernel retries for minutes).
  Deno.exit(0);
} else if (verb === "hold") {
  const [addr, port, seconds] = args;
  console.log(JSON.stringify(await hold(addr, Number(port), Number(seconds))));
  // A read given up on still holds the connection's resource: end here.
  Deno.exit(0);
} else {
  console.error("usage: service_peer.ts serve|count|hold ...");
  Deno.exit(2);
}

function connect(hostname: string, port: number): Promise<Deno.TcpConn> {
  return within(Deno.connect({ hostname, port }), CONNECT_MS, "no connection");
}

/** `p`, or an error saying `what` after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Reads up to the first newline (the backend's name). */
async function firstLine(conn: Deno.TcpConn): Promise<string> {
  const buf = new Uint8Array(64);
  let text = "";
  while (!text.includes("\n")) {
    const n = await conn.read(buf);
    if (n === null) throw new Error("closed before the backend said its name");
    text += new TextDecoder().decode(buf.subarray(0, n));
  }
  return text.slice(0, text.indexOf("\n"));
}

async function readFull(conn: Deno.TcpConn, want: number): Promise<Uint8Array> {
  const out = new Uint8Array(want);
  let got = 0;
  while (got < want) {
    const n = await conn.read(out.subarray(got));
    if (n === null) throw new Error(`closed after ${got} of ${want} bytes`);
    got += n;
  }
  return out;
}

async function hold(addr: string, port: number, seconds: number) {
  let name = "";
  let rounds = 0;
  try {
    const conn = await connect(addr, port);
    name = (await firstLine(conn)).split(" ")[0];
    console.log(`connected ${name}`);
    const end = Date.now() + seconds * 1000;
    while (Date.now() < end) {
      const sent = crypto.getRandomValues(new Uint8Array(8));
      await conn.write(sent);
      const back = await within(readFull(conn, 8), CONNECT_MS, "no echo");
      if (back.some((b, i) => b !== sent[i])) throw new Error("the echo differs");
      rounds++;
      await new Promise((r) => setTimeout(r, 20));
    }
    conn.close();
    return { name, ok: true, rounds };
  } catch (err) {
    return { name, ok: false, rounds, error: String(err) };
  }
}
