/**
 * CNI_NETNS, checked before anything is made for it: it must be a network namespace, and neither
 * the host's nor the agent's own (interfaces made there would sit among the node's own, and a DEL
 * would take them from there). A netns is known by its identity, device and inode of its nsfs
 * file: a sandbox recreated at the same path is another netns.
 */
import { CNI_CODE, CniError } from "@knitter/plugin/contract";

export interface PodNetns {
  path: string;
  /** "dev:inode" of the namespace. */
  id: string;
}

/** What stat says of a path, as far as a netns check cares. */
export type NsStat =
  | { dev: number; ino: number; kind: "file" | "directory" | "other" }
  | "missing"
  | "denied";

/**
 * Why `target` cannot be a pod's netns, or undefined when it can. `own` is the agent's netns (its
 * device is nsfs's), `host` the netns of pid 1 ("denied" when the agent may not look), `type` the
 * namespace type a /proc/PID/ns/ link names.
 */
export function netnsProblem(
  target: NsStat,
  own: Exclude<NsStat, "missing" | "denied">,
  host: NsStat,
  type?: string,
): string | undefined {
  if (target === "missing") {
    return "does not exist: the sandbox's network namespace is gone, or was never made";
  }
  if (target === "denied") {
    return "cannot be read by the agent (permission denied): it must be a path the agent, as root, can open";
  }
  const usage = "pass the sandbox's own netns, e.g. /var/run/netns/NAME or /proc/PID/ns/net";
  if (target.dev !== own.dev) {
    return `is not a network namespace (it is a ${
      target.kind === "other" ? "special file" : target.kind
    }): ${usage}`;
  }
  if (type !== undefined && type !== "net") {
    return `is not a network namespace (it is a ${type} namespace): ${usage}`;
  }
  if (target.ino === own.ino) {
    return `is the agent's own network namespace (the node's): knitter makes interfaces only in a pod's own netns; ${usage}`;
  }
  if (typeof host === "object" && target.dev === host.dev && target.ino === host.ino) {
    return `is the host's network namespace: knitter makes interfaces only in a pod's own netns; ${usage}`;
  }
  return undefined;
}

let selfNetns: Promise<[Exclude<NsStat, "missing" | "denied">, NsStat]> | undefined;

/** CNI_NETNS of an ADD as a checked path and identity; a CNI error (code 4) saying why not. */
export async function podNetns(path: string): Promise<PodNetns> {
  if (!path) throw new CniError(CNI_CODE.invalidEnvironment, "CNI_NETNS is required for ADD");
  // The agent's netns and pid 1's do not change while it runs.
  selfNetns ??= Promise.all([statNs("/proc/self/ns/net"), statNs("/proc/1/ns/net")]).then((
    [own, host],
  ) => {
    if (typeof own !== "object") throw new Error("Cannot read the agent's own /proc/self/ns/net");
    return [own, host];
  });
  const [[own, host], target, type] = await Promise.all([selfNetns, statNs(path), nsType(path)]);
  const problem = netnsProblem(target, own, host, type);
  if (problem || typeof target !== "object") {
    throw new CniError(CNI_CODE.invalidEnvironment, `CNI_NETNS ${path} ${problem}`);
  }
  return { path, id: netnsId(target) };
}

/** The identity of a netns path now; undefined when it is gone (or not readable). */
export async function netnsIdOf(path: string): Promise<string | undefined> {
  const st = await statNs(path);
  return typeof st === "object" ? netnsId(st) : undefined;
}

/**
 * The identity of a netns path now, "missing" when nothing is there, or null when the agent cannot
 * tell (not readable): only a missing path may count as a netns gone.
 */
export async function netnsIdNow(path: string): Promise<string | "missing" | null> {
  const st = await statNs(path);
  return typeof st === "object" ? netnsId(st) : st === "missing" ? "missing" : null;
}

function netnsId(st: { dev: number; ino: number }): string {
  return `${st.dev}:${st.ino}`;
}

async function statNs(path: string): Promise<NsStat> {
  try {
    const st = await Deno.stat(path);
    return {
      dev: st.dev,
      ino: st.ino ?? 0,
      kind: st.isFile ? "file" : st.isDirectory ? "directory" : "other",
    };
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
      return "missing";
    }
    if (err instanceof Deno.errors.PermissionDenied) return "denied";
    throw err;
  }
}

/** The namespace type a /proc/PID/ns/NAME link names ("net", "uts", ...); undefined elsewhere. */
async function nsType(path: string): Promise<string | undefined> {
  if (!/^\/proc\/[^/]+\/(task\/\d+\/)?ns\/[^/]+$/.test(path)) return undefined;
  try {
    return /^(\w+):\[/.exec(await Deno.readLink(path))?.[1];
  } catch {
    return undefined;
  }
}
