/**
 * What the demo needs before it starts anything: root, the programs the simulated nodes run, and
 * the WASM build. All that is missing is named at once, with what to do about it.
 */

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

/** Each program, with the Debian package that provides it. */
const PROGRAMS: [string, string][] = [
  ["ip", "iproute2"],
  ["ping", "iputils-ping"],
  ["nsenter", "util-linux"],
  ["ss", "iproute2"],
  ["socat", "socat"],
  ["ethtool", "ethtool"],
  ["ovsdb-tool", "openvswitch-switch"],
  ["ovsdb-server", "openvswitch-switch"],
  ["ovs-vsctl", "openvswitch-switch"],
  ["ovs-ofctl", "openvswitch-switch"],
  ["/usr/lib/openvswitch-switch/ovs-vswitchd", "openvswitch-switch"],
];

export class PrerequisiteError extends Error {}

export async function checkPrerequisites(): Promise<void> {
  if (Deno.uid() !== 0) {
    throw new PrerequisiteError(
      "The demo needs root: it makes network namespaces and runs Open vSwitch. " +
        "Run it as root: sudo make demo",
    );
  }
  const missing: [string, string][] = [];
  for (const [program, pkg] of PROGRAMS) {
    if (!(await found(program))) missing.push([program, pkg]);
  }
  if (missing.length) {
    const pkgs = [...new Set(missing.map(([, p]) => p))].join(" ");
    throw new PrerequisiteError(
      `The demo cannot run: ${missing.map(([p]) => p).join(", ")} not found. ` +
        `Run "make demo" (it installs them), or: apt-get install -y ${pkgs}`,
    );
  }
  if (!(await isFile(`${ROOT}/wasm/build/flows.wasm`))) {
    throw new PrerequisiteError(
      `The WASM modules are not built (${ROOT}/wasm/build): run "make demo", or "make build" first`,
    );
  }
}

async function found(program: string): Promise<boolean> {
  if (program.includes("/")) return await isExecutable(program);
  for (const dir of (Deno.env.get("PATH") ?? "").split(":").filter(Boolean)) {
    if (await isExecutable(`${dir}/${program}`)) return true;
  }
  return false;
}

async function isExecutable(path: string): Promise<boolean> {
  const info = await Deno.stat(path).catch(() => null);
  return info !== null && info.isFile && ((info.mode ?? 0) & 0o111) !== 0;
}

async function isFile(path: string): Promise<boolean> {
  return (await Deno.stat(path).catch(() => null))?.isFile ?? false;
}
