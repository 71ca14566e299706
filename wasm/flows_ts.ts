/**
 * The OpenFlow rule compiler in plain TypeScript: the twin of the WASM engine (assembly/), kept as
 * the benchmark yardstick and the second opinion of the tests (same lines, same errors). Both read
 * the pipeline from pipeline.ts and the input model and its checks from flow_input.ts. See
 * ../agent/PIPELINE.md for the pipeline itself.
 *
 * @module
 */

import { checkShape, ERR, flowError, type FlowInput, KIND, NETWORK_TYPES } from "./flow_input.ts";
import {
  ARP_REPLY_ACTIONS,
  DSCP_MARK,
  FLOW_KINDS,
  FLOW_TABLES,
  type FlowKind,
  GATEWAY_PING,
  MATCH,
  ND_REPLY_ACTIONS,
  PRIORITY,
  TABLE,
} from "./pipeline.ts";

// ---------------------------------------------------------------------------------------------
// Address syntax. Each parser returns -1 (or false) for anything that is not the strict form;
// assembly/address.ts has the same rules line for line.

function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/** `xx:xx:xx:xx:xx:xx` (either case) as a 48-bit number; -1 unless unicast and not zero. */
function parseMac(s: string): number {
  if (s.length !== 17) return -1;
  let v = 0;
  for (let i = 0; i < 6; i++) {
    const h = hexDigit(s.charCodeAt(i * 3));
    const l = hexDigit(s.charCodeAt(i * 3 + 1));
    if (h < 0 || l < 0) return -1;
    if (i < 5 && s.charCodeAt(i * 3 + 2) !== 58) return -1;
    v = v * 256 + h * 16 + l;
  }
  // The group bit (multicast) is the low bit of the first octet.
  if (v === 0 || Math.floor(v / 2 ** 40) & 1) return -1;
  return v;
}

/** Dotted quad without leading zeros as a u32; -1 when malformed. */
function parseIpv4(s: string, from = 0): number {
  let v = 0;
  let parts = 0;
  let cur = 0;
  let digits = 0;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits > 0 && cur === 0) return -1;
      cur = cur * 10 + c - 48;
      if (++digits > 3) return -1;
    } else if (c === 46) {
      if (digits === 0 || cur > 255 || parts === 3) return -1;
      v = v * 256 + cur;
      parts++;
      cur = 0;
      digits = 0;
    } else {
      return -1;
    }
  }
  if (digits === 0 || cur > 255 || parts !== 3) return -1;
  return v * 256 + cur;
}

/** Whether a u32 IPv4 can be a host's address: not 0/8, 127/8, multicast or 240/4. */
function unicastIpv4(v: number): boolean {
  const first = v >>> 24;
  return first !== 0 && first !== 127 && first < 224;
}

/** Parses RFC 4291 text (with `::` and an IPv4 tail) into 8 words; false when malformed. */
function parseIpv6(s: string, words: Uint16Array): boolean {
  const len = s.length;
  let n = 0;
  let gap = -1;
  let i = 0;
  if (len >= 2 && s.charCodeAt(0) === 58 && s.charCodeAt(1) === 58) {
    gap = 0;
    i = 2;
  }
  while (i < len) {
    const start = i;
    let v = 0;
    let digits = 0;
    for (; i < len && digits < 5; i++) {
      const d = hexDigit(s.charCodeAt(i));
      if (d < 0) break;
      v = v * 16 + d;
      digits++;
    }
    if (i < len && s.charCodeAt(i) === 46) {
      // An IPv4 tail fills the last two words; nothing may follow it.
      if (n > 6) return false;
      const v4 = parseIpv4(s, start);
      if (v4 < 0) return false;
      words[n++] = v4 >>> 16;
      words[n++] = v4 & 0xffff;
      i = len;
      break;
    }
    if (digits === 0 || digits > 4 || n === 8) return false;
    words[n++] = v;
    if (i === len) break;
    if (s.charCodeAt(i) !== 58) return false;
    i++;
    if (i < len && s.charCodeAt(i) === 58) {
      if (gap >= 0) return false;
      gap = n;
      i++;
    } else if (i === len) {
      return false;
    }
  }
  if (gap < 0) return n === 8;
  // `::` stands for at least one zero word.
  if (n === 8) return false;
  const tail = n - gap;
  for (let k = 1; k <= tail; k++) words[8 - k] = words[n - k];
  for (let k = gap; k < 8 - tail; k++) words[k] = 0;
  return true;
}

/** Whether an address can be a port's: not ::, ::1, multicast or IPv4-mapped. */
function unicastIpv6(w: Uint16Array): boolean {
  if (w[0] >>> 8 === 0xff) return false;
  if (w[0] | w[1] | w[2] | w[3] | w[4]) return true;
  if (w[5] === 0xffff) return false;
  return (w[5] | w[6]) !== 0 || w[7] > 1;
}

/** The text OVS prints (glibc inet_ntop): longest run of ≥ 2 zero words as `::`. */
function formatIpv6(w: Uint16Array): string {
  let bestBase = -1;
  let bestLen = 0;
  let curBase = -1;
  let curLen = 0;
  for (let i = 0; i < 8; i++) {
    if (w[i] === 0) {
      if (curBase < 0) {
        curBase = i;
        curLen = 1;
      } else {
        curLen++;
      }
    } else if (curBase >= 0) {
      if (bestBase < 0 || curLen > bestLen) {
        bestBase = curBase;
        bestLen = curLen;
      }
      curBase = -1;
    }
  }
  if (curBase >= 0 && (bestBase < 0 || curLen > bestLen)) {
    bestBase = curBase;
    bestLen = curLen;
  }
  if (bestBase >= 0 && bestLen < 2) bestBase = -1;
  let out = "";
  for (let i = 0; i < 8; i++) {
    if (bestBase >= 0 && i >= bestBase && i < bestBase + bestLen) {
      if (i === bestBase) out += ":";
      continue;
    }
    if (i !== 0) out += ":";
    if (i === 6 && bestBase === 0 && (bestLen === 6 || (bestLen === 5 && w[5] === 0xffff))) {
      return out + formatIpv4(w[6] * 65536 + w[7]);
    }
    out += w[i].toString(16);
  }
  if (bestBase >= 0 && bestBase + bestLen === 8) out += ":";
  return out;
}

function formatIpv4(v: number): string {
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

const HEX2 = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function formatMac(v: number): string {
  const hi = Math.floor(v / 2 ** 24);
  const lo = v % 2 ** 24;
  return `${HEX2[hi >>> 16]}:${HEX2[(hi >>> 8) & 255]}:${HEX2[hi & 255]}:${HEX2[lo >>> 16]}:${
    HEX2[(lo >>> 8) & 255]
  }:${HEX2[lo & 255]}`;
}

/**
 * The identity of a MAC for comparisons (a 48-bit number), or -1 when it is not a unicast MAC;
 * used by flow_conflicts.ts, with the same rules as the compilers.
 */
export function macKey(s: string): number {
  return parseMac(s);
}

/**
 * The identity of a port's IPv4 or IPv6 address for comparisons (its canonical text), or null
 * when it is not one the compilers accept; used by flow_conflicts.ts.
 */
export function addressKey(s: string): string | null {
  if (s.includes(":")) {
    const w = new Uint16Array(8);
    return parseIpv6(s, w) && unicastIpv6(w) ? formatIpv6(w) : null;
  }
  const v = parseIpv4(s);
  return v >= 0 && unicastIpv4(v) ? formatIpv4(v) : null;
}

/** Whether a tunnel endpoint is one the compilers accept (a unicast IPv4). */
export function nodeIpValid(s: string): boolean {
  const v = parseIpv4(s);
  return v >= 0 && unicastIpv4(v);
}

// ---------------------------------------------------------------------------------------------
// The compiler.

interface Net {
  index: number;
  id: number;
  type: number;
  segment: number;
  physnet: number;
  locals: Local[];
  remotes: Remote[];
  /** Distinct tunnel endpoints of the remote ports, ascending (vxlan only). */
  nodes: number[];
  /** The gateway's address (canonical text), MAC (lowercase text) and MAC as a number, if any. */
  gateway?: Gateway;
  /** A dual-stack network's IPv6 gateway, with the same MAC. */
  gateway6?: Gateway;
  /** The DSCP its pods' IP traffic is marked with, if any. */
  dscp?: number;
  /** Ofport of the network's host port (the node's interface on it), 0 for none. */
  hostPort: number;
}

/** A network's gateway: its address (canonical text), family, claim key and MAC. */
interface Gateway {
  ip: string;
  v6: boolean;
  /** The address's key among the network's addresses (a number for IPv4, the text for IPv6). */
  key: number | string;
  mac: string;
  macBits: number;
}

interface Local {
  /** Its network's number (reg0). */
  net: number;
  ofport: number;
  cookie: number;
  mac: string;
  /** The MAC as a 48-bit number: what its ARP replies stash in xreg1. */
  macBits: number;
  v4: string[];
  v6: string[];
}

interface Remote {
  mac: string;
  macBits: number;
  node: string;
  v4: string[];
}

/** Owner (see REMOTE_REF) of each MAC or address of one network. */
type Owners = Map<string | number, number>;

/** Local port i owns as i, remote port j as REMOTE_REF + j, network n's gateway as GATEWAY_REF + n. */
const REMOTE_REF = 2 ** 30;
const GATEWAY_REF = 2 ** 31;

function refKind(ref: number): number {
  return ref >= GATEWAY_REF ? KIND.NETWORK : ref >= REMOTE_REF ? KIND.REMOTE : KIND.LOCAL;
}

function refIndex(ref: number): number {
  return ref >= GATEWAY_REF ? ref - GATEWAY_REF : ref >= REMOTE_REF ? ref - REMOTE_REF : ref;
}

/** A network's gateway, parsed; `bad` and `badMac` make the errors to throw. */
function gateway(ip: string, mac: string, bad: () => Error, badMac: () => Error): Gateway {
  let key: number | string;
  let text: string;
  const v6 = ip.includes(":");
  if (v6) {
    const w = new Uint16Array(8);
    if (!parseIpv6(ip, w) || !unicastIpv6(w)) throw bad();
    key = text = formatIpv6(w);
  } else {
    const v = parseIpv4(ip);
    if (v < 0 || !unicastIpv4(v)) throw bad();
    key = v;
    text = formatIpv4(v);
  }
  const macBits = parseMac(mac);
  if (macBits < 0) throw badMac();
  return { ip: text, v6, key, mac: formatMac(macBits), macBits };
}

/** A route, parsed (FlowRoute); `hop` is the static route's next hop, null while it has none. */
interface Route {
  from: Net;
  to: Net;
  /** `nw_dst=…` / `nw_src=…` value: the CIDR as OVS prints it (no /32; "" for /0). */
  cidr: string;
  prefix: number;
  static: boolean;
  hop: { mac: string; local?: Local } | null;
}

/** `a.b.c.d/n` without host bits, as the text OVS prints ("" for /0, no "/32"); null if not. */
function parseCidr4(s: string): { text: string; prefix: number } | null {
  const slash = s.indexOf("/");
  if (slash < 0) return null;
  const base = parseIpv4(s.slice(0, slash));
  const digits = s.slice(slash + 1);
  if (base < 0 || !/^(0|[1-9][0-9]?)$/.test(digits)) return null;
  const prefix = Number(digits);
  if (prefix > 32) return null;
  // Host bits: the low 32 - prefix bits of the base.
  if (prefix < 32 && base % 2 ** (32 - prefix) !== 0) return null;
  const text = prefix === 0
    ? ""
    : prefix === 32
    ? formatIpv4(base)
    : `${formatIpv4(base)}/${prefix}`;
  return { text, prefix };
}

interface Model {
  nets: Net[];
  routes: Route[];
}

/** Parsed, checked model; throws flowError on the first failed check, in input order. */
function model(input: FlowInput): Model {
  const nets: Net[] = [];
  const byId = new Map<number, Net>();
  const vnis = new Map<number, number>();
  const segments = new Map<number, number>();
  const physnets = new Map<number, number>();
  const err = (code: number, kind: number, i: number, sub = 0, ok = 0, oi = 0) =>
    flowError(input, code, kind, i, sub, ok, oi);
  for (let i = 0; i < input.networks.length; i++) {
    const n = input.networks[i];
    const type = NETWORK_TYPES.indexOf(n.type);
    const net: Net = {
      index: i,
      id: n.id,
      type,
      segment: n.segmentId ?? 0,
      physnet: n.physnetPort ?? 0,
      locals: [],
      remotes: [],
      nodes: [],
      dscp: n.dscp,
      hostPort: n.hostPort ?? 0,
    };
    const dup = byId.get(n.id);
    if (dup) throw err(ERR.DUP_NETWORK, KIND.NETWORK, i, 0, KIND.NETWORK, dup.index);
    byId.set(n.id, net);
    if (type === 0) {
      const other = vnis.get(net.segment);
      if (other !== undefined) throw err(ERR.DUP_VNI, KIND.NETWORK, i, 0, KIND.NETWORK, other);
      vnis.set(net.segment, i);
    } else {
      if (net.physnet === input.tunnelPort) throw err(ERR.PHYSNET_IS_TUNNEL, KIND.NETWORK, i);
      // VLAN 0 stands for the untagged traffic of a flat network.
      const key = net.physnet * 4096 + net.segment;
      const other = segments.get(key);
      if (other !== undefined) {
        throw err(ERR.DUP_SEGMENT, KIND.NETWORK, i, 0, KIND.NETWORK, other);
      }
      segments.set(key, i);
      if (!physnets.has(net.physnet)) physnets.set(net.physnet, i);
    }
    if (n.gateway !== undefined) {
      net.gateway = gateway(
        n.gateway,
        n.gatewayMac!,
        () => err(ERR.BAD_GATEWAY, KIND.NETWORK, i),
        () => err(ERR.BAD_GATEWAY_MAC, KIND.NETWORK, i),
      );
    }
    if (n.gateway6 !== undefined) {
      const bad = () => err(ERR.BAD_GATEWAY6, KIND.NETWORK, i);
      net.gateway6 = gateway(n.gateway6, n.gatewayMac!, bad, bad);
      if (!net.gateway6.v6) throw bad();
    }
    nets.push(net);
  }

  const ofports = new Map<number, number>();
  const cookies = new Map<number, number>();
  const locals: Local[] = [];
  // Per network: owners of MACs (number keys) and of IPs (u32 number or IPv6 text keys).
  const macs: Owners[] = nets.map(() => new Map());
  const ips: Owners[] = nets.map(() => new Map());
  const words = new Uint16Array(8);
  // The gateway's address and MAC are the network's: no port may claim them.
  for (const net of nets) {
    for (const gw of [net.gateway, net.gateway6]) {
      if (!gw) continue;
      ips[net.index].set(gw.key, GATEWAY_REF + net.index);
      macs[net.index].set(gw.macBits, GATEWAY_REF + net.index);
    }
  }

  /** Parses and claims port `ref`'s addresses; v6 is null for remote ports (unused). */
  const addresses = (
    kind: number,
    i: number,
    ref: number,
    net: Net,
    list: string[],
    v4: string[],
    v6: string[] | null,
  ) => {
    const owners = ips[net.index];
    for (let k = 0; k < list.length; k++) {
      const s = list[k];
      let key: string | number;
      let text: string;
      let four: boolean;
      if (s.includes(":")) {
        if (!parseIpv6(s, words) || !unicastIpv6(words)) throw err(ERR.BAD_IP, kind, i, k);
        text = formatIpv6(words);
        key = text;
        four = false;
      } else {
        const v = parseIpv4(s);
        if (v < 0 || !unicastIpv4(v)) throw err(ERR.BAD_IP, kind, i, k);
        text = formatIpv4(v);
        key = v;
        four = true;
      }
      const owner = owners.get(key);
      if (owner === ref) continue;
      if (owner !== undefined) {
        throw err(ERR.DUP_IP, kind, i, k, refKind(owner), refIndex(owner));
      }
      owners.set(key, ref);
      if (four) v4.push(text);
      else v6?.push(text);
    }
  };

  const claimMac = (kind: number, i: number, ref: number, net: Net, s: string): number => {
    const mac = parseMac(s);
    if (mac < 0) throw err(ERR.BAD_MAC, kind, i);
    const owner = macs[net.index].get(mac);
    if (owner !== undefined) throw err(ERR.DUP_MAC, kind, i, 0, refKind(owner), refIndex(owner));
    macs[net.index].set(mac, ref);
    return mac;
  };

  for (let i = 0; i < input.localPorts.length; i++) {
    const p = input.localPorts[i];
    const net = byId.get(p.network);
    if (!net) throw err(ERR.UNKNOWN_NETWORK, KIND.LOCAL, i);
    if (p.ofport === input.tunnelPort) throw err(ERR.OFPORT_IS_TUNNEL, KIND.LOCAL, i);
    const physnet = physnets.get(p.ofport);
    if (physnet !== undefined) {
      throw err(ERR.OFPORT_IS_PHYSNET, KIND.LOCAL, i, 0, KIND.NETWORK, physnet);
    }
    const sameOfport = ofports.get(p.ofport);
    if (sameOfport !== undefined) {
      throw err(ERR.DUP_OFPORT, KIND.LOCAL, i, 0, KIND.LOCAL, sameOfport);
    }
    ofports.set(p.ofport, i);
    const sameCookie = cookies.get(p.cookie);
    if (sameCookie !== undefined) {
      throw err(ERR.DUP_COOKIE, KIND.LOCAL, i, 0, KIND.LOCAL, sameCookie);
    }
    cookies.set(p.cookie, i);
    const mac = claimMac(KIND.LOCAL, i, i, net, p.mac);
    const local: Local = {
      net: net.id,
      ofport: p.ofport,
      cookie: p.cookie,
      mac: formatMac(mac),
      macBits: mac,
      v4: [],
      v6: [],
    };
    addresses(KIND.LOCAL, i, i, net, p.ips, local.v4, local.v6);
    net.locals.push(local);
    locals.push(local);
  }

  const remoteMacs: string[] = [];
  const nodeSets = nets.map(() => new Set<number>());
  for (let i = 0; i < input.remotePorts.length; i++) {
    const p = input.remotePorts[i];
    const net = byId.get(p.network);
    if (!net) throw err(ERR.UNKNOWN_NETWORK, KIND.REMOTE, i);
    const ref = REMOTE_REF + i;
    const mac = claimMac(KIND.REMOTE, i, ref, net, p.mac);
    const node = parseIpv4(p.nodeIp);
    if (node < 0 || !unicastIpv4(node)) throw err(ERR.BAD_NODE_IP, KIND.REMOTE, i);
    const remote: Remote = { mac: formatMac(mac), macBits: mac, node: formatIpv4(node), v4: [] };
    remoteMacs.push(remote.mac);
    addresses(KIND.REMOTE, i, ref, net, p.ips, remote.v4, null);
    net.remotes.push(remote);
    if (net.type === 0) nodeSets[net.index].add(node);
  }
  for (const net of nets) {
    net.locals.sort((a, b) => a.ofport - b.ofport);
    net.nodes = [...nodeSets[net.index]].sort((a, b) => a - b);
  }
  const routed = (id: number) => {
    const net = byId.get(id);
    return net?.gateway && !net.gateway.v6 ? net : undefined;
  };
  const routes = (input.routes ?? []).map((r, i): Route => {
    const from = routed(r.from);
    if (!from) throw err(ERR.ROUTE_NETWORK, KIND.ROUTE, i, 0);
    const to = routed(r.to);
    if (!to) throw err(ERR.ROUTE_NETWORK, KIND.ROUTE, i, 1);
    const cidr = parseCidr4(r.dst);
    if (!cidr) throw err(ERR.BAD_ROUTE_DST, KIND.ROUTE, i);
    const route = { from, to, cidr: cidr.text, prefix: cidr.prefix, static: false, hop: null };
    if (r.via === undefined) return route;
    const via = parseIpv4(r.via);
    if (via < 0 || !unicastIpv4(via)) throw err(ERR.BAD_ROUTE_VIA, KIND.ROUTE, i);
    // The port of `to` that has the address, if any (not the gateway: GATEWAY_REF).
    const owner = ips[to.index].get(via);
    const hop = owner === undefined || owner >= GATEWAY_REF
      ? null
      : owner >= REMOTE_REF
      ? { mac: remoteMacs[owner - REMOTE_REF] }
      : { mac: locals[owner].mac, local: locals[owner] };
    return { ...route, static: true, hop };
  });
  return { nets, routes };
}

const { MCAST, UNTAGGED, LINK_LOCAL, NO_LL } = MATCH;

function cookieHex(net: number, port: number): string {
  return net.toString(16).padStart(8, "0") + port.toString(16).padStart(8, "0");
}

const hex = (v: number) => `0x${v.toString(16)}`;

/** A canonical line of `kind` (table, priority); cookie = net << 32 | port, match "" for none. */
function flow(net: number, port: number, kind: FlowKind, match: string, actions: string): string {
  const head = `cookie=0x${cookieHex(net, port)},table=${kind.table},priority=${kind.priority}`;
  return match === "" ? `${head},actions=${actions}` : `${head},${match},actions=${actions}`;
}

const goto = (table: number) => `goto_table:${table}`;

// One builder per flow kind (the table of ../agent/PIPELINE.md). Each returns one line; the
// fields are in the order dump-flows prints them.

function classifyLocal(net: Net, p: Local): string {
  return flow(
    net.id,
    p.cookie,
    FLOW_KINDS.classifyLocal,
    `in_port=${p.ofport},${UNTAGGED}`,
    `set_field:${hex(net.id)}->reg0,set_field:${hex(p.cookie)}->reg1,${goto(TABLE.SPOOF)}`,
  );
}

function classifyTunnel(net: Net, tunnel: number): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.classifyTunnel,
    `tun_id=${hex(net.segment)},in_port=${tunnel},${UNTAGGED}`,
    `set_field:${hex(net.id)}->reg0,${goto(TABLE.FORWARD)}`,
  );
}

/**
 * ARP and IPv4 from the network's host port (the node): into the network, as from outside (reg1
 * 0), straight to FORWARD, so it reaches the local ports only (forwardLocal, floodIn).
 */
function classifyHost(net: Net, proto: "arp" | "ip"): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.classifyHost,
    `${proto},in_port=${net.hostPort}`,
    `set_field:${hex(net.id)}->reg0,${goto(TABLE.FORWARD)}`,
  );
}

function classifyPhysnet(net: Net): string {
  const load = `set_field:${hex(net.id)}->reg0,${goto(TABLE.FORWARD)}`;
  return net.type === 1
    ? flow(
      net.id,
      0,
      FLOW_KINDS.classifyPhysnet,
      `in_port=${net.physnet},dl_vlan=${net.segment}`,
      `pop_vlan,${load}`,
    )
    : flow(
      net.id,
      0,
      FLOW_KINDS.classifyPhysnet,
      `in_port=${net.physnet},${UNTAGGED}`,
      load,
    );
}

/** A SPOOF allowance: `proto` from the port with its MAC, then `match`. */
function spoof(
  kind: FlowKind,
  net: Net,
  p: Local,
  proto: string,
  match: string,
  actions = goto(TABLE.ARP),
): string {
  return flow(
    net.id,
    p.cookie,
    kind,
    `${proto},in_port=${p.ofport},dl_src=${p.mac},${match}`,
    actions,
  );
}

/** The actions of a SPOOF flow that lets IP through: the network's DSCP marking, then ARP. */
function spoofIpActions(net: Net): string {
  const mark = net.dscp === undefined ? "" : `${DSCP_MARK.BEFORE}${net.dscp}${DSCP_MARK.AFTER}`;
  return mark + goto(TABLE.ARP);
}

function spoofIpv4(net: Net, p: Local, ip: string): string {
  return spoof(FLOW_KINDS.spoofIpv4, net, p, "ip", `nw_src=${ip}`, spoofIpActions(net));
}

/** ARP from the port's own MAC and IPv4; 0.0.0.0 is an ARP probe (RFC 5227). */
function spoofArp(net: Net, p: Local, ip: string): string {
  return spoof(FLOW_KINDS.spoofArp, net, p, "arp", `arp_spa=${ip},arp_sha=${p.mac}`);
}

/** IPv6 from the port's MAC and one of its addresses, or link-local (fe80::/10). */
function spoofIpv6(net: Net, p: Local, ip: string): string {
  return spoof(FLOW_KINDS.spoofIpv6, net, p, "ipv6", `ipv6_src=${ip}`, spoofIpActions(net));
}

/** Duplicate address detection: neighbour solicitations from ::. */
function spoofDad(net: Net, p: Local): string {
  const match = "ipv6_src=::,icmp_type=135,icmp_code=0";
  return spoof(FLOW_KINDS.spoofDad, net, p, "icmp6", match, spoofIpActions(net));
}

/** An ARP-table flow for traffic of port p only (reg1 = its cookie). */
function ownPort(kind: FlowKind, net: Net, p: Local, proto: string, match: string): string {
  return flow(
    net.id,
    p.cookie,
    kind,
    `${proto},reg0=${hex(net.id)},reg1=${hex(p.cookie)},${match}`,
    goto(TABLE.FORWARD),
  );
}

/** The owner's own requests for its address (gratuitous ARP, probes) are not answered. */
function arpOwner(net: Net, p: Local, ip: string): string {
  return ownPort(FLOW_KINDS.arpOwner, net, p, "arp", `arp_tpa=${ip},arp_op=1`);
}

/**
 * A request for `ip`: stashes the answering MAC (`macBits`) in xreg1 for arpReplyShared. Only the
 * MAC differs from one reply to the next, so the other 8 actions are one flow, not one per address
 * (a fifth less flow text for replace-flows to read; see ../agent/PIPELINE.md).
 */
function arpReply(net: Net, port: number, macBits: number, ip: string): string {
  return flow(
    net.id,
    port,
    FLOW_KINDS.arpReply,
    `arp,reg0=${hex(net.id)},arp_tpa=${ip},arp_op=1`,
    `set_field:${hex(macBits)}->xreg1,${goto(TABLE.ARP_REPLY)}`,
  );
}

/** The shared ARP reply; `arp` is the prerequisite of set_field on arp_op. */
function arpReplyShared(): string {
  return flow(0, 0, FLOW_KINDS.arpReplyShared, "arp", ARP_REPLY_ACTIONS);
}

/** Neighbour solicitation carrying the port's MAC, or none (`sll` 00:…). */
function ndSolicit(net: Net, p: Local, sll: string): string {
  return ownPort(FLOW_KINDS.ndSolicit, net, p, "icmp6", `icmp_type=135,icmp_code=0,nd_sll=${sll}`);
}

/** Neighbour advertisement of one of the port's addresses (or link-local) for its MAC or none. */
function ndAdvert(net: Net, p: Local, target: string, tll: string): string {
  return ownPort(
    FLOW_KINDS.ndAdvert,
    net,
    p,
    "icmp6",
    `icmp_type=136,icmp_code=0,nd_target=${target},nd_tll=${tll}`,
  );
}

/** Drops the solicitations (135) or advertisements (136) that no ndSolicit/ndAdvert allowed. */
function ndGuard(net: Net, type: number): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.ndGuard,
    `icmp6,reg0=${hex(net.id)},icmp_type=${type}`,
    "drop",
  );
}

/**
 * An ICMP echo request for the gateway's address from a local port (only they reach table ARP):
 * answered in place by the gateway (GATEWAY_PING).
 */
function gatewayPing(net: Net, gw: Gateway): string {
  const { BEFORE_MAC, BEFORE_IP, AFTER_IP, BEFORE_IP6, AFTER_IP6 } = GATEWAY_PING;
  return gw.v6
    ? flow(
      net.id,
      0,
      FLOW_KINDS.gatewayPing,
      `icmp6,reg0=${hex(net.id)},ipv6_dst=${gw.ip},icmp_type=128,icmp_code=0`,
      `${BEFORE_MAC}${gw.mac}${BEFORE_IP6}${gw.ip}${AFTER_IP6}`,
    )
    : flow(
      net.id,
      0,
      FLOW_KINDS.gatewayPing,
      `icmp,reg0=${hex(net.id)},nw_dst=${gw.ip},icmp_type=8,icmp_code=0`,
      `${BEFORE_MAC}${gw.mac}${BEFORE_IP}${gw.ip}${AFTER_IP}`,
    );
}

/**
 * A neighbour solicitation for an IPv6 gateway: the gateway MAC into xreg1 and the packet made an
 * advertisement (type 136), then the shared reply (ndReplyShared).
 */
function gatewayNd(net: Net, gw: Gateway): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.gatewayNd,
    `icmp6,reg0=${hex(net.id)},icmp_type=135,icmp_code=0,nd_target=${gw.ip}`,
    `set_field:${hex(gw.macBits)}->xreg1,set_field:136->icmpv6_type,${goto(TABLE.ARP_REPLY)}`,
  );
}

/** The shared neighbour advertisement (ND_REPLY_ACTIONS). */
function ndReplyShared(): string {
  return flow(0, 0, FLOW_KINDS.ndReplyShared, "icmp6,icmp_type=136,icmp_code=0", ND_REPLY_ACTIONS);
}

/** Anything else addressed to the gateway MAC (what no router routes): dropped. */
function gatewayDrop(net: Net, gw: Gateway): string {
  return flow(net.id, 0, FLOW_KINDS.gatewayDrop, `reg0=${hex(net.id)},dl_dst=${gw.mac}`, "drop");
}

/** What a local port sends to the gateway MAC of a network with a host port: to the node. */
function forwardHost(net: Net, gw: Gateway): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.forwardHost,
    `reg0=${hex(net.id)},dl_dst=${gw.mac}`,
    `output:${net.hostPort}`,
  );
}

/**
 * The gateway MAC from outside (reg1 0: the tunnel, the physnet, the host port itself) never
 * reaches the node: only the local pods use the host port.
 */
function hostGuard(net: Net, gw: Gateway): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.hostGuard,
    `reg0=${hex(net.id)},reg1=0,dl_dst=${gw.mac}`,
    "drop",
  );
}

/** IPv4 to the gateway MAC that no route takes: on to FORWARD, where forwardHost sends it. */
function hostExit(net: Net): string {
  return flow(net.id, 0, FLOW_KINDS.hostExit, `ip,reg0=${hex(net.id)}`, goto(TABLE.FORWARD));
}

// Routing (../agent/PIPELINE.md, "Routing").

/** IPv4 a local port of a routed network sent to its gateway MAC: to ROUTE. */
function routeIn(net: Net, gw: Gateway): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.routeIn,
    `ip,reg0=${hex(net.id)},dl_dst=${gw.mac}`,
    goto(TABLE.ROUTE),
  );
}

/** `,${field}=CIDR`, or nothing for /0 (OVS prints no match for a wildcard). */
const cidrMatch = (field: string, cidr: string) => cidr === "" ? "" : `,${field}=${cidr}`;

/**
 * One route: onto the destination network, from its gateway MAC, TTL decremented; to NEXT_HOP
 * for the destination's own port, or straight to the static route's next hop.
 */
function routeTo(r: Route): string {
  const kind = {
    table: FLOW_KINDS.routeTo.table,
    priority: FLOW_KINDS.routeTo.priority + 2 * r.prefix + (r.static ? 1 : 0),
  };
  const to = r.to;
  let actions = `set_field:${to.gateway!.mac}->eth_src,`;
  if (r.hop) actions += `set_field:${r.hop.mac}->eth_dst,`;
  actions += `set_field:${hex(to.id)}->reg0,dec_ttl,${
    goto(r.static ? TABLE.FORWARD : TABLE.NEXT_HOP)
  }`;
  return flow(
    r.from.id,
    0,
    kind,
    `ip,reg0=${hex(r.from.id)}${cidrMatch("nw_dst", r.cidr)}`,
    actions,
  );
}

/** Routed traffic for a port's address: its MAC as the destination. */
function nextHop(net: Net, port: number, mac: string, ip: string): string {
  return flow(
    net.id,
    port,
    FLOW_KINDS.nextHop,
    `ip,reg0=${hex(net.id)},nw_dst=${ip}`,
    `set_field:${mac}->eth_dst,${goto(TABLE.FORWARD)}`,
  );
}

/** A static route's next hop on this node may send from the route's destination (it routes it). */
function spoofRouted(r: Route, p: Local): string {
  return flow(
    p.net,
    p.cookie,
    FLOW_KINDS.spoofRouted,
    `ip,in_port=${p.ofport},dl_src=${p.mac}${cidrMatch("nw_src", r.cidr)}`,
    spoofIpActions(r.to),
  );
}

/** Every flow of the routes: into ROUTE, the routes, the next hops of connected networks. */
function routeFlows(lines: string[], routes: Route[]): void {
  const targets = new Set<Net>();
  for (const r of routes) {
    lines.push(routeIn(r.from, r.from.gateway!));
    if (r.static && !r.hop) continue;
    lines.push(routeTo(r));
    if (!r.static) targets.add(r.to);
    if (r.hop?.local) lines.push(spoofRouted(r, r.hop.local));
  }
  for (const net of targets) {
    for (const p of net.locals) {
      for (const ip of p.v4) lines.push(nextHop(net, p.cookie, p.mac, ip));
    }
    for (const p of net.remotes) for (const ip of p.v4) lines.push(nextHop(net, 0, p.mac, ip));
  }
}

function forwardLocal(net: Net, p: Local): string {
  return flow(
    net.id,
    p.cookie,
    FLOW_KINDS.forwardLocal,
    `reg0=${hex(net.id)},dl_dst=${p.mac}`,
    `output:${p.ofport}`,
  );
}

/** `output:P,` for every local port of the network, by ofport. */
function localOutputs(net: Net): string {
  let out = "";
  for (const p of net.locals) out += `output:${p.ofport},`;
  return out;
}

/** Actions that send one copy out of the network's physnet port (tagged for vlan). */
function toPhysnet(net: Net): string {
  return net.type === 1
    ? `push_vlan:0x8100,set_field:${4096 + net.segment}->vlan_vid,output:${net.physnet}`
    : `output:${net.physnet}`;
}

/** An action list without its trailing comma, or `drop` when empty. */
function actions(list: string): string {
  return list === "" ? "drop" : list.endsWith(",") ? list.slice(0, -1) : list;
}

/** Flooding of traffic from outside (reg1=0): to the local ports only. */
function floodIn(net: Net): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.floodIn,
    `reg0=${hex(net.id)},reg1=0,${MCAST}`,
    actions(localOutputs(net)),
  );
}

/** Anything else from outside: dropped, shadowing the flows below that send out. */
function fromOutside(net: Net): string {
  return flow(
    net.id,
    0,
    FLOW_KINDS.fromOutside,
    `reg0=${hex(net.id)},reg1=0`,
    "drop",
  );
}

function forwardRemote(net: Net, r: Remote, tunnel: number): string {
  const to = net.type === 0
    ? `set_field:${hex(net.segment)}->tun_id,set_field:${r.node}->tun_dst,output:${tunnel}`
    : toPhysnet(net);
  return flow(net.id, 0, FLOW_KINDS.forwardRemote, `reg0=${hex(net.id)},dl_dst=${r.mac}`, to);
}

/** Flooding of traffic from a local port: local ports, then every remote node or the physnet. */
function flood(net: Net, tunnel: number): string {
  let out = localOutputs(net);
  if (net.type !== 0) {
    out += toPhysnet(net);
  } else if (net.nodes.length > 0) {
    out += `set_field:${hex(net.segment)}->tun_id`;
    for (const node of net.nodes) out += `,set_field:${formatIpv4(node)}->tun_dst,output:${tunnel}`;
  }
  return flow(
    net.id,
    0,
    FLOW_KINDS.flood,
    `reg0=${hex(net.id)},${MCAST}`,
    actions(out),
  );
}

/** Unknown unicast from a local port of a vlan or flat network: to the physnet. */
function unknownUnicast(net: Net): string {
  return flow(net.id, 0, FLOW_KINDS.unknownUnicast, `reg0=${hex(net.id)}`, toPhysnet(net));
}

/** The fixed flows (cookie 0): the default of each table (FLOW_TABLES); ARP_REPLY's is the shared reply. */
function defaults(): string[] {
  return FLOW_TABLES.map((t) =>
    t.id === TABLE.ARP_REPLY
      ? arpReplyShared()
      : flow(0, 0, { table: t.id, priority: PRIORITY.DEFAULT }, "", t.default)
  );
}

// The builders run in the order their lines sort in (by table, then text) as far as it is known
// without looking at the addresses, as in assembly/builders.ts.

/** Every flow of one local port. */
function localFlows(lines: string[], net: Net, p: Local): void {
  lines.push(classifyLocal(net, p));
  if (p.v4.length > 0) lines.push(spoofArp(net, p, "0.0.0.0"));
  for (const ip of p.v4) lines.push(spoofArp(net, p, ip));
  if (p.v6.length > 0) lines.push(spoofDad(net, p));
  for (const ip of p.v4) lines.push(spoofIpv4(net, p, ip));
  const v6 = p.v6.length > 0 ? [...p.v6, LINK_LOCAL] : [];
  for (const ip of v6) lines.push(spoofIpv6(net, p, ip));
  for (const ip of p.v4) lines.push(arpReply(net, p.cookie, p.macBits, ip));
  for (const ip of p.v4) lines.push(arpOwner(net, p, ip));
  if (v6.length > 0) lines.push(ndSolicit(net, p, NO_LL), ndSolicit(net, p, p.mac));
  for (const ip of v6) lines.push(ndAdvert(net, p, ip, NO_LL), ndAdvert(net, p, ip, p.mac));
  lines.push(forwardLocal(net, p));
}

/** Every flow of one network, its remote ports and its local ports. */
function networkFlows(lines: string[], net: Net, tunnel: number): void {
  lines.push(net.type === 0 ? classifyTunnel(net, tunnel) : classifyPhysnet(net));
  if (net.hostPort !== 0) lines.push(classifyHost(net, "arp"), classifyHost(net, "ip"));
  for (const r of net.remotes) for (const ip of r.v4) lines.push(arpReply(net, 0, r.macBits, ip));
  const gw = net.gateway;
  // The gateway is answered like a port of the network (arpReply), and answers pings.
  if (gw && !gw.v6) lines.push(arpReply(net, 0, gw.macBits, gw.ip), gatewayPing(net, gw));
  if (gw?.v6) lines.push(gatewayPing(net, gw), gatewayNd(net, gw));
  const gw6 = net.gateway6;
  if (gw6) lines.push(gatewayPing(net, gw6), gatewayNd(net, gw6));
  lines.push(ndGuard(net, 135), ndGuard(net, 136));
  if (net.type !== 0) lines.push(unknownUnicast(net));
  // With a host port, what reaches the gateway MAC goes to the node: IPv4 through ROUTE (routes
  // first, hostExit below them), ARP replies and the rest straight.
  if (gw && net.hostPort !== 0) {
    lines.push(routeIn(net, gw), hostExit(net), forwardHost(net, gw), hostGuard(net, gw));
  } else if (gw) lines.push(gatewayDrop(net, gw));
  lines.push(flood(net, tunnel));
  for (const r of net.remotes) lines.push(forwardRemote(net, r, tunnel));
  lines.push(fromOutside(net), floodIn(net));
  for (const p of net.locals) localFlows(lines, net, p);
}

/**
 * Compiles the model into the complete rule set of br-int: canonical ovs-ofctl lines, sorted and
 * without duplicates. Same contract and output as `compileFlows` (WASM).
 */
export function compileFlowsTs(input: FlowInput): string[] {
  checkShape(input);
  const { nets, routes } = model(input);
  const lines = defaults();
  // The shared neighbour advertisement, when a network has an IPv6 gateway.
  if (nets.some((n) => n.gateway?.v6 || n.gateway6)) lines.push(ndReplyShared());
  const order = [...nets].sort((a, b) => a.id - b.id);
  for (const net of order) networkFlows(lines, net, input.tunnelPort);
  routeFlows(lines, routes);
  lines.sort();
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    if (n === 0 || lines[i] !== lines[n - 1]) lines[n++] = lines[i];
  }
  lines.length = n;
  return lines;
}

// The security group flows (acl_flows.ts) write the same lines with the same address syntax.
export { flow, formatIpv4, formatIpv6, parseIpv4, parseIpv6 };
