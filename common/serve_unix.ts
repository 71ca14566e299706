/** HTTP on a unix socket, for APIs that only processes of this machine (and root) may reach. */
import { dirname } from "node:path";

/**
 * Serves `handler` on a unix socket that is 0600. With `privateDir` the socket's directory is made
 * 0700 as well, so no other user can connect even in the moment before the chmod; use it only for
 * a directory of our own (never /run or /tmp). A stale socket from an earlier run is replaced.
 */
export async function serveUnix(
  path: string,
  handler: Deno.ServeHandler<Deno.UnixAddr>,
  options: { privateDir?: boolean } = {},
): Promise<Deno.HttpServer<Deno.UnixAddr>> {
  const dir = dirname(path);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  if (options.privateDir) await Deno.chmod(dir, 0o700);
  try {
    await Deno.remove(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  let ready!: () => void;
  const listening = new Promise<void>((r) => (ready = r));
  const server = Deno.serve({ path, transport: "unix", onListen: () => ready() }, handler);
  await listening;
  await Deno.chmod(path, 0o600);
  return server;
}
