/**
 * A real podman (Debian's 4.3: CNI network backend, runc, conmon) for end-to-end tests, private to
 * one test: its own storage (`--root`, the vfs driver, which leaves no mounts behind), run state
 * (`--runroot`, `--tmpdir`), network configs (`--network-config-dir`) and containers.conf
 * (`CONTAINERS_CONF`: no raised ulimits, which this machine's hard limit refuses; locks as files in
 * its tmpdir instead of the machine-wide /dev/shm/libpod_lock, which a fresh tmpdir would reset;
 * no event log). podman hands all of it on to the exit command that conmon runs when a container
 * ends (`podman container cleanup`, which runs the CNI DELs), flags and environment alike.
 *
 * podman runs with an `env -i` environment, a minimal PATH and CONTAINERS_CONF only, so neither
 * it nor conmon nor that cleanup offers a CNI plugin more than a runtime promises.
 *
 * What podman writes outside its private directories whatever it is told (libcni's result cache
 * in /var/lib/cni, the image library's blob-info cache in /var/lib/containers/cache) is removed at
 * cleanup when this test made it, as is the plugin's link in /opt/cni/bin.
 */
import { run, type RunResult } from "@knitter/common";
import { type Cleanup, pidAlive, stopPid } from "../../devstack/cleanup.ts";
import type { ConfList } from "./cni_runtime.ts";
import { buildPlugin } from "../../plugin/build.ts";

/** Where podman looks for CNI plugins by default (cni_plugin_dirs), and where ours goes. */
export const CNI_BIN_DIR = "/opt/cni/bin";
/** The reference plugins (Debian's containernetworking-plugins). */
export const REFERENCE_PLUGINS = "/usr/lib/cni";
/** The one PATH podman, conmon and the plugins get. */
export const MINIMAL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";
/** The busybox applets the test image links. */
const APPLETS = ["sh", "ip", "ping", "nc", "sleep", "cat", "wget", "httpd", "seq", "test", "["];
const BUSYBOX = "/bin/busybox";

export interface Podman {
  /** The test's podman directory: storage, state, configs. */
  dir: string;
  /** Where this podman reads its networks' conflists (`--network-config-dir`). */
  netDir: string;
  /** The image every container runs: busybox-static, imported from a tarball. */
  image: string;
  /** The plugin's name in /opt/cni/bin, a link to plugin/build/knitter: the conflist "type". */
  plugin: string;
  /** Runs `podman` with the private flags and the minimal environment; fails on non-zero. */
  podman(args: string[], opts?: { check?: boolean; timeoutMs?: number }): Promise<RunResult>;
  /** Writes a conflist where this podman reads its networks (the list's name is the network's). */
  addNetwork(list: ConfList): Promise<void>;
  /**
   * `podman run -d ARGS`: answers the container's ID, its conmon registered for cleanup by its
   * pidfile and its netns by name, so a failing test leaves neither.
   */
  runDetached(args: string[]): Promise<Container>;
}

export interface Container {
  id: string;
  name: string;
  /** The netns podman made for it, e.g. /run/netns/netns-<uuid>. */
  netns: string;
  /** Where conmon, which runs `podman container cleanup` when the container ends, wrote its pid. */
  conmonPidfile: string;
}

/** What the test needs on this machine, by what is missing; empty when all is there. */
export async function missingForPodman(): Promise<string[]> {
  const missing: string[] = [];
  for (const program of ["podman", "runc", "conmon", "tar"]) {
    if (!(await onPath(program))) missing.push(program);
  }
  for (const plugin of ["tuning", "portmap", "bandwidth"]) {
    if (!(await isFile(`${REFERENCE_PLUGINS}/${plugin}`))) {
      missing.push(`${REFERENCE_PLUGINS}/${plugin}`);
    }
  }
  if (!(await isStaticElf(BUSYBOX))) missing.push(`a static ${BUSYBOX} (busybox-static)`);
  return missing;
}

/**
 * A private podman, with plugin/build/knitter linked into /opt/cni/bin under a name of this test's (the
 * conflist "type" to use: {@link Podman.plugin}), as a runtime finds an installed plugin.
 */
/**
 * `netns`: podman runs in that netns (a simulated node's), and so do conmon, its cleanup and the
 * CNI plugins it runs: portmap's rules go where the node's host ports are, as on a real node.
 */
export async function startPodman(
  cleanup: Cleanup,
  where: { netns?: string } = {},
): Promise<Podman> {
  // Registered first, so it runs last: after every container (and so every CNI DEL) is gone.
  cleanup.defer(
    removeIfCreated([
      "/opt/cni",
      CNI_BIN_DIR,
      "/var/lib/cni",
      "/var/lib/cni/results",
      "/var/lib/containers",
      "/var/lib/containers/cache",
      "/var/lib/containers/cache/blob-info-cache-v1.boltdb",
    ]),
  );
  const plugin = `knitter-${cleanup.prefix}`;
  const link = `${CNI_BIN_DIR}/${plugin}`;
  await Deno.mkdir(CNI_BIN_DIR, { recursive: true });
  cleanup.defer(() => Deno.remove(link).catch(ignoreNotFound));
  await Deno.symlink(await buildPlugin(), link);

  const dir = await cleanup.tempDir();
  const conf = `${dir}/containers.conf`;
  const netDir = `${dir}/net.d`;
  await Deno.mkdir(netDir);
  await Deno.writeTextFile(
    conf,
    '[containers]\ndefault_ulimits = []\n\n[engine]\nlock_type = "file"\nevents_logger = "none"\n',
  );
  const global = [
    "--root",
    `${dir}/root`,
    "--runroot",
    `${dir}/runroot`,
    "--tmpdir",
    `${dir}/tmp`,
    "--storage-driver",
    "vfs",
    "--runtime",
    "runc",
    "--network-backend",
    "cni",
    "--network-config-dir",
    netDir,
  ];
  const podman = (args: string[], opts: { check?: boolean; timeoutMs?: number } = {}) =>
    run([
      // nsenter, not `ip netns exec`: that one runs in a mount namespace of its own, where the
      // netns podman mounts for a container would stay unseen by the agent.
      ...(where.netns ? ["nsenter", `--net=/var/run/netns/${where.netns}`] : []),
      "env",
      "-i",
      `PATH=${MINIMAL_PATH}`,
      `CONTAINERS_CONF=${conf}`,
      "podman",
      ...global,
      ...args,
    ], {
      check: opts.check ?? true,
      timeoutMs: opts.timeoutMs ?? 60_000,
    });
  // Every container goes, and with it its networks (CNI DEL); then whatever still runs with this
  // directory in its command line (conmon, its late `podman container cleanup`) is waited for, so
  // nothing recreates the directory once it is removed.
  cleanup.defer(async () => {
    const rm = await podman(["rm", "--force", "--all", "--time", "0"], { check: false });
    await stopProcessesNaming(`${dir}/`);
    if (rm.code !== 0) throw new Error(`podman rm --all failed: ${rm.stderr}`);
  });

  const image = "localhost/knitter-busybox:test";
  const rootfs = `${dir}/rootfs`;
  await Deno.mkdir(`${rootfs}/bin`, { recursive: true });
  await Deno.copyFile(BUSYBOX, `${rootfs}/bin/busybox`);
  for (const applet of APPLETS) await Deno.symlink("busybox", `${rootfs}/bin/${applet}`);
  await run(["tar", "-C", rootfs, "-cf", `${dir}/rootfs.tar`, "."]);
  await podman(["import", "--quiet", `${dir}/rootfs.tar`, image]);

  return {
    dir,
    netDir,
    image,
    plugin,
    podman,
    async addNetwork(list) {
      await Deno.writeTextFile(`${netDir}/${list.name}.conflist`, JSON.stringify(list, null, 2));
    },
    async runDetached(args) {
      const id = (await podman(["run", "--detach", ...args])).stdout.trim();
      const format = "{{.Name}}\n{{.ConmonPidFile}}\n{{.NetworkSettings.SandboxKey}}";
      const [name, conmonPidfile, netns] = (await podman(["inspect", "--format", format, id]))
        .stdout.trim().split("\n");
      cleanup.pidfile(conmonPidfile);
      if (netns) cleanup.netns(netns.slice(netns.lastIndexOf("/") + 1));
      return { id, name, netns, conmonPidfile };
    },
  };
}

/**
 * Paths (parents before children) that exist now are left alone; of the others, whatever exists
 * at cleanup is removed, children first, each only if empty (a directory someone else has put
 * something into since stays).
 */
function removeIfCreated(paths: string[]): () => Promise<void> {
  const absent = paths.filter((p) => !existsSync(p));
  return async () => {
    for (const path of absent.reverse()) {
      await Deno.remove(path).catch((err) => {
        if (err instanceof Deno.errors.NotFound) return;
        if (String(err).includes("(os error 39)")) return; // ENOTEMPTY: not only ours
        throw err;
      });
    }
  };
}

/** Waits up to `ms` for every process whose command line contains `text` to exit, then stops it. */
async function stopProcessesNaming(text: string, ms = 15_000): Promise<void> {
  const deadline = performance.now() + ms;
  for (;;) {
    const pids = await processesNaming(text);
    if (pids.length === 0) return;
    if (performance.now() > deadline) {
      for (const pid of pids) await stopPid(pid);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function processesNaming(text: string): Promise<number[]> {
  const pids: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    const pid = Number(e.name);
    if (!Number.isInteger(pid) || pid === Deno.pid) continue;
    const cmdline = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
    if (cmdline.includes(text) && await pidAlive(pid)) pids.push(pid);
  }
  return pids;
}

async function onPath(program: string): Promise<boolean> {
  for (const dir of MINIMAL_PATH.split(":")) {
    if (await isFile(`${dir}/${program}`)) return true;
  }
  return false;
}

async function isFile(path: string): Promise<boolean> {
  return (await Deno.stat(path).catch(() => undefined))?.isFile ?? false;
}

function existsSync(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether `path` is an ELF executable without an interpreter (PT_INTERP): a container with nothing
 * but this file can run it. 64-bit little-endian only, which is what Debian amd64 and arm64 ship.
 */
async function isStaticElf(path: string): Promise<boolean> {
  const bytes = await Deno.readFile(path).catch(() => undefined);
  if (!bytes || bytes.length < 64) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const elf64le = view.getUint32(0) === 0x7f454c46 && bytes[4] === 2 && bytes[5] === 1;
  if (!elf64le) return false;
  const phoff = Number(view.getBigUint64(0x20, true));
  const phentsize = view.getUint16(0x36, true);
  const phnum = view.getUint16(0x38, true);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 > bytes.length) return false;
    if (view.getUint32(at, true) === 3) return false; // PT_INTERP: needs a dynamic loader
  }
  return true;
}

function ignoreNotFound(err: unknown): undefined {
  if (err instanceof Deno.errors.NotFound) return undefined;
  throw err;
}
