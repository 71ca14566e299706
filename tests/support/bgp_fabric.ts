/**
 * A routed fabric for BGP tests: an "external router" netns on a stack's underlay running BIRD 2
 * (the same daemon as the agents) as the peer of every node, with a host behind it on a subnet of
 * its own. The router installs what it learns in its kernel and forwards; what it learned, with
 * each route's next hops, is read from its BIRD.
 */
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { type StackNode, waitFor } from "../../devstack/stack.ts";

/** The router on the underlay (the stack's nodes are 192.0.2.1, .2, ...), and its IPv6 twin. */
export const ROUTER = "192.0.2.254";
/** A second address of the router, a peer of its own (FabricOptions.second): a second ToR. */
export const ROUTER2 = "192.0.2.253";
export const ROUTER6 = "fd99::fe";
/** The host behind the router, on a subnet no node has a route to but through the router. */
export const HOST = "198.51.100.2";
export const HOST_SUBNET = "198.51.100.0/24";
/** The host's IPv6 address, on a subnet of its own behind the router too. */
export const HOST6 = "fd98::2";
export const HOST6_SUBNET = "fd98::/64";
export const ROUTER_ASN = 65000;
export const NODE_ASN = 65001;

/** A node's IPv6 address on the underlay: fd99:: and its IPv4's last number. */
export function underlay6(ip: string): string {
  return `fd99::${ip.split(".")[3]}`;
}

/** A router of the fabric on the underlay, running BIRD 2 with a session to every node. */
export interface PeerRouter {
  /** Its netns. */
  router: string;
  /** BIRD's control socket of the router. */
  socket: string;
  /** Every route the router learned: prefix → the next hops it has for it (sorted). */
  learned(): Promise<Map<string, string[]>>;
  /** The router's BGP sessions by protocol (node1, node2, ...): established, and since when. */
  sessions(): Promise<Map<string, { established: boolean; since: string }>>;
}

export interface Fabric extends PeerRouter {
  host: string;
  /** A second router (FabricOptions.second), at ROUTER2: another ToR. */
  second?: PeerRouter;
}

export interface FabricOptions {
  /** The ASN the routers expect of a node, by underlay address; absent: NODE_ASN. */
  asns?: Record<string, number>;
  /** A second router, at ROUTER2, also a peer of every node. */
  second?: boolean;
}

/** Makes the router and the host, and starts the router's BIRD with a session to each node. */
export async function startFabric(
  cleanup: Cleanup,
  nodeIps: string[],
  opts: FabricOptions = {},
): Promise<Fabric> {
  const host = cleanup.name("host");
  const first = await startRouter(cleanup, "rtr", [ROUTER, ROUTER6], nodeIps, opts, [
    `link add eth1 type veth peer name eth0 netns ${host}`,
    "addr add 198.51.100.1/24 dev eth1",
    "addr add fd98::1/64 dev eth1 nodad",
    "link set eth1 up",
  ], host);
  await run(["ip", "-n", host, "-batch", "-"], {
    stdin: `addr add ${HOST}/24 dev eth0\naddr add ${HOST6}/64 dev eth0 nodad\n` +
      "link set eth0 up\nlink set lo up\nroute add default via 198.51.100.1\n" +
      "route add ::/0 via fd98::1\n",
  });
  await run(["ip", "netns", "exec", first.router, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
  await run([
    "ip",
    "netns",
    "exec",
    first.router,
    "sysctl",
    "-qw",
    "net.ipv6.conf.all.forwarding=1",
  ]);
  // Whole checksums on the wire: the nodes' Open vSwitch (userspace) reads frames as they are.
  await run(["ip", "netns", "exec", host, "ethtool", "-K", "eth0", "tx", "off"]);
  const second = opts.second
    ? await startRouter(cleanup, "rtr2", [ROUTER2], nodeIps, opts, [])
    : undefined;
  return { ...first, host, ...(second && { second }) };
}

/**
 * A router netns on the underlay's bridge with these addresses (the first its router ID), and its
 * BIRD. `more`: further `ip` lines, after the netns `alsoNetns` is made.
 */
async function startRouter(
  cleanup: Cleanup,
  tag: string,
  [address, address6]: string[],
  nodeIps: string[],
  opts: FabricOptions,
  more: string[],
  alsoNetns?: string,
): Promise<PeerRouter> {
  const router = cleanup.name(tag);
  for (const ns of [router, ...(alsoNetns ? [alsoNetns] : [])]) {
    cleanup.netns(ns);
    await run(["ip", "netns", "add", ns]);
  }
  await run(["ip", "-n", cleanup.name("ul"), "-batch", "-"], {
    stdin: `link add ${tag}0 type veth peer name eth0 netns ${router}\n` +
      `link set ${tag}0 master br0 up\n`,
  });
  await run(["ip", "-n", router, "-batch", "-"], {
    stdin: [
      `addr add ${address}/24 dev eth0`,
      ...(address6 ? [`addr add ${address6}/64 dev eth0 nodad`] : []),
      "link set eth0 up",
      "link set lo up",
      ...more,
    ].join("\n") + "\n",
  });
  await run(["ip", "netns", "exec", router, "ethtool", "-K", "eth0", "tx", "off"]);
  const dir = await cleanup.tempDir();
  const socket = `${dir}/${tag}.ctl`;
  await Deno.writeTextFile(`${dir}/${tag}.conf`, routerConfig(address, nodeIps, opts));
  cleanup.pidfile(`${dir}/${tag}.pid`);
  await run([
    ...["ip", "netns", "exec", router],
    ...["bird", "-c", `${dir}/${tag}.conf`, "-s", socket, "-P", `${dir}/${tag}.pid`],
  ]);
  return {
    router,
    socket,
    learned: () => learnedRoutes(socket),
    sessions: () => routerSessions(socket),
  };
}

/**
 * A session a node refused (its peer not configured yet) is tried again within seconds, not after
 * BIRD's defaults (120 s to retry, an Idle wait of 60 s and more after an error).
 */
const RETRY = "connect retry time 2; error wait time 1, 5;";

/** Learns everything from every node (hold time 3: a silent node's routes go within 3 s). */
function routerConfig(address: string, nodeIps: string[], opts: FabricOptions): string {
  return [
    `router id ${address};`,
    "protocol device {}",
    "protocol kernel { ipv4 { import none; export all; }; merge paths on; }",
    "protocol kernel { ipv6 { import none; export all; }; merge paths on; }",
    ...nodeIps.map((ip, i) =>
      `protocol bgp node${i + 1} { local ${address} as ${ROUTER_ASN}; neighbor ${ip} as ` +
      `${opts.asns?.[ip] ?? NODE_ASN}; hold time 3; ${RETRY} ` +
      "ipv4 { import all; export none; }; ipv6 { import all; export none; }; }"
    ),
  ].join("\n") + "\n";
}

/** `birdc show protocols`, its BGP lines: "node1  BGP  ---  up  23:16:34.872  Established". */
async function routerSessions(socket: string) {
  const r = await run(["birdc", "-s", socket, "show", "protocols"]);
  const out = new Map<string, { established: boolean; since: string }>();
  for (const line of r.stdout.split("\n")) {
    const cols = line.trim().split(/\s+/);
    if (cols[1] !== "BGP") continue;
    out.set(cols[0], { established: cols[5] === "Established", since: cols[4] });
  }
  return out;
}

/**
 * `birdc show route` read as prefix → next hops. A prefix learned from several peers is listed
 * once, each further route on a line of its own that starts blank, and each route's next hop on a
 * `via` line under it.
 */
async function learnedRoutes(socket: string): Promise<Map<string, string[]>> {
  const r = await run(["birdc", "-s", socket, "show", "route"]);
  const out = new Map<string, string[]>();
  let prefix = "";
  for (const line of r.stdout.split("\n")) {
    const head = /^(\S+)\s+unicast/.exec(line);
    if (head) prefix = head[1];
    const via = /^\s+via (\S+) on/.exec(line);
    if (via && prefix) out.set(prefix, [...out.get(prefix) ?? [], via[1]].sort());
  }
  return out;
}

/**
 * Gives a node's agent a `bgp` section (its own IPv6 next hop; `more` replaces parts of the
 * agent's configuration, `bgp` included) and restarts it.
 */
export async function speakBgp(
  cleanup: Cleanup,
  node: StackNode,
  more: Record<string, unknown> = {},
): Promise<void> {
  const ip = node.sim.underlayIp;
  await run(["ip", "-n", node.sim.netns, "-batch", "-"], {
    stdin: `addr add ${underlay6(ip)}/64 dev br-phy nodad\n` +
      `route add ${HOST_SUBNET} via ${ROUTER}\nroute add ${HOST6_SUBNET} via ${ROUTER6}\n`,
  });
  await node.stopAgent();
  const config = JSON.parse(await Deno.readTextFile(node.agentConfig));
  config.bgp = {
    localAsn: NODE_ASN,
    peers: [{ address: ROUTER, asn: ROUTER_ASN, holdTime: 3 }],
    communities: ["65001:80"],
    nextHop6: underlay6(ip),
  };
  await Deno.writeTextFile(node.agentConfig, JSON.stringify({ ...config, ...more }));
  // Its BIRD goes with the test, whatever happens to the agent.
  cleanup.pidfile(`${node.agentStateDir}/bird.pid`);
  await node.startAgent();
}

/** Generous: BGP sessions take a few seconds to come up; speed is the benchmarks'. */
const LEARN_MS = 60_000;

/** Waits until the router has each prefix with exactly these next hops (sorted). */
export async function learns(
  fabric: Pick<PeerRouter, "learned">,
  want: Map<string, string[]>,
): Promise<void> {
  let last = new Map<string, string[]>();
  try {
    await waitFor("the router learns the advertised routes", async () => {
      last = await fabric.learned();
      return [...want].every(([k, hops]) => String(last.get(k)) === String(hops));
    }, LEARN_MS);
  } catch (err) {
    throw new Error(`${(err as Error).message}: learned ${JSON.stringify([...last])}`);
  }
}

/** Waits until the router has none of the prefixes. */
export async function forgets(
  fabric: Pick<PeerRouter, "learned">,
  prefixes: string[],
): Promise<void> {
  let last = new Map<string, string[]>();
  try {
    await waitFor("the router forgets the withdrawn routes", async () => {
      last = await fabric.learned();
      return prefixes.every((p) => !last.has(p));
    }, LEARN_MS);
  } catch (err) {
    throw new Error(`${(err as Error).message}: learned ${JSON.stringify([...last])}`);
  }
}
