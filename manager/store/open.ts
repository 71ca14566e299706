/** Opens the store the configuration names: Deno KV (file, memory, remote) or etcd. */
import type { ManagerConfig } from "../config.ts";
import { openEtcdStore } from "./etcd_store.ts";
import { openKvStore, openRemoteKvStore } from "./kv_store.ts";
import type { Store } from "./store.ts";

export type StoreConfig = ManagerConfig["store"];

export async function openStore(config: StoreConfig): Promise<Store> {
  if (config.backend === "etcd") {
    const etcd = config.etcd!;
    return await openEtcdStore({
      endpoints: etcd.endpoints,
      ca: await pem(etcd.caFile, "store.etcd.caFile"),
      cert: await pem(etcd.certFile, "store.etcd.certFile"),
      key: await pem(etcd.keyFile, "store.etcd.keyFile"),
      username: etcd.username,
      password: etcd.password,
      prefix: etcd.prefix,
      timeoutMs: etcd.timeoutMs,
    });
  }
  if (/^https?:\/\//.test(config.path)) return openRemoteKvStore(config.path, config.accessToken!);
  return openKvStore(config.path);
}

/** Where the state lives, for logs (never with credentials). */
export function describeStore(config: StoreConfig): string {
  if (config.backend === "etcd") {
    return `etcd ${config.etcd!.endpoints.join(",")} prefix "${config.etcd!.prefix}"`;
  }
  return `Deno KV ${config.path}`;
}

async function pem(path: string | undefined, field: string): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    const { StoreUnavailableError } = await import("./store.ts");
    throw new StoreUnavailableError(`Cannot read ${field} "${path}": ${(err as Error).message}`);
  }
}
