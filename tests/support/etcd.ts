/** Real etcd for the cross-process tests (the launcher lives beside the etcd store). */
export {
  deadEndpoint,
  type EtcdCluster,
  freePorts,
  MAX_TXN_OPS,
  startEtcd,
  waitForLeader,
} from "../../manager/store/etcd_test_support.ts";

/** A manager process on etcd, started by pid and stopped by pid. */
export interface Replica {
  url: string;
  process: Deno.ChildProcess;
  kill(signal?: Deno.Signal): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export const ADMIN_TOKEN = "replica-admin-token-000001";
const ROOT = new URL("../../", import.meta.url).pathname;

/** Starts `deno task manager` on etcd and waits until /readyz says ready. */
export async function startReplica(options: {
  endpoints: string[];
  prefix: string;
  dir: string;
  timeoutMs?: number;
}): Promise<Replica> {
  const { freePorts } = await import("../../manager/store/etcd_test_support.ts");
  const [port] = await freePorts(1);
  const config = `${options.dir}/replica-${port}.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      listen: { hostname: "127.0.0.1", port },
      store: {
        etcd: {
          endpoints: options.endpoints,
          prefix: options.prefix,
          timeoutMs: options.timeoutMs ?? 5000,
        },
      },
      tokens: [{ token: ADMIN_TOKEN, scope: "admin" }],
      logLevel: "warn",
    }),
  );
  const log = await Deno.open(`${options.dir}/replica-${port}.log`, { create: true, write: true });
  const process = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", `${ROOT}manager/main.ts`, "--config", config],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  process.stderr.pipeTo(log.writable).catch(() => {});
  let alive = true;
  process.status.then(() => (alive = false));
  const replica: Replica = {
    url: `http://127.0.0.1:${port}`,
    process,
    async kill(signal = "SIGTERM") {
      if (!alive) return;
      process.kill(signal);
      await process.status;
    },
    [Symbol.asyncDispose]: () => replica.kill("SIGKILL"),
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${replica.url}/readyz`).then((r) => r.ok, () => false);
    if (ok) return replica;
    if (!alive || Date.now() > deadline) {
      await replica.kill("SIGKILL");
      const text = await Deno.readTextFile(`${options.dir}/replica-${port}.log`).catch(() => "");
      throw new Error(`manager replica did not become ready:\n${text.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One API call as a client makes it: the status and the JSON body (or the network error). */
export async function api(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  // deno-lint-ignore no-explicit-any
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
