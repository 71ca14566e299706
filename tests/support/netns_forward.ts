/**
 * A TCP port on a netns's loopback made reachable on the test's own loopback, for a client that
 * speaks only TCP (Prometheus scraping an agent's probe listener on its node): socat inside the
 * netns listens on a unix socket (a file, which every netns sees) and dials the port there; this
 * process listens on a free loopback port and pipes each connection to that socket. Nothing
 * leaves the loopback of either side.
 */
import type { Cleanup } from "../../devstack/cleanup.ts";
import { waitFor } from "../../devstack/stack.ts";

/** Forwards 127.0.0.1:<returned port> to 127.0.0.1:`port` in `netns` until cleanup. */
export async function forwardFromNetns(
  cleanup: Cleanup,
  netns: string,
  port: number,
): Promise<number> {
  const dir = await cleanup.tempDir();
  const socket = `${dir}/forward.sock`;
  const socat = new Deno.Command("ip", {
    args: ["netns", "exec", netns, "socat", `UNIX-LISTEN:${socket},fork`, `TCP4:127.0.0.1:${port}`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  cleanup.pid(socat.pid);
  await waitFor(`socat in ${netns}`, () => Deno.stat(socket).then(() => true, () => false), 10_000);

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const serving = (async () => {
    for await (const conn of listener) {
      open.add(conn);
      pipe(conn, socket).finally(() => open.delete(conn));
    }
  })().catch(() => {});
  cleanup.defer(async () => {
    listener.close();
    for (const c of open) c.close();
    await serving;
  });
  return (listener.addr as Deno.NetAddr).port;
}

/** Both directions of one connection, until either side ends it. */
async function pipe(conn: Deno.Conn, socket: string): Promise<void> {
  let far: Deno.UnixConn | undefined;
  try {
    far = await Deno.connect({ transport: "unix", path: socket });
    await Promise.race([
      conn.readable.pipeTo(far.writable),
      far.readable.pipeTo(conn.writable),
    ]);
  } catch { /* one side closed: the other goes with it */ }
  for (const c of [conn, far]) {
    try {
      c?.close();
    } catch { /* already closed by its pipe */ }
  }
}
