/**
 * Pod interfaces with `ip` and `nsenter`: a veth whose pod end is born in the pod's netns (never
 * created in the host and moved, which costs an RCU barrier under the RTNL lock per move), set up
 * in ONE exec: `ip -n POD -batch -` creates the pair with the host end placed in the agent's netns,
 * then addresses, link up and routes. Tx checksum offload goes off afterwards by ioctl, not exec
 * (tx_checksum.ts).
 *
 * A CNI ADD sends the batch its first line early (wiring.ts): the pair is made while the manager is
 * still asked for the port ({@link sendPodPair}: no MAC or address known yet, the pod end down),
 * and once the manager has answered the rest of the batch gives the pod end its MAC, MTU,
 * addresses and routes ({@link completePodInterface}).
 */
import { createHash } from "node:crypto";
import { CommandError, run, type RunResult, start, type StartedCommand } from "@knitter/common";
import { isIp, isIpPrefix, isMac } from "@knitter/common/address";
import { isIfName } from "@knitter/plugin/contract";
import { LinkDeleter } from "./link_deleter.ts";
import { txChecksumIoctl } from "./tx_checksum.ts";

export interface PodInterfaceSpec {
  /** The pod's netns path, as the CNI runtime gives it (/var/run/netns/X, /proc/PID/ns/net). */
  netns: string;
  /** Name inside the pod, e.g. "eth0". */
  ifName: string;
  /** Name of the host end, see {@link hostIfName}. */
  hostIfName: string;
  mac: string;
  mtu: number;
  /** With prefix: "10.1.0.5/24", "2001:db8::5/64" (IPv6 is added without DAD). */
  addresses: string[];
  /** Without `via`: a device route (scope link). "default" is the default route. */
  routes: { dst: string; via?: string }[];
  /** The netns path that gets the host end; default: the agent's own netns. */
  hostNetns?: string;
  /**
   * The pod computes its own TCP/UDP checksums (tx checksum offload off on its end). Needed on the
   * userspace datapath: it reads the host end with a packet socket and never completes a checksum
   * the pod's kernel left to the "hardware", so TCP and UDP would arrive corrupt (ICMP would not).
   */
  softwareChecksums?: boolean;
  /**
   * Its network's gateway sends router advertisements (agent/PIPELINE.md): the pod takes them
   * (its SLAAC address, its default route through the gateway). Otherwise they are turned off.
   */
  acceptRouterAdvertisements?: boolean;
}

export interface PodInterfaceState {
  mac: string;
  mtu: number;
  /** With prefix; IPv6 link-local addresses (the kernel's own) are left out. */
  addresses: string[];
  up: boolean;
}

/**
 * The `ip -batch` that {@link createPodInterface} feeds, started early: it enters the pod's netns
 * and waits for its lines while the caller waits for the pod's addresses. Pass it to
 * createPodInterface, or abandon it.
 */
export async function startPodBatch(netns: string): Promise<StartedCommand> {
  const ip = await ipIn(netns, ["-json", "-batch", "-"]);
  return start(ip.argv, { netns: ip.netns, check: false });
}

/**
 * Creates and configures the pod's interface and the host end (up, same MTU). On any failure,
 * what was created is deleted again and the error names the step that failed. `batch` is one from
 * {@link startPodBatch} for the same netns, else a new one is started.
 */
export async function createPodInterface(
  spec: PodInterfaceSpec,
  batch?: StartedCommand,
): Promise<{ hostIfIndex: number; podIfIndex: number }> {
  const where = `${spec.ifName} in ${spec.netns}`;
  validate(spec);
  const steps = [
    pairStep(spec, spec.hostNetns ?? ownNetns(), spec.mac),
    ...setupSteps(spec, { label: `set ${spec.ifName} up`, attributes: "up" }),
    { label: `read ${spec.ifName}`, command: `link show dev ${spec.ifName}` },
  ];
  const result = await (batch ?? await startPodBatch(spec.netns))
    .finish(steps.map((s) => s.command).join("\n") + "\n");
  if (result.code !== 0) await creationFailed(spec, steps, result);
  const indexes = parseIndexes(result.stdout, where);
  await afterCreation(spec, async () => {
    await offloadOff(spec);
    await raOffOutsideBatch(spec);
  });
  return indexes;
}

/** What {@link sendPodPair} makes the pair with: names, the MTU expected. */
export type PodPairSpec = Pick<
  PodInterfaceSpec,
  "netns" | "ifName" | "hostIfName" | "mtu" | "hostNetns"
>;

/**
 * Sends `batch` (from {@link startPodBatch}) the line that makes the veth pair, ahead of the rest:
 * `ip` makes it at once (both ends with `spec.mtu`, the pod end down with the kernel's MAC) while
 * the caller waits for the pod's addresses. {@link completePodInterface} sends the rest, and says
 * whether the pair was made; a batch abandoned instead may have made it or not.
 */
export async function sendPodPair(spec: PodPairSpec, batch: StartedCommand): Promise<void> {
  validatePair(spec);
  const early = earlySteps(spec, spec.hostNetns ?? ownNetns());
  await batch.send(early.map((s) => s.command).join("\n") + "\n");
}

/**
 * Whether the pair {@link sendPodPair} sent to `batch` is made: true as soon as `ip` has made it
 * (the batch's first output is the pod end's `link show`, the line after the pair), false when
 * `ip` stopped without (the pair's line failed: completePodInterface says why).
 */
export function podPairMade(batch: StartedCommand): Promise<boolean> {
  return batch.printed();
}

/** The early lines: the pair, then a read of its pod end, whose output says the pair is made. */
function earlySteps(spec: PodPairSpec, hostNetns: string): Step[] {
  return [
    pairStep(spec, hostNetns),
    { label: `read ${spec.ifName}`, command: `link show dev ${spec.ifName}` },
  ];
}

/**
 * Completes the interface whose pair {@link sendPodPair} sent to `batch` with MTU `madeMtu`: the
 * pod end's MAC and MTU, addresses, link up, routes, the host end's MTU when it is not `madeMtu`,
 * then as {@link createPodInterface}: checksums, and on any failure nothing of it is left (a name
 * that was taken already is InterfaceExistsError).
 */
export async function completePodInterface(
  spec: PodInterfaceSpec,
  madeMtu: number,
  batch: StartedCommand,
): Promise<void> {
  validate(spec);
  const early = earlySteps({ ...spec, mtu: madeMtu }, spec.hostNetns ?? ownNetns());
  const steps = [
    ...early,
    // The MAC and MTU go with "up": one change of the link fewer.
    ...setupSteps(spec, {
      label: `set the MAC and MTU of ${spec.ifName} and set it up`,
      attributes: `address ${spec.mac} mtu ${spec.mtu} up`,
    }),
  ];
  const rest = steps.slice(early.length);
  const result = await batch.finish(rest.map((s) => s.command).join("\n") + "\n");
  if (result.code !== 0) await creationFailed(spec, steps, result);
  await afterCreation(spec, async () => {
    if (spec.mtu !== madeMtu) await setHostMtu(spec);
    await offloadOff(spec);
    await raOffOutsideBatch(spec);
  });
}

/** The host end's MTU, when the pair was made with another (the network's was not known yet). */
async function setHostMtu(spec: PodInterfaceSpec): Promise<void> {
  const ip = spec.hostNetns
    ? await ipIn(spec.hostNetns, ["link", "set", "dev", spec.hostIfName, "mtu", `${spec.mtu}`])
    : { argv: ["ip", "link", "set", "dev", spec.hostIfName, "mtu", `${spec.mtu}`] };
  const result = await run(ip.argv, { netns: ip.netns, check: false });
  if (result.code === 0) return;
  throw new Error(
    `step "set the MTU of ${spec.hostIfName} to ${spec.mtu}" failed: ${result.stderr}`,
    { cause: new CommandError(result) },
  );
}

/** Work on a pair just made, after its batch; on a failure the pair goes again, and it is thrown. */
async function afterCreation(spec: PodPairSpec, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    await deleteHostEnd(spec.hostIfName, spec.hostNetns).catch(() => {});
    throw new Error(`Cannot create ${spec.ifName} in ${spec.netns}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Tx checksum offload off on the pod end when asked, before the ADD answers: no TCP or UDP
 * leaves the pod until its processes run.
 */
async function offloadOff(spec: PodInterfaceSpec): Promise<void> {
  if (spec.softwareChecksums) await disableTxChecksumOffload(spec.netns, spec.ifName);
}

/** A netns the runtime did not name: what the batch could not fork goes through nsenter. */
async function raOffOutsideBatch(spec: PodInterfaceSpec): Promise<void> {
  if (!netnsName(spec.netns) && ignoresAdverts(spec)) {
    await ignoreRouterAdvertisements(spec.netns, spec.ifName);
  }
}

/**
 * A batch that creates the pair (line 1) failed: what it made goes, and the error says why, a
 * taken name as InterfaceExistsError.
 */
async function creationFailed(
  spec: PodPairSpec,
  steps: Step[],
  result: RunResult,
): Promise<never> {
  const where = `${spec.ifName} in ${spec.netns}`;
  const failed = failedStep(result.stderr);
  const step = failed === undefined ? undefined : steps[failed - 1];
  // Line 1 is the creation itself: when it fails nothing was made, and what exists is not ours.
  if (failed !== 1) await deleteHostEnd(spec.hostIfName, spec.hostNetns).catch(() => {});
  // A namespace that is not there is the clearest answer. Looked at only after a failure: nothing
  // stands between the caller and the batch's lines (a look first costs an event loop turn, which
  // the flow sync's compile, started alongside, may hold for a while).
  await requireNetns(spec.netns, `Cannot create ${where}`);
  if (spec.hostNetns) await requireNetns(spec.hostNetns, `Cannot create ${where}`);
  if (failed === 1 && /File exists/.test(result.stderr)) {
    if (await linkInfo(spec.netns, spec.ifName)) {
      throw new InterfaceExistsError(
        "pod",
        `${spec.ifName} already exists in ${spec.netns}, and knitter did not make it (another plugin or the runtime did): knitter creates the CNI_IFNAME interface itself, so remove that one or give knitter another CNI_IFNAME`,
      );
    }
    throw new InterfaceExistsError(
      "host",
      `Cannot create ${where}: the host end's name ${spec.hostIfName} is taken on the node by an interface knitter has no record of: delete it (ip link del ${spec.hostIfName}) and retry`,
    );
  }
  const why = step ? `step "${step.label}" failed` : "ip failed";
  throw new Error(`Cannot create ${where}: ${why}: ${result.stderr}`, {
    cause: new CommandError(result),
  });
}

/** The interface name is taken: in the pod (CNI_IFNAME) or, for the host end, on the node. */
export class InterfaceExistsError extends Error {
  constructor(readonly side: "pod" | "host", message: string) {
    super(message);
    this.name = "InterfaceExistsError";
  }
}

/**
 * Deletes the pod's veth pair by its host end (which takes the pod end with it). Idempotent:
 * false when it was already gone. With `pod`, a pod end whose host end is not here (moved or
 * renamed) is deleted too, but only when it is provably the one knitter made: a veth of that name
 * with the MAC knitter gave it. Anything else of that name (another plugin's, or a new sandbox's)
 * is left alone; a netns that no longer exists is not an error.
 */
export async function deletePodInterface(
  hostIfName: string,
  pod?: { netns: string; ifName: string; mac?: string },
  hostNetns?: string,
): Promise<boolean> {
  if (await deleteHostEnd(hostIfName, hostNetns)) return true;
  if (pod?.mac === undefined || !(await exists(pod.netns))) return false;
  const { netns, ifName } = pod;
  const link = await linkInfo(netns, ifName);
  if (link?.kind !== "veth" || link.mac !== pod.mac.toLowerCase()) return false;
  const ip = await ipIn(netns, ["link", "del", "dev", ifName]);
  const result = await run(ip.argv, { netns: ip.netns, check: false });
  if (result.code === 0) return true;
  if (isNoDevice(result.stderr) || !(await exists(netns))) return false;
  throw new Error(`Cannot delete ${ifName} in ${netns}: ${result.stderr}`);
}

/**
 * Turns tx checksum offload off on an interface in a netns (see
 * {@link PodInterfaceSpec.softwareChecksums}). Idempotent; TSO goes with it, GSO stays.
 */
export async function disableTxChecksumOffload(netns: string, ifName: string): Promise<void> {
  if (txChecksumIoctl) {
    try {
      return txChecksumIoctl(netns, ifName);
    } catch (err) {
      throw new Error(
        `step "turn off tx checksum offload on ${ifName}" failed: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }
  const result = await run(["ethtool", "-K", ifName, "tx", "off"], { netns, check: false });
  if (result.code !== 0) {
    throw new Error(`step "turn off tx checksum offload on ${ifName}" failed: ${result.stderr}`, {
      cause: new CommandError(result),
    });
  }
}

/**
 * Router advertisements off on the pod's interface (`accept_ra` 0): its IPv6 routes are the
 * static ones the agent gives it, and no other pod of the network can add a default route through
 * itself with a forged advertisement.
 */
export async function ignoreRouterAdvertisements(netns: string, ifName: string): Promise<void> {
  const result = await run(["sysctl", "-qw", acceptRaOff(ifName)], { netns, check: false });
  if (result.code !== 0) {
    throw new Error(`step "${ignoreRaLabel(ifName)}" failed: ${result.stderr}`, {
      cause: new CommandError(result),
    });
  }
}

/** The sysctl assignment, with "/" separators: an interface name may hold a ".". */
function acceptRaOff(ifName: string): string {
  return `net/ipv6/conf/${ifName}/accept_ra=0`;
}

function ignoreRaLabel(ifName: string): string {
  return `turn off router advertisements on ${ifName}`;
}

/** An IPv6 interface takes no router advertisements unless its network's gateway sends them. */
function ignoresAdverts(spec: PodInterfaceSpec): boolean {
  return spec.addresses.some((a) => a.includes(":")) && !spec.acceptRouterAdvertisements;
}

/** What the pod's interface looks like now, for CNI CHECK; null when it (or the netns) is gone. */
export async function podInterfaceState(
  netns: string,
  ifName: string,
): Promise<PodInterfaceState | null> {
  if (!(await exists(netns))) return null;
  const ip = await ipIn(netns, ["-json", "addr", "show", "dev", ifName]);
  const result = await run(ip.argv, { netns: ip.netns, check: false });
  if (result.code !== 0) {
    if (isNoDevice(result.stderr) || !(await exists(netns))) return null;
    throw new Error(`Cannot read ${ifName} in ${netns}: ${result.stderr}`);
  }
  const [link] = JSON.parse(result.stdout) as IpAddrJson[];
  if (!link) return null;
  return {
    mac: link.address,
    mtu: link.mtu,
    addresses: (link.addr_info ?? [])
      .filter((a) => !(a.family === "inet6" && a.scope === "link"))
      .map((a) => `${a.local}/${a.prefixlen}`),
    up: link.flags.includes("UP"),
  };
}

/** The host end's name: "kn" + 13 hex digits of a hash, 15 characters, the most Linux allows. */
export function hostIfName(containerId: string, ifName: string): string {
  return "kn" + createHash("sha256").update(`${containerId}/${ifName}`).digest("hex").slice(0, 13);
}

interface Step {
  label: string;
  command: string;
}

/** The batch line that creates the pair; the pod end gets `mac` when it is given. */
function pairStep(spec: PodPairSpec, hostNetns: string, mac?: string): Step {
  const { ifName: dev, mtu } = spec;
  return {
    label: `create veth ${spec.hostIfName} <-> ${dev}`,
    // The host end is the primary, so it can be created up: "up" on the peer is refused.
    command: `link add name ${spec.hostIfName} mtu ${mtu} up netns ${hostNetns} ` +
      `type veth peer name ${dev}${mac ? ` address ${mac}` : ""} mtu ${mtu}`,
  };
}

/**
 * The batch lines, in the pod's netns, that set a made pod end up: addresses, the link's
 * `up.attributes` (up, and what else changes with it), routes.
 */
function setupSteps(spec: PodInterfaceSpec, up: { label: string; attributes: string }): Step[] {
  const dev = spec.ifName;
  // A named netns (what runtimes make) lets the batch itself fork sysctl in it: no nsenter exec.
  const name = netnsName(spec.netns);
  return [
    // Before the link is up, so that no advertisement is taken in between.
    ...(name && ignoresAdverts(spec)
      ? [{
        label: ignoreRaLabel(dev),
        command: `netns exec ${name} sysctl -qw ${acceptRaOff(dev)}`,
      }]
      : []),
    ...spec.addresses.map((addr) => ({
      label: `add address ${addr}`,
      command: `addr add ${addr} dev ${dev}${addr.includes(":") ? " nodad" : ""}`,
    })),
    { label: up.label, command: `link set dev ${dev} ${up.attributes}` },
    ...spec.routes.map((route) => ({
      label: `add route ${route.dst}${route.via ? ` via ${route.via}` : ""}`,
      command: routeCommand(route, dev),
    })),
  ];
}

function routeCommand(route: { dst: string; via?: string }, dev: string): string {
  const v6 = route.via?.includes(":") ?? route.dst.includes(":");
  const dst = route.dst === "default" && v6 ? "::/0" : route.dst;
  return `route add ${dst}${route.via ? ` via ${route.via}` : ""} dev ${dev}`;
}

/** Also keeps every value a single token: they become words of `ip -batch` lines. */
function validate(spec: PodInterfaceSpec): void {
  validatePair(spec);
  const bad = invalid(spec);
  if (!isMac(spec.mac.toLowerCase())) bad(`invalid MAC "${spec.mac}"`);
  for (const addr of spec.addresses) if (!isIpPrefix(addr)) bad(`invalid address "${addr}"`);
  for (const route of spec.routes) {
    if (route.dst !== "default" && !isIpPrefix(route.dst)) bad(`invalid route "${route.dst}"`);
    if (route.via !== undefined && !isIp(route.via)) bad(`invalid gateway "${route.via}"`);
  }
}

function validatePair(spec: PodPairSpec): void {
  const bad = invalid(spec);
  if (!isIfName(spec.ifName)) bad(`invalid interface name "${spec.ifName}"`);
  if (!isIfName(spec.hostIfName)) bad(`invalid host interface name "${spec.hostIfName}"`);
  if (!Number.isInteger(spec.mtu) || spec.mtu < 68 || spec.mtu > 65535) {
    bad(`invalid MTU ${spec.mtu}`);
  }
  for (const path of [spec.netns, spec.hostNetns ?? ""]) {
    if (/\s/.test(path)) bad(`netns path "${path}" has whitespace`);
  }
}

function invalid(spec: Pick<PodPairSpec, "ifName" | "netns">): (what: string) => never {
  return (what) => {
    throw new Error(`Cannot create ${spec.ifName} in ${spec.netns}: ${what}`);
  };
}

/**
 * The name `ip netns` knows a netns by, when the path is one of its own (/var/run/netns/NAME, as
 * runtimes make them); else undefined.
 */
function netnsName(path: string): string | undefined {
  if (!path.includes("/")) return path;
  const match = /^\/(?:var\/)?run\/netns\/([^/]+)$/.exec(path);
  return match?.[1];
}

/** The agent's netns as a path that stays valid inside the pod's netns. */
function ownNetns(): string {
  return `/proc/${Deno.pid}/ns/net`;
}

async function requireNetns(path: string, what: string): Promise<void> {
  if (!(await exists(path))) throw new Error(`${what}: network namespace ${path} does not exist`);
}

/** `ip -batch` reports "Command failed -:N" for line N. */
function failedStep(stderr: string): number | undefined {
  const match = /Command failed -:(\d+)/.exec(stderr);
  return match ? Number(match[1]) : undefined;
}

function parseIndexes(stdout: string, where: string): { hostIfIndex: number; podIfIndex: number } {
  const last = stdout.trim().split("\n").pop() ?? "";
  try {
    const [link] = JSON.parse(last) as { ifindex: number; link_index: number }[];
    return { hostIfIndex: link.link_index, podIfIndex: link.ifindex };
  } catch {
    throw new Error(`Created ${where}, but cannot read its indexes from "${last}"`);
  }
}

/** Concurrent DELs share one deletion, and one RCU grace period. */
const linkDeleter = new LinkDeleter();

function deleteHostEnd(name: string, hostNetns?: string): Promise<boolean> {
  return linkDeleter.delete(name, hostNetns);
}

/** The kind ("veth", "dummy", ...) and MAC of an interface in a netns; undefined when absent. */
async function linkInfo(
  netns: string,
  ifName: string,
): Promise<{ kind?: string; mac?: string } | undefined> {
  const ip = await ipIn(netns, ["-json", "-details", "link", "show", "dev", ifName]);
  const result = await run(ip.argv, { netns: ip.netns, check: false });
  if (result.code !== 0) return undefined;
  const [link] = JSON.parse(result.stdout) as {
    address?: string;
    linkinfo?: { info_kind?: string };
  }[];
  return link && { kind: link.linkinfo?.info_kind, mac: link.address?.toLowerCase() };
}

function isNoDevice(stderr: string): boolean {
  return /Cannot find device|does not exist|No such device/.test(stderr);
}

const NETNS_RUN_DIR = "/var/run/netns";

/**
 * The `ip` command line for work inside a netns. `ip -n` enters it itself: one exec, where nsenter
 * and ip are two (about 0.7 ms less a call). It takes a name under /var/run/netns, so a path is
 * reached from there by "../../../.." (also when /var/run is a link to /run); without that directory,
 * the runner's nsenter does it.
 */
async function ipIn(netns: string, args: string[]): Promise<{ argv: string[]; netns?: string }> {
  if (!netns.includes("/")) return { argv: ["ip", "-n", netns, ...args] };
  if (netns.startsWith("/") && await exists(NETNS_RUN_DIR)) {
    return { argv: ["ip", "-n", `../../..${netns}`, ...args] };
  }
  return { argv: ["ip", ...args], netns };
}

/** A netns path, or a name as `ip netns` keeps it. */
async function exists(netns: string): Promise<boolean> {
  try {
    await Deno.stat(netns.includes("/") ? netns : `${NETNS_RUN_DIR}/${netns}`);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

interface IpAddrJson {
  flags: string[];
  mtu: number;
  address: string;
  addr_info?: { family: string; local: string; prefixlen: number; scope: string }[];
}
