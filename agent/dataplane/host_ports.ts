/**
 * Host ports: the node's own interface on a network with egress or hostAccess (agent/README.md,
 * "Egress and the node"). One OVS internal port on br-int per such network with pods here, in the
 * node's netns, with the network's gateway MAC and its IPv4 gateway address, so the kernel owns the
 * gateway on the node's side; the flows (networks[].hostPort, agent/PIPELINE.md "Host port") keep
 * it to the network's local pods. Around it, what the agent owns in the kernel: the nftables table
 * of host_nft.ts, and for egress networks a routing table and a rule per network (replies by
 * conntrack mark). When the wanted set changes, the ports that are new or changed are set up
 * again (all of them after a heal or a restart), the nftables tables are rebuilt whole, and the
 * ports and rules of networks no longer wanted are removed.
 *
 * @module
 */
import { type Logger, type Port, run } from "@knitter/common";
import { formatCidr, networkOf, parseIpPrefix } from "@knitter/common/address";
import { gatewayMac } from "@knitter/wasm";
import type { Ovs, OvsPortSpec } from "./ovs.ts";
import {
  HOST_PORT_PREFIX,
  type HostNet,
  hostPortName,
  hostRuleset,
  markOf,
  RULE_PRIORITY,
} from "./host_nft.ts";

/** Marks the OVS ports that are host ports: the manager's network ID. */
export const HOST_PORT_ID = "knitter-host-port";

/** What one host port needs: HostNet, and the network's addresses. */
export interface HostPortSpec extends HostNet {
  networkId: string;
  /** The network's gateway MAC (the same as its flows answer with). */
  mac: string;
  /** The gateway's IPv4 address and the network's prefix length. */
  gateway: string;
  prefix: number;
  /** The network's CIDR (routed to the port). */
  cidr: string;
  mtu: number;
}

/**
 * The host ports the local ports' networks need: one per network whose port says egress or
 * hostAccess and that has an IPv4 gateway (the manager refuses the settings otherwise).
 */
export function hostPortSpecs(
  ports: { port: Port; number: number }[],
): HostPortSpec[] {
  const out = new Map<string, HostPortSpec>();
  for (const { port, number } of ports) {
    const egress = port.networkEgress === true;
    const hostAccess = port.networkHostAccess === true;
    if (!egress && !hostAccess) continue;
    if (out.has(port.networkId) || port.gateway === undefined || port.gateway.includes(":")) {
      continue;
    }
    const parsed = parseIpPrefix(port.address, "required");
    if ("error" in parsed || parsed.ip.family !== 4) continue;
    const prefix = parsed.prefix!;
    out.set(port.networkId, {
      number,
      port: hostPortName(number),
      egress,
      hostAccess,
      networkId: port.networkId,
      mac: gatewayMac(port.networkId),
      gateway: port.gateway,
      prefix,
      cidr: formatCidr(networkOf(parsed.ip, prefix)),
      mtu: port.mtu,
    });
  }
  return [...out.values()].sort((a, b) => a.number - b.number);
}

/**
 * The `ip -batch` lines that give a host port its MAC, MTU and address, and bring it up. An
 * address it has already (`keepAddress`: an agent restarted) stays: its pods' connections see no
 * gap.
 */
export function linkCommands(s: HostPortSpec, keepAddress = false): string[] {
  // Without hostAccess the subnet is routed only in the network's own table: two tenants' egress
  // networks may share a CIDR on one node.
  const noPrefix = s.hostAccess ? "" : " noprefixroute";
  return [
    `link set dev ${s.port} address ${s.mac} mtu ${s.mtu} up`,
    ...(keepAddress ? [] : [
      `addr flush dev ${s.port}`,
      `addr add ${s.gateway}/${s.prefix} dev ${s.port}${noPrefix}`,
    ]),
  ];
}

/**
 * Whether `ip -j addr show` of the port says it has the spec's address and nothing else of IPv4,
 * with the prefix route as the spec wants it (noprefixroute without hostAccess).
 */
export function hasAddress(shown: string, s: HostPortSpec): boolean {
  let links: { addr_info?: { family: string; local: string; prefixlen: number }[] }[];
  try {
    links = JSON.parse(shown);
  } catch {
    return false;
  }
  const v4 = (links[0]?.addr_info ?? []).filter((a) => a.family === "inet") as {
    local: string;
    prefixlen: number;
    noprefixroute?: boolean;
  }[];
  return v4.length === 1 && v4[0].local === s.gateway && v4[0].prefixlen === s.prefix &&
    (v4[0].noprefixroute === true) === !s.hostAccess;
}

/**
 * The routing of an egress network's replies: its subnet in a table chosen by its mark (the rule:
 * ruleArgs).
 */
export function egressRouteCommands(s: HostPortSpec): string[] {
  return [`route replace ${s.cidr} dev ${s.port} src ${s.gateway} table ${markOf(s.number)}`];
}

/** `ip rule` arguments of network number `n`'s rule (after add / del / show). */
export function ruleArgs(n: number): string[] {
  const mark = String(markOf(n));
  return ["pref", String(RULE_PRIORITY), "fwmark", mark, "lookup", mark];
}

/** What the host ports do in the node's kernel: commands (`run`) and sysctls (its seams). */
export interface KernelSeams {
  run: typeof run;
  /** Writes a sysctl of the agent's own netns (the node's): /proc/sys/net is per netns. */
  sysctl(path: string, value: string): Promise<void>;
}

const KERNEL: KernelSeams = {
  run,
  sysctl: (path, value) => Deno.writeTextFile(`/proc/sys/${path.replaceAll(".", "/")}`, value),
};

export class HostPorts {
  /** The wanted set last applied in full; "" makes the next reconcile apply everything again. */
  private applied = "";
  private ofports = new Map<number, number>();
  private names: string[] = [];
  /** Each host port's spec as its device was last set up: unchanged ones are left alone. */
  private done = new Map<string, string>();

  constructor(
    private readonly ovs: Ovs,
    private readonly bridge: string,
    private readonly log: Logger,
    private readonly kernel: KernelSeams = KERNEL,
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
   * answers the ofport of each network's host port (by network number). A failure is logged and
   * tried again at the next call; the ports that exist keep their flows meanwhile.
   */
  async reconcile(specs: HostPortSpec[]): Promise<Map<number, number>> {
    const key = JSON.stringify(specs);
    if (key === this.applied) return this.ofports;
    try {
      await this.apply(specs);
      this.applied = key;
    } catch (err) {
      this.log.error("cannot set up the node's host ports (egress, hostAccess)", {
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
    const changed = specs.filter((s) => this.done.get(s.port) !== JSON.stringify(s));
    // The rules of ports that go or no longer have egress (an egress port's stays: no gap).
    const numbers = new Set([
      ...stale.map((name) => Number(name.slice(HOST_PORT_PREFIX.length))),
      ...changed.filter((s) => !s.egress).map((s) => s.number),
    ]);
    for (const n of numbers) await this.deleteRules(n);
    // Before the ports go: the healer must not take their deletion for a loss.
    this.names = specs.map((s) => s.port);
    await this.ovs.delPorts(this.bridge, stale);
    const ofports = await this.ovs.addPorts(this.bridge, specs.map(portSpec));
    this.ofports = new Map(specs.map((s) => [s.number, ofports.get(s.port)!]));
    if (specs.length > 0) await this.kernel.sysctl("net.ipv4.ip_forward", "1");
    for (const s of changed) {
      // No IPv6 on the host port: egress and hostAccess are IPv4 (the flows drop the rest).
      await this.kernel.sysctl(`net.ipv6.conf.${s.port}.disable_ipv6`, "1");
      // Reverse path checks of what pods send follow the mark (egress: the subnet is only in
      // the network's own table).
      await this.kernel.sysctl(`net.ipv4.conf.${s.port}.src_valid_mark`, "1");
      const shown = await this.kernel.run(["ip", "-j", "addr", "show", "dev", s.port], {
        check: false,
      });
      const keep = shown.code === 0 && hasAddress(shown.stdout, s);
      const lines = [...linkCommands(s, keep), ...(s.egress ? egressRouteCommands(s) : [])];
      await this.kernel.run(["ip", "-batch", "-"], { stdin: lines.join("\n") + "\n" });
      if (s.egress) await this.ensureRule(s.number);
    }
    await this.kernel.run(["nft", "-f", "-"], { stdin: hostRuleset(specs) });
    this.done = new Map(specs.map((s) => [s.port, JSON.stringify(s)]));
    if (stale.length > 0 || changed.length > 0) {
      this.log.info("host ports set up", {
        ports: changed.map((s) => ({
          network: s.networkId,
          port: s.port,
          egress: s.egress,
          hostAccess: s.hostAccess,
        })),
        removed: stale,
      });
    }
  }

  /** Deletes every policy routing rule of network number `n` (none is fine). */
  private async deleteRules(n: number): Promise<void> {
    const match = ruleArgs(n).slice(0, 4);
    for (let i = 0; i < 8; i++) {
      const r = await this.kernel.run(["ip", "rule", "del", ...match], { check: false });
      if (r.code !== 0) return;
    }
  }

  /** Adds network number `n`'s rule unless it is there (the kernel refuses it twice). */
  private async ensureRule(n: number): Promise<void> {
    const added = await this.kernel.run(["ip", "rule", "add", ...ruleArgs(n)], { check: false });
    if (added.code === 0) return;
    const shown = await this.kernel.run(["ip", "-j", "rule", "show", ...ruleArgs(n).slice(0, 4)]);
    if (shown.stdout.includes(`"table":"${markOf(n)}"`)) return;
    throw new Error(`Cannot add the routing rule of host port ${hostPortName(n)}: ${added.stderr}`);
  }
}

function portSpec(s: HostPortSpec): OvsPortSpec {
  return { name: s.port, type: "internal", externalIds: { [HOST_PORT_ID]: s.networkId } };
}
