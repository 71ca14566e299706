/**
 * Simulated Kubernetes nodes on one machine: each node is a network namespace running its own
 * userspace Open vSwitch (ovsdb-server + ovs-vswitchd, datapath "netdev"); nodes share an L2
 * underlay, a Linux bridge in a "switch" namespace that any number of nodes can join.
 *
 *   node netns kt-a1b2-n1                switch netns kt-a1b2-ul            node netns kt-a1b2-n2
 *   br-phy (192.0.2.1/24) -- ul0 <=veth=> sw-n1 -- br0 -- sw-n2 <=veth=> ul0 -- br-phy (192.0.2.2/24)
 *
 * Everything is registered with a {@link Cleanup}, so it goes away even when a test fails.
 */
import { sweepStaleOnce } from "./stale.ts";
import { run } from "@knitter/common";
import { Ovs, type OvsTarget } from "@knitter/agent/ovs";
import { Cleanup, readPidfile, stopPid } from "./cleanup.ts";

const VSWITCHD = "/usr/lib/openvswitch-switch/ovs-vswitchd";
const SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema";

export interface SimNode {
  /** Short name, e.g. "n1". */
  name: string;
  /** Name of the node's netns, e.g. "kt-a1b2-n1" (for `ip netns exec` / `ip -n`). */
  netns: string;
  /** Path of the node's netns, e.g. /var/run/netns/kt-a1b2-n1 (for nsenter, `netns PATH`). */
  netnsPath: string;
  stateDir: string;
  /**
   * The node's OVS. No netns: ovs-vsctl/ovs-ofctl talk over unix sockets, so they work from the
   * test's own netns and save an exec each.
   */
  ovs: OvsTarget;
  /** The node's address on the underlay ("" until it joins one). */
  underlayIp: string;
  /** Where the node's own resources are registered; stop() runs it. */
  cleanup: Cleanup;
  /** Stops the node's OVS, deletes its netns and its pods' netns. Idempotent. */
  stop(): Promise<void>;
}

/** An L2 segment: a Linux bridge in a netns of its own. */
export interface Underlay {
  netns: string;
  bridge: string;
  prefix: number;
}

export interface SimNodeOptions {
  /** Short name, [a-z0-9] up to 12 characters; the netns is `${cleanup.prefix}-${name}`. */
  name: string;
  cleanup: Cleanup;
  /** Default: a new temporary directory, removed at cleanup. */
  stateDir?: string;
  /** Join this underlay with this address at start. */
  underlay?: { net: Underlay; ip: string };
}

export async function startSimNode(opts: SimNodeOptions): Promise<SimNode> {
  if (!/^[a-z0-9]{1,12}$/.test(opts.name)) {
    throw new Error(`Bad sim node name "${opts.name}": use [a-z0-9], at most 12 characters`);
  }
  await sweepStaleOnce();
  const own = new Cleanup(opts.cleanup.prefix);
  opts.cleanup.defer(() => own.cleanup());
  const netns = own.name(opts.name);
  try {
    await addNetns(own, netns);
    // As on a real node, loopback is up: the agent hears Open vSwitch's IPFIX on it.
    await run(["ip", "-n", netns, "link", "set", "lo", "up"]);
    const stateDir = opts.stateDir ?? await own.tempDir();
    const ovs = await startOvs(own, netns, stateDir);
    const node: SimNode = {
      name: opts.name,
      netns,
      netnsPath: `/var/run/netns/${netns}`,
      stateDir,
      ovs,
      underlayIp: "",
      cleanup: own,
      stop: () => own.cleanup(),
    };
    if (opts.underlay) await joinUnderlay(node, opts.underlay.net, opts.underlay.ip);
    return node;
  } catch (err) {
    await own.cleanup().catch(() => {});
    throw err;
  }
}

/** A new, empty L2 underlay. */
export async function createUnderlay(
  cleanup: Cleanup,
  opts: { name?: string; prefix?: number } = {},
): Promise<Underlay> {
  const netns = cleanup.name(opts.name ?? "ul");
  await addNetns(cleanup, netns);
  await run(["ip", "-n", netns, "-batch", "-"], {
    stdin: "link add br0 type bridge\nlink set br0 up\n",
  });
  return { netns, bridge: "br0", prefix: opts.prefix ?? 24 };
}

/**
 * Plugs a node into the underlay: a veth made directly across the two netns, the node's end
 * (ul0) on the node's OVS bridge br-phy, the node's address on br-phy's internal interface (as
 * OVS's userspace tunnels route and resolve neighbours through it).
 */
export async function joinUnderlay(node: SimNode, underlay: Underlay, ip: string): Promise<void> {
  const port = `sw-${node.name}`;
  await run(["ip", "-n", underlay.netns, "-batch", "-"], {
    stdin: `link add ${port} type veth peer name ul0 netns ${node.netnsPath}\n` +
      `link set ${port} master ${underlay.bridge} up\n`,
  });
  await run(["ip", "-n", node.netns, "link", "set", "ul0", "up"]);
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-phy", { datapathType: "netdev", failMode: "standalone" });
  await ovs.addPorts("br-phy", [{ name: "ul0" }]);
  await run(["ip", "-n", node.netns, "-batch", "-"], {
    stdin: `addr add ${ip}/${underlay.prefix} dev br-phy\nlink set br-phy up\n`,
  });
  node.underlayIp = ip;
}

/** Two nodes on a new underlay (default addresses 192.0.2.1 and .2); a third may join it later. */
export async function connectUnderlay(
  a: SimNode,
  b: SimNode,
  opts: { ips?: [string, string]; prefix?: number; name?: string } = {},
): Promise<Underlay> {
  const underlay = await createUnderlay(a.cleanup, opts);
  const [ipA, ipB] = opts.ips ?? ["192.0.2.1", "192.0.2.2"];
  await joinUnderlay(a, underlay, ipA);
  await joinUnderlay(b, underlay, ipB);
  return underlay;
}

/** A pod's netns (loopback up), deleted with the node; returns its path. */
export async function addPodNetns(node: SimNode, name: string): Promise<string> {
  const netns = `${node.netns}-${name}`;
  await addNetns(node.cleanup, netns);
  await run(["ip", "-n", netns, "link", "set", "lo", "up"]);
  return `/var/run/netns/${netns}`;
}

async function addNetns(cleanup: Cleanup, name: string): Promise<void> {
  cleanup.netns(name);
  await run(["ip", "netns", "add", name]);
}

/** The testbed recipe: a private ovsdb-server and ovs-vswitchd, both inside the node's netns. */
async function startOvs(cleanup: Cleanup, netns: string, dir: string): Promise<OvsTarget> {
  const target = { dbSock: `${dir}/db.sock`, rundir: dir };
  const env = { OVS_RUNDIR: dir };
  await run(["ovsdb-tool", "create", `${dir}/conf.db`, SCHEMA]);
  cleanup.pidfile(`${dir}/ovsdb.pid`);
  await run([
    "ovsdb-server",
    `${dir}/conf.db`,
    `--remote=punix:${target.dbSock}`,
    ...daemonArgs(dir, "ovsdb"),
  ], { netns, env });
  await new Ovs(target).vsctl(["--no-wait", "init"]);
  cleanup.pidfile(`${dir}/vswitchd.pid`);
  await run([VSWITCHD, `unix:${target.dbSock}`, ...daemonArgs(dir, "vswitchd")], { netns, env });
  return target;
}

/** The pid of the node's ovs-vswitchd (or ovsdb-server), from its pidfile. */
export async function ovsPid(node: SimNode, daemon: "vswitchd" | "ovsdb"): Promise<number> {
  const pid = await readPidfile(`${node.stateDir}/${daemon}.pid`);
  if (pid === undefined) throw new Error(`no ${daemon} pidfile in ${node.stateDir}`);
  return pid;
}

/**
 * Stops the node's ovs-vswitchd by its pid (SIGKILL: a crash; else SIGTERM), so its flows are
 * gone. The database keeps the bridges and ports.
 */
export async function stopVswitchd(node: SimNode, opts: { kill?: boolean } = {}): Promise<void> {
  const pid = await ovsPid(node, "vswitchd");
  if (opts.kill) Deno.kill(pid, "SIGKILL");
  await stopPid(pid);
}

/**
 * Starts the node's ovs-vswitchd again on the same database; resolves once it is ready (when
 * `--detach` returns), answering that moment (`performance.now()`). With `flowRestoreWait`, as an
 * operator's restart script does: `other_config:flow-restore-wait=true` is set first, so the
 * switch forwards nothing until the agent has put the full flow set back and cleared it.
 */
export async function startVswitchd(
  node: SimNode,
  opts: { flowRestoreWait?: boolean } = {},
): Promise<number> {
  const dir = node.stateDir;
  if (opts.flowRestoreWait) {
    await new Ovs(node.ovs).vsctl([
      "--no-wait",
      "set",
      "Open_vSwitch",
      ".",
      "other_config:flow-restore-wait=true",
    ]);
  }
  await run([VSWITCHD, `unix:${node.ovs.dbSock}`, ...daemonArgs(dir, "vswitchd")], {
    netns: node.netns,
    env: { OVS_RUNDIR: dir },
  });
  return performance.now();
}

/** Restarts the node's ovsdb-server by its pid, on the same database file. */
export async function restartOvsdb(node: SimNode): Promise<void> {
  const dir = node.stateDir;
  await stopPid(await ovsPid(node, "ovsdb"));
  await run([
    "ovsdb-server",
    `${dir}/conf.db`,
    `--remote=punix:${node.ovs.dbSock}`,
    ...daemonArgs(dir, "ovsdb"),
  ], { netns: node.netns, env: { OVS_RUNDIR: dir } });
}

/** --detach returns once the daemon is ready; its pid is then only known from the pidfile. */
function daemonArgs(dir: string, name: string): string[] {
  return [
    `--pidfile=${dir}/${name}.pid`,
    "--detach",
    `--log-file=${dir}/${name}.log`,
    `--unixctl=${dir}/${name}.ctl`,
    "-vconsole:off",
  ];
}
