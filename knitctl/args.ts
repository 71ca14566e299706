/**
 * The command line: `knitctl [global flags] <verb> <resource> [name] [flags]`. Every flag is
 * declared once, as data; a verb (and for create, a resource) lists the flags it takes, so a flag
 * given where it means nothing is an error rather than silently ignored.
 */
import { parseArgs } from "node:util";
import { UsageError } from "./errors.ts";

interface FlagSpec {
  type: "string" | "boolean";
  multiple?: boolean;
  short?: string;
  /** Placeholder of the value in help texts. */
  value?: string;
  help: string;
}

export const GLOBAL_FLAGS: Record<string, FlagSpec> = {
  server: { type: "string", value: "URL", help: "the manager (env KNITCTL_SERVER)" },
  token: { type: "string", value: "TOKEN", help: "bearer token (env KNITCTL_TOKEN)" },
  tenant: { type: "string", short: "t", value: "NAME", help: "tenant of tenant-scoped resources" },
  output: { type: "string", short: "o", value: "F", help: "table | wide | json" },
  config: { type: "string", value: "FILE", help: "config file (env KNITCTL_CONFIG)" },
  stack: { type: "string", value: "DIR", help: "a local stack's directory (env KNITCTL_STACK)" },
  help: { type: "boolean", short: "h", help: "this help" },
};

/** Flags of the verbs; which verb takes which is in VERB_FLAGS and the resources' create lists. */
export const VERB_FLAGS_SPEC: Record<string, FlagSpec> = {
  network: { type: "string", value: "NAME", help: "the network" },
  networks: {
    type: "string",
    multiple: true,
    value: "NAME,NAME",
    help: "the networks a router connects",
  },
  node: { type: "string", value: "NAME", help: "the node" },
  pod: { type: "string", value: "NS/NAME", help: "the pod" },
  cidr: { type: "string", value: "CIDR", help: "e.g. 10.1.0.0/24" },
  type: { type: "string", value: "T", help: "vxlan | vlan | flat" },
  gateway: { type: "string", value: "IP", help: "the gateway" },
  cidr6: { type: "string", value: "CIDR", help: "dual stack: the IPv6 subnet, e.g. fd00:1::/64" },
  gateway6: { type: "string", value: "IP", help: "dual stack: the IPv6 gateway" },
  pool: {
    type: "string",
    multiple: true,
    value: "START-END",
    help: "an allocation pool (repeatable)",
  },
  exclude: { type: "string", multiple: true, value: "A", help: "never handed out (repeatable)" },
  "floating-pool": { type: "string", value: "NAME", help: "the floating pool to take it from" },
  public: { type: "boolean", help: "every tenant may attach (admin)" },
  egress: {
    type: "boolean",
    help: "pods reach the outside through their node (source NAT; admin)",
  },
  "host-access": { type: "boolean", help: "the node reaches its pods (probes, hostPort; admin)" },
  "data-plane": {
    type: "string",
    value: "P",
    help: "ovs (default) | external: another plugin's interfaces with the knitter IPAM",
  },
  delegate: {
    type: "string",
    value: "D",
    help:
      "external: the plugin a pod's annotation gets, macvlan:MASTER[:MODE] | ipvlan:MASTER[:MODE] | host-device:DEV | sriov:PCI (admin)",
  },
  physnet: { type: "string", value: "NAME", help: "physical network (vlan, flat)" },
  "segment-id": { type: "string", value: "N", help: "VNI or VLAN ID" },
  mtu: { type: "string", value: "N", help: "MTU" },
  dscp: { type: "string", value: "N", help: "DSCP 0..63 of the pods' IP traffic, e.g. 46 (EF)" },
  route: { type: "string", multiple: true, value: "DST[,VIA]", help: "a route (repeatable)" },
  "dns-server": { type: "string", multiple: true, value: "IP", help: "a name server (repeatable)" },
  "dns-domain": { type: "string", value: "D", help: "DNS domain" },
  "dns-search": {
    type: "string",
    multiple: true,
    value: "D",
    help: "DNS search domain (repeatable)",
  },
  description: { type: "string", value: "TEXT", help: "free text" },
  "vlan-range": { type: "string", multiple: true, value: "A-B", help: "VLAN IDs (repeatable)" },
  size: { type: "string", value: "N", help: "number of addresses" },
  addresses: { type: "string", multiple: true, value: "IP,IP", help: "the addresses" },
  ip: { type: "string", value: "IP", help: "address (attach --bridge: with prefix)" },
  "ip-group": { type: "string", value: "NAME", help: "take the address from this IP group" },
  claim: {
    type: "string",
    value: "NAME",
    help: "bind it to this claim: its address and MAC (a second port: a migration's target)",
  },
  mac: { type: "string", value: "MAC", help: "MAC address" },
  rule: {
    type: "string",
    multiple: true,
    value: "DIR:PROTO[:PORTS][:PEER]",
    help: "a security group rule, e.g. ingress:tcp:80:group=web (repeatable)",
  },
  "security-group": {
    type: "string",
    multiple: true,
    value: "NAME,NAME",
    help: "security groups (of ports; of a network: its ports' default)",
  },
  source: {
    type: "string",
    multiple: true,
    value: "NET/PORT",
    help: "a port whose traffic a mirror copies (repeatable)",
  },
  collector: {
    type: "string",
    value: "NET/PORT|gre:IP|erspan:IP[:SESSION]|vxlan:IP:VNI",
    help: "the port a mirror copies to, or an address over GRE, ERSPAN or VXLAN (admin)",
  },
  direction: { type: "string", value: "D", help: "in | out | both (default), the pod's view" },
  match: {
    type: "string",
    multiple: true,
    value: "PROTO[:PORTS][:CIDR]",
    help: "copy only what the pods send that matches (repeatable; with --direction out)",
  },
  vip: { type: "string", value: "IP", help: "a service's VIP (default: one from the pool)" },
  "service-port": {
    type: "string",
    multiple: true,
    value: "[tcp|udp:]PORT[:TARGET]",
    help: "a port of a service, e.g. tcp:80:8080 (repeatable)",
  },
  backend: {
    type: "string",
    multiple: true,
    value: "PORT,PORT",
    help: "a service's backend ports, by ID (repeatable)",
  },
  affinity: { type: "string", value: "A", help: "None (default) | ClientIP, a service's" },
  "ip-families": {
    type: "string",
    value: "F[,F]",
    help:
      "a service's VIP families, the first the primary: IPv4, IPv6 (default: the network's own)",
  },
  "ip-family-policy": {
    type: "string",
    value: "P",
    help: "SingleStack (default) | PreferDualStack | RequireDualStack, a service's",
  },
  selector: {
    type: "string",
    multiple: true,
    value: "K=V",
    help: "a service's ports by label: all pairs must match (repeatable)",
  },
  "underlay-ip": { type: "string", value: "IP", help: "the node's tunnel endpoint" },
  label: { type: "string", multiple: true, value: "K=V", help: "a label (repeatable)" },
  "agent-socket": {
    type: "string",
    value: "PATH",
    help: "the agent's socket (env KNITCTL_AGENT_SOCKET)",
  },
  netns: { type: "string", value: "NAME|PATH", help: "a network namespace" },
  pid: { type: "string", value: "PID", help: "the netns of a process" },
  ifname: { type: "string", value: "IF", help: "interface name in the netns" },
  bridge: { type: "string", value: "BR", help: "an OVS bridge (plain veth, no manager)" },
  vlan: { type: "string", value: "TAG", help: "VLAN access tag on --bridge" },
  "route-gw": { type: "string", multiple: true, value: "CIDR,GW", help: "route via a gateway" },
  "route-intf": { type: "string", multiple: true, value: "CIDR", help: "route via the interface" },
  src: { type: "string", value: "PORT|IP", help: "trace from this port or address" },
  dst: { type: "string", value: "IP", help: "trace to this address" },
  proto: { type: "string", value: "P", help: "tcp | udp | icmp (default icmp)" },
  dport: { type: "string", value: "N", help: "destination port (tcp, udp)" },
  "src-ip": { type: "string", value: "IP", help: "send from this address instead of the port's" },
  "src-mac": { type: "string", value: "MAC", help: "send from this MAC instead of the port's" },
  port: { type: "string", value: "ID", help: "the port's ID (knitctl get ports)" },
  packets: { type: "string", short: "c", value: "N", help: "stop after N packets (default 100)" },
  seconds: { type: "string", value: "S", help: "stop after S seconds (default 10)" },
  listen: {
    type: "string",
    value: "HOST:PORT",
    help: "flows collect: where flow records arrive, UDP (default 127.0.0.1:4739)",
  },
  filter: { type: "string", value: "BPF", help: "a tcpdump filter, e.g. 'tcp port 80'" },
  write: { type: "string", short: "w", value: "FILE", help: "the pcap file to write" },
  mirror: { type: "string", value: "NAME", help: "capture a mirror's copies (its collector side)" },
  offline: { type: "boolean", help: "from the manager's model and the flow compiler, no switch" },
  at: { type: "string", value: "TIME", help: "at this time (ISO 8601, or now)" },
  from: { type: "string", value: "TIME", help: "from this time on (ISO 8601)" },
  to: { type: "string", value: "TIME", help: "up to this time (ISO 8601, or now)" },
  "all-tenants": { type: "boolean", short: "A", help: "every tenant's (admin)" },
  "allow-tenant": {
    type: "string",
    multiple: true,
    value: "NAME",
    help: "a tenant the cluster's pods may belong to, '*' for all (repeatable)",
  },
  "allow-network": {
    type: "string",
    multiple: true,
    value: "TENANT/NAME",
    help: "another tenant's network the cluster may use (repeatable)",
  },
  advertise: {
    type: "string",
    value: "true|false",
    help:
      "advertised to the fabric by BGP (a router: every network it connects; admin turns it on)",
  },
  "allow-physnet": {
    type: "string",
    multiple: true,
    value: "NAME",
    help: "a physnet the cluster's nodes are attached to, '*' for all (repeatable)",
  },
};

const TARGET = ["agent-socket", "node", "netns", "pid", "pod", "ifname"];

/** Flags each verb takes besides the global ones; create's and update's depend on the resource. */
export const VERB_FLAGS: Record<string, string[]> = {
  get: ["network", "node", "pod"],
  create: [],
  delete: ["network"],
  update: [],
  usage: [],
  attach: [...TARGET, "network", "bridge", "vlan", "ip", "mac", "mtu", "route-gw", "route-intf"],
  detach: TARGET,
  flows: ["agent-socket", "node", "listen", "seconds"],
  trace: [
    ...["src", "dst", "proto", "dport", "src-ip", "src-mac", "offline", "agent-socket"],
    ...["node", "network", "ip", "mac"],
  ],
  verify: ["agent-socket"],
  capture: [
    ...["network", "port", "pod", "ifname", "packets", "seconds", "filter", "direction", "write"],
    ...["agent-socket", "node", "mirror"],
  ],
  history: ["at", "from", "to", "all-tenants"],
  activate: ["network"],
  bind: ["network", "port", "claim"],
  unbind: [],
  version: [],
  help: [],
};

export type FlagValues = Record<string, string | boolean | string[] | undefined>;

export interface CommandLine {
  verb?: string;
  /** Positionals after the verb: resource, name. */
  args: string[];
  flags: FlagValues;
  /** Flags given on the command line, by name, to check against the verb. */
  given: string[];
}

export function parseCommandLine(argv: string[]): CommandLine {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { ...GLOBAL_FLAGS, ...VERB_FLAGS_SPEC },
      allowPositionals: true,
      strict: true,
      tokens: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split("\n")[0]}: see "knitctl --help"`);
  }
  const given = [...new Set(parsed.tokens.flatMap((t) => t.kind === "option" ? [t.name] : []))];
  const [verb, ...args] = parsed.positionals;
  return { verb, args, flags: parsed.values as FlagValues, given };
}

/** Fails on a flag the verb does not take, naming the flags it does take. */
export function requireFlagsOf(
  line: CommandLine,
  allowed: string[],
  where: string,
): void {
  for (const name of line.given) {
    if (name in GLOBAL_FLAGS || allowed.includes(name)) continue;
    const takes = allowed.length ? allowed.map((f) => `--${f}`).join(", ") : "no flags of its own";
    throw new UsageError(`${where} does not take --${name} (it takes ${takes})`);
  }
}

export function str(flags: FlagValues, name: string): string | undefined {
  const v = flags[name];
  return typeof v === "string" ? v : undefined;
}

export function strs(flags: FlagValues, name: string): string[] | undefined {
  const v = flags[name];
  return Array.isArray(v) ? v : undefined;
}
