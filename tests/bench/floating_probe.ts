/**
 * Run inside the external host's netns by floating_bench.ts: connects to ADDR:PORT again and again
 * (each try bounded by TRY_MS) until one connection echoes a few bytes back, then prints the wall
 * clock (Date.now(), ms) of that success as one line. Gives up after SECONDS (exit 1).
 *
 *   floating_probe.ts ADDR PORT SECONDS
 */
const [addr, port, seconds] = Deno.args;
const TRY_MS = 100;
const deadline = Date.now() + Number(seconds) * 1000;
const payload = new TextEncoder().encode("floating-probe");

while (Date.now() < deadline) {
  if (await echoed()) {
    console.log(Date.now());
    Deno.exit(0);
  }
}
console.error(`${addr}:${port} not reached within ${seconds} s`);
Deno.exit(1);

/** One try: connect, send the payload, read it back, all within TRY_MS. */
async function echoed(): Promise<boolean> {
  const started = Date.now();
  let conn: Deno.TcpConn | undefined;
  const timer = new Promise<false>((r) => setTimeout(() => r(false), TRY_MS));
  const attempt = (async () => {
    conn = await Deno.connect({ hostname: addr, port: Number(port) });
    await conn.write(payload);
    const buf = new Uint8Array(payload.length);
    let got = 0;
    while (got < buf.length) {
      const n = await conn.read(buf.subarray(got));
      if (n === null) return false;
      got += n;
    }
    return true;
  })().catch(() => false);
  const ok = await Promise.race([attempt, timer]);
  try {
    conn?.close();
  } catch { /* closed already */ }
  // A refused connection answers at once: do not spin.
  const left = TRY_MS - (Date.now() - started);
  if (!ok && left > 0) await new Promise((r) => setTimeout(r, Math.min(left, 20)));
  return ok;
}
