/**
 * Host ports: the node's own interface on a network with egress, hostAccess or advertise
 * (agent/README.md, "Egress and the node", "BGP advertisement"). One OVS internal port on br-int per such network with pods here, in the
 * node's netns, with the network's gateway MAC and its IPv4 gateway address, so the kernel owns the
 * gateway on the node's side; the flows (networks[].hostPort, agent/PIPELINE.md "Host port") keep
 * it to the network's local pods. Around it, what the agent owns in the kernel: the nftables table
 * of host_nft.ts, and for egress networks a routing table and a rule per network (replies by
 * conntrack mark). Everything is made again whenever the wanted set changes, after a heal and after
 * a restart; ports, rules and the table of networks no longer wanted are removed.
 *
 * @module
 */
import { type Logger, type Port, run } from "@knitter/common";
import {
  bitsOf,
  type Cidr,
  cidrsOverlap,
  formatCidr,
  networkOf,
  parseIpPrefix,
} from "@knitter/common/address";
import { gatewayMac } from "@knitter/wasm";
import type { Ovs, OvsPortSpec } from "./ovs.ts";
import type { Floating } from "./floating_nft.ts";
import type { FloatingKernel } from "./floating_kernel.ts";
import { managerSaysActive } from "./migration.ts";
import {
  HOST_PORT_PREFIX,
  type HostNet,
  hostPortName,
  hostRuleset,
  MARK_MASK,
  markOf,
  MAX_MARKED,
  RULE_PRIORITY,
  tableOf,
} from "./host_nft.ts";

/** Marks the OVS ports that are host ports: the manager's network ID. */
export const HOST_PORT_ID = "knitter-host-port";

/** What one host port needs: HostNet, and the network's addresses. */
export interface HostPortSpec extends HostNet {
  networkId: string;
  /** The network's gateway MAC (the same as its flows answer with). */
  mac: string;
  /** The gateway's IPv4 address and the network's prefix length (none: IPv6 only). */
  gateway?: string;
  prefix?: number;
  /** The network's IPv4 CIDR (routed to the port). */
  cidr?: string;
  mtu: number;
  /** The network's IPv6 gateway, prefix length and subnet (dual stack, or IPv6 only). */
  v6?: Side;
}

/** A gateway and the subnet it is on, of one family. */
type Side = { gateway: string; prefix: number; cidr: string };

/**
 * The host ports the local ports' networks need: one per network whose port says egress or
 * hostAccess or advertise and that has a gateway: its IPv4 gateway, and its IPv6 one (a
 * dual-stack network's gateway6, an IPv6-only network's gateway) when its ports have one.
 */
export function hostPortSpecs(
  ports: { port: Port; number: number }[],
): HostPortSpec[] {
  const out = new Map<string, HostPortSpec>();
  for (const { port, number } of ports) {
    const egress = port.networkEgress === true;
    const hostAccess = port.networkHostAccess === true;
    const advertise = port.networkAdvertise === true;
    const floating = floatingOf(port, 4);
    const floating6 = floatingOf(port, 6);
    if (!egress && !hostAccess && !advertise && !floating && !floating6) continue;
    const v4 = sideOf(port.address, port.gateway, 4);
    const v6 = sideOf(port.address6, port.gateway6, 6) ?? sideOf(port.address, port.gateway, 6);
    if (!v4 && !v6) continue;
    const spec = out.get(port.networkId) ?? {
      number,
      port: hostPortName(number),
      egress,
      hostAccess,
      advertise,
      networkId: port.networkId,
      mac: gatewayMac(port.networkId),
      ...v4,
      mtu: port.mtu,
      ...(v6 ? { v6 } : {}),
    };
    if (floating) spec.floating = [...spec.floating ?? [], floating];
    if (floating6 && spec.v6) spec.floating6 = [...spec.floating6 ?? [], floating6];
    out.set(port.networkId, spec);
  }
  for (const s of out.values()) {
    for (const list of [s.floating, s.floating6]) {
      list?.sort((a, b) => a.address.localeCompare(b.address));
    }
  }
  return [...out.values()].sort((a, b) => a.number - b.number);
}

/** A port's address and gateway of `family`: the host port's side of it (none without both). */
function sideOf(address: string | undefined, gateway: string | undefined, family: 4 | 6) {
  if (address === undefined || gateway === undefined) return undefined;
  const parsed = parseIpPrefix(address, "required");
  if ("error" in parsed || parsed.ip.family !== family) return undefined;
  if (gateway.includes(":") !== (family === 6)) return undefined;
  const prefix = parsed.prefix!;
  const side: Side = { gateway, prefix, cidr: formatCidr(networkOf(parsed.ip, prefix)) };
  return side;
}

/**
 * A port's floating binding of `family` (the manager's `floating`, `floating6`): its address of
 * that family behind the floating one. A claim's port that does not have the claim's traffic
 * (`active: false`) is not NATed.
 */
function floatingOf(port: Port, family: 4 | 6): Floating | undefined {
  const [address, own] = family === 4
    ? [port.floating, port.address]
    : [port.floating6, port.address6];
  if (address === undefined || own === undefined || !managerSaysActive(port)) return undefined;
  const parsed = parseIpPrefix(own, "required");
  if ("error" in parsed || parsed.ip.family !== family) return undefined;
  return { address, pod: own.slice(0, own.indexOf("/")) };
}

/**
 * The `ip -batch` lines that give a host port its MAC, MTU and address, and bring it up. An
 * address it has already (`keepAddress`: an agent restarted) stays: its pods' connections see no
 * gap.
 */
export function linkCommands(s: HostPortSpec, keepAddress = false): string[] {
  // Without hostAccess or advertise the subnet is routed only in the network's own table: two
  // tenants' egress networks may share a CIDR on one node.
  const noPrefix = inMainTable(s) ? "" : " noprefixroute";
  return [
    `link set dev ${s.port} address ${s.mac} mtu ${s.mtu} up`,
    ...(keepAddress ? [] : [
      `addr flush dev ${s.port}`,
      ...(s.gateway !== undefined
        ? [`addr add ${s.gateway}/${s.prefix} dev ${s.port}${noPrefix}`]
        : []),
      // No duplicate address detection: the address is the network's gateway, no pod's. A
      // link-local address too (the flush took the kernel's): the kernel solicits a pod's
      // address from it when it forwards to the pod (egress replies, advertised traffic).
      ...(s.v6
        ? [
          `addr add ${s.v6.gateway}/${s.v6.prefix} dev ${s.port} nodad${noPrefix}`,
          `addr add ${linkLocalOf(s.mac)}/64 dev ${s.port} nodad`,
        ]
        : []),
    ]),
  ];
}

/** The EUI-64 link-local address of a MAC (RFC 4291, appendix A). */
export function linkLocalOf(mac: string): string {
  const b = mac.split(":").map((x) => parseInt(x, 16));
  const words = [(b[0] ^ 2) << 8 | b[1], b[2] << 8 | 0xff, 0xfe00 | b[3], b[4] << 8 | b[5]];
  return `fe80::${words.map((w) => w.toString(16)).join(":")}`;
}

/**
 * Whether `ip -j addr show` of the port says it has the spec's address and nothing else of IPv4,
 * with the prefix route as the spec wants it (noprefixroute without hostAccess or advertise), and
 * of global IPv6 exactly the spec's IPv6 gateway (or none).
 */
export function hasAddress(shown: string, s: HostPortSpec): boolean {
  let links: { addr_info?: Shown[] }[];
  try {
    links = JSON.parse(shown);
  } catch {
    return false;
  }
  const info = links[0]?.addr_info ?? [];
  const v6 = info.filter((a) => a.family === "inet6" && a.scope === "global");
  const want6 = s.v6 ? [{ local: s.v6.gateway, prefix: s.v6.prefix }] : [];
  const want4 = s.gateway !== undefined ? [{ local: s.gateway, prefix: s.prefix! }] : [];
  return only(info.filter((a) => a.family === "inet"), want4, s) && only(v6, want6, s);
}

/** An address as `ip -j addr show` says it. */
interface Shown {
  family: string;
  local: string;
  prefixlen: number;
  scope?: string;
  noprefixroute?: boolean;
}

/** Whether the shown addresses are exactly those wanted, with the prefix route as `s` wants it. */
function only(shown: Shown[], want: { local: string; prefix: number }[], s: HostNet): boolean {
  return shown.length === want.length &&
    want.every((w, i) =>
      shown[i].local === w.local && shown[i].prefixlen === w.prefix &&
      (shown[i].noprefixroute === true) === !inMainTable(s)
    );
}

/** hostAccess and advertised networks: the subnet is in the node's main table. */
function inMainTable(s: HostNet): boolean {
  return s.hostAccess || s.advertise;
}

/**
 * Networks whose pods' connections out are routed by their mark: egress, and floating addresses
 * (a network that has only those still needs its subnet in its own table for the replies).
 */
function ownTable(s: HostNet): boolean {
  return s.egress || (s.floating?.length ?? 0) > 0 || (s.floating6?.length ?? 0) > 0;
}

/** What a host port's device is set up from: not its floating bindings (no blip when they change). */
function deviceKey(s: HostPortSpec): string {
  return JSON.stringify({ ...s, floating: undefined, floating6: undefined, ownTable: ownTable(s) });
}

/**
 * The routing of an egress network's replies: its subnet in a table chosen by its mark; of IPv6
 * (`v6`: `ip -6 -batch` lines), its IPv6 subnet, if it has one.
 */
export function egressRouteCommands(s: HostPortSpec, v6 = false): string[] {
  const side = v6 ? s.v6 : s;
  if (side?.cidr === undefined) return [];
  const table = tableOf(s.number);
  const mark = `0x${markOf(s.number).toString(16)}/0x${MARK_MASK.toString(16)}`;
  return [
    `route replace ${side.cidr} dev ${s.port} src ${side.gateway} table ${table}`,
    `rule add pref ${RULE_PRIORITY} fwmark ${mark} lookup ${table}`,
  ];
}

/** What the host ports do in the node's kernel: commands (`run`) and sysctls (its seams). */
export interface KernelSeams {
  run: typeof run;
  /** Writes a sysctl of the agent's own netns (the node's): /proc/sys/net is per netns. */
  sysctl(path: string, value: string): Promise<void>;
}

/**
 * On every host port: the kernel answers ARP only for the port's own address, from it, and takes
 * no redirects (a pod must not change the node's routes). The node sends none either: the table
 * drops them, as `send_redirects` of one interface is or-ed with `all`.
 */
const PORT_SYSCTLS: [string, string][] = [
  ["arp_ignore", "1"],
  ["arp_announce", "2"],
  ["send_redirects", "0"],
  ["accept_redirects", "0"],
];

/** What `ip -j` says of a route or an address, as far as the host ports need. */
interface IpJson {
  dst?: unknown;
  dev?: unknown;
  ifname?: unknown;
  nexthops?: { dev?: unknown }[];
  addr_info?: { local?: string; prefixlen?: number }[];
}

/** The host ports and loopback: not the node's own place on a network. */
function ours(dev: unknown): boolean {
  return typeof dev === "string" && (dev.startsWith(HOST_PORT_PREFIX) || dev === "lo");
}

/** Whether two prefixes (host bits allowed, no prefix: one address) share an address. */
function overlaps(a: string, b: string): boolean {
  const [x, y] = [a, b].map(subnetOf);
  return x !== null && y !== null && cidrsOverlap(x, y);
}

function subnetOf(text: string): Cidr | null {
  const p = parseIpPrefix(text);
  return "error" in p ? null : networkOf(p.ip, p.prefix ?? bitsOf(p.ip.family));
}

export const KERNEL: KernelSeams = {
  run,
  sysctl: (path, value) => Deno.writeTextFile(`/proc/sys/${path.replaceAll(".", "/")}`, value),
};

export class HostPorts {
  /** The wanted set last applied in full; "" makes the next reconcile apply everything again. */
  private applied = "";
  private ofports = new Map<number, number>();
  private names: string[] = [];
  /** The floating addresses' conntrack and ARP (the daemon sets it: floating_kernel.ts). */
  floating?: FloatingKernel;
  /** Each host port's spec as its device was last set up: unchanged ones are left alone. */
  private done = new Map<string, string>();

  constructor(
    private readonly ovs: Ovs,
    private readonly bridge: string,
    private readonly log: Logger,
    private readonly kernel: KernelSeams = KERNEL,
    /** Where egress leaves (agent config); absent: found from the node's routes. */
    private readonly egressInterfaces?: string[],
    /** The node's underlay address: its interface is the uplink when there is no default route. */
    private readonly underlayIp?: string,
  ) {}

  /** The host ports' names as last applied (the healer watches them). */
  get portNames(): readonly string[] {
    return this.names;
  }

  /** The next reconcile applies everything again (after a heal: devices may be new). */
  invalidate(): void {
    this.applied = "";
    this.done.clear();
  }

  /**
   * Makes the host ports, kernel settings, routes, rules and nftables table those of `specs`, and
   * answers the ofport of each network's host port (by network number) whose kernel side is fully
   * set up: the flows send pods' traffic to no other. A failure is logged and tried again at the
   * next call.
   */
  async reconcile(specs: HostPortSpec[]): Promise<Map<number, number>> {
    const key = JSON.stringify(specs);
    if (key === this.applied) return this.ofports;
    try {
      await this.apply(await this.clearOfNode(specs));
      this.applied = key;
    } catch (err) {
      this.log.error("cannot set up the node's host ports (egress, hostAccess, advertise)", {
        error: err instanceof Error ? err.message : String(err),
        networks: specs.map((s) => s.networkId),
      });
    }
    return this.ofports;
  }

  private async apply(specs: HostPortSpec[]): Promise<void> {
    const existing = (await this.ovs.listPorts(this.bridge)).filter((p) =>
      p.externalIds[HOST_PORT_ID] !== undefined
    );
    // Nothing wanted and nothing left from before: no kernel change at all (nodes without any
    // such network need no nftables).
    if (specs.length === 0 && existing.length === 0 && this.names.length === 0) return;
    const wanted = new Set(specs.map((s) => s.port));
    const stale = existing.filter((p) => !wanted.has(p.name)).map((p) => p.name);
    // Only new or changed ports are set up again (an address flushed is a blip for its pods).
    const changed = specs.filter((s) => this.done.get(s.port) !== deviceKey(s));
    // Until their kernel side is set up again, changed and stale ports get no flows.
    for (const s of changed) this.done.delete(s.port);
    for (const name of stale) this.done.delete(name);
    const kept = new Map<number, number>();
    for (const s of specs) {
      const ofport = this.ofports.get(s.number);
      if (this.done.has(s.port) && ofport !== undefined) kept.set(s.number, ofport);
    }
    this.ofports = kept;
    // Rules of the ports that go or change; made again below where wanted.
    const numbers = new Set([
      ...stale.map((name) => Number(name.slice(HOST_PORT_PREFIX.length))),
      ...changed.map((s) => s.number),
    ]);
    for (const n of numbers) await this.deleteRules(n);
    // The table first: a port it does not know of yet is closed (`kh*`), so no port is ever
    // open without its rules.
    const uplinks = await this.uplinks(specs);
    const uplinks6 = await this.uplinks6(specs, uplinks);
    await this.kernel.run(["nft", "-f", "-"], { stdin: hostRuleset(specs, uplinks, uplinks6) });
    // Before the ports go: the healer must not take their deletion for a loss.
    this.names = specs.map((s) => s.port);
    await this.ovs.delPorts(this.bridge, stale);
    const ofports = await this.ovs.addPorts(this.bridge, specs.map(portSpec));
    if (specs.length > 0) {
      await this.kernel.sysctl("net.ipv4.ip_forward", "1");
      // The node's own ICMP errors (time exceeded, fragmentation needed) to a pod carry the mark
      // of the packet they answer: routed back to its network, not by the main table to another
      // network with the same addresses, or out to the LAN.
      await this.kernel.sysctl("net.ipv4.fwmark_reflect", "1");
    }
    if (specs.some((s) => s.v6)) {
      // The same for IPv6. Forwarding on makes the node's own interfaces ignore router
      // advertisements (accept_ra 1): a node that takes its IPv6 default route from them needs
      // accept_ra 2 on its uplink (agent/README.md, "Egress and the node").
      await this.kernel.sysctl("net.ipv6.conf.all.forwarding", "1");
      await this.kernel.sysctl("net.ipv6.fwmark_reflect", "1");
    }
    const failed: string[] = [];
    for (const s of specs) {
      if (!this.done.has(s.port)) {
        try {
          await this.setUp(s);
          this.done.set(s.port, deviceKey(s));
        } catch (err) {
          failed.push(`${s.port}: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
      }
      this.ofports.set(s.number, ofports.get(s.port)!);
    }
    if (stale.length > 0 || changed.length > 0) {
      this.log.info("host ports set up", {
        ports: changed.map((s) => ({
          network: s.networkId,
          port: s.port,
          egress: s.egress,
          hostAccess: s.hostAccess,
          advertise: s.advertise,
        })),
        removed: stale,
        uplinks,
      });
    }
    // After the ports are up: the floating addresses are routed to them (floating_kernel.ts).
    await this.floating?.reconcile(specs.filter((s) => this.done.has(s.port)), uplinks, uplinks6);
    if (failed.length > 0) throw new Error(failed.join("; "));
  }

  /**
   * Leaves out the networks that would take the node's own place: a CIDR that overlaps a subnet of
   * the node's own addresses (on any interface but the host ports and lo), or, with hostAccess
   * or advertise (routed in the main table), one of the node's routes there, which it would shadow. The manager
   * lets only an admin turn the settings on; this is the node's last word against a mistake that
   * would cut it off its LAN. Logged; such a network gets no host port.
   */
  private async clearOfNode(specs: HostPortSpec[]): Promise<HostPortSpec[]> {
    if (specs.length === 0) return specs;
    const addrs = (await this.ipJson(["-4", "addr", "show"])).flatMap((l) =>
      ours(l.ifname) ? [] : (l.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`)
    );
    const routes = (await this.ipJson(["-4", "route", "show", "table", "main"]))
      .filter((r) => !ours(r.dev) && typeof r.dst === "string" && r.dst !== "default")
      .map((r) => String(r.dst));
    const clear: HostPortSpec[] = [];
    const v6Clash = await this.v6Clash(specs);
    for (const s of specs.map(v6Clash)) {
      // An IPv6-only network whose IPv6 side clashed (logged) has nothing left to put on the port.
      if (s.cidr === undefined && s.v6 === undefined) continue;
      const cidr = s.cidr;
      const clash = cidr === undefined
        ? undefined
        : [...addrs, ...(inMainTable(s) ? routes : [])].find((c) => overlaps(cidr, c));
      if (s.number > MAX_MARKED) {
        this.log.error("a network's node-local number is beyond the marks' bits: no host port", {
          network: s.networkId,
          number: s.number,
          hint: "widen MARK_MASK (agent/dataplane/host_nft.ts)",
        });
      } else if (clash === undefined) clear.push(s);
      else {
        this.log.error("a network's CIDR overlaps the node's own: no host port here", {
          network: s.networkId,
          cidr: s.cidr,
          node: clash,
          hint: "give the network a CIDR apart from the node's addresses and routes",
        });
      }
    }
    return clear;
  }

  /**
   * What takes a network's IPv6 side off its host port: an IPv6 subnet that overlaps the node's own
   * IPv6 addresses or (hostAccess, advertise) its main routes (link-local and multicast aside), as
   * clearOfNode does for IPv4. Logged; the IPv4 side stays.
   */
  private async v6Clash(specs: HostPortSpec[]): Promise<(s: HostPortSpec) => HostPortSpec> {
    if (!specs.some((s) => s.v6)) return (s) => s;
    const own = (text: string) => !text.startsWith("fe80:") && !text.startsWith("ff");
    const addrs = (await this.ipJson(["-6", "addr", "show"])).flatMap((l) =>
      ours(l.ifname) ? [] : (l.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`)
    ).filter(own);
    const routes = (await this.ipJson(["-6", "route", "show", "table", "main"]))
      .filter((r) => !ours(r.dev) && typeof r.dst === "string" && r.dst !== "default")
      .map((r) => String(r.dst)).filter(own);
    return (s) => {
      if (!s.v6) return s;
      const cidr = s.v6.cidr;
      const clash = [...addrs, ...(inMainTable(s) ? routes : [])].find((c) => overlaps(cidr, c));
      if (clash === undefined) return s;
      this.log.error("a network's IPv6 CIDR overlaps the node's own: no IPv6 on its host port", {
        network: s.networkId,
        cidr,
        node: clash,
        hint: "give the network an IPv6 CIDR apart from the node's addresses and routes",
      });
      return { ...s, v6: undefined };
    };
  }

  /** One host port's device, sysctls, address and routing. */
  private async setUp(s: HostPortSpec): Promise<void> {
    // IPv6 on the host port only for a dual-stack network's IPv6 gateway (the flows drop the rest
    // of IPv6 elsewhere); no router advertisements or redirects taken from pods either way.
    await this.kernel.sysctl(`net.ipv6.conf.${s.port}.disable_ipv6`, s.v6 ? "0" : "1");
    if (s.v6) {
      for (const name of ["accept_ra", "accept_redirects"]) {
        await this.kernel.sysctl(`net.ipv6.conf.${s.port}.${name}`, "0");
      }
    }
    // Reverse path checks of what pods send follow the mark (egress: the subnet is only in
    // the network's own table).
    await this.kernel.sysctl(`net.ipv4.conf.${s.port}.src_valid_mark`, "1");
    for (const [name, value] of PORT_SYSCTLS) {
      await this.kernel.sysctl(`net.ipv4.conf.${s.port}.${name}`, value);
    }
    // An address the port has already (an agent restarted) stays: its pods see no gap.
    const shown = await this.kernel.run(["ip", "-j", "addr", "show", "dev", s.port], {
      check: false,
    });
    const keep = shown.code === 0 && hasAddress(shown.stdout, s);
    const lines = [...linkCommands(s, keep), ...(ownTable(s) ? egressRouteCommands(s) : [])];
    await this.kernel.run(["ip", "-batch", "-"], { stdin: lines.join("\n") + "\n" });
    const lines6 = ownTable(s) ? egressRouteCommands(s, true) : [];
    if (lines6.length > 0) {
      await this.kernel.run(["ip", "-6", "-batch", "-"], { stdin: lines6.join("\n") + "\n" });
    }
  }

  /**
   * The interfaces egress leaves through: the agent's `egressInterfaces`, else those of the
   * node's default routes, else the one holding its underlay address (a node with no default
   * route reaches only its LAN). None: no egress at all (logged).
   */
  private async uplinks(specs: HostPortSpec[]): Promise<string[]> {
    if (!specs.some(ownTable)) return [];
    if (this.egressInterfaces?.length) return this.egressInterfaces;
    const routes = await this.ipJson(["-4", "route", "show", "default"]);
    const devs = routes.flatMap((r) => [r.dev, ...(r.nexthops ?? []).map((h) => h.dev)]);
    let found = [...new Set(devs.filter((d): d is string => typeof d === "string"))];
    if (found.length === 0 && this.underlayIp) {
      const addrs = await this.ipJson(["-4", "addr", "show", "to", this.underlayIp]);
      found = addrs.map((a) => a.ifname).filter((d): d is string => typeof d === "string");
    }
    if (found.length === 0) {
      this.log.warn("egress networks here, but the node has no uplink: no egress", {
        hint: "give the node a default route, or set egressInterfaces in the agent's config",
      });
    }
    return found;
  }

  /**
   * The interfaces IPv6 egress leaves through: the agent's `egressInterfaces`, else those of the
   * node's IPv6 default routes, else IPv4's (`uplinks`).
   */
  private async uplinks6(specs: HostPortSpec[], uplinks: string[]): Promise<string[]> {
    if (!specs.some((s) => s.v6 && ownTable(s))) return [];
    if (this.egressInterfaces?.length) return this.egressInterfaces;
    const routes = await this.ipJson(["-6", "route", "show", "default"]);
    const devs = routes.flatMap((r) => [r.dev, ...(r.nexthops ?? []).map((h) => h.dev)]);
    const found = [...new Set(devs.filter((d): d is string => typeof d === "string"))];
    return found.length > 0 ? found : uplinks;
  }

  private async ipJson(args: string[]): Promise<IpJson[]> {
    const r = await this.kernel.run(["ip", "-j", ...args], { check: false });
    try {
      const parsed = JSON.parse(r.stdout || "[]");
      return Array.isArray(parsed) ? parsed : [];
    } catch {
      return [];
    }
  }

  /**
   * Deletes every policy routing rule of network number `n` (none is fine), by its table, of IPv4
   * and IPv6.
   */
  private async deleteRules(n: number): Promise<void> {
    const table = String(tableOf(n));
    for (const family of [[], ["-6"]]) {
      for (let i = 0; i < 8; i++) {
        const r = await this.kernel.run(
          ["ip", ...family, "rule", "del", "pref", String(RULE_PRIORITY), "lookup", table],
          { check: false },
        );
        if (r.code !== 0) break;
      }
    }
  }
}

function portSpec(s: HostPortSpec): OvsPortSpec {
  return { name: s.port, type: "internal", externalIds: { [HOST_PORT_ID]: s.networkId } };
}
