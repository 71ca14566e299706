/**
 * A small OpenFlow evaluator for `knitctl trace --offline`: it runs one packet through a set of
 * canonical flow lines (../agent/PIPELINE.md) the way Open vSwitch would, and answers the flows
 * it matched, table by table. It is written for the SUBSET of matches and actions this pipeline
 * uses, not for OpenFlow at large:
 *
 * - matches: the protocol keywords `ip`, `arp`, `icmp`, `ipv6`, `icmp6`; `in_port`, `tun_id`,
 *   `vlan_tci` (value/mask), `dl_vlan`, `dl_src`, `dl_dst` (value/mask), `nw_src`, `nw_dst`,
 *   `arp_spa`, `arp_tpa`, `arp_sha`, `arp_op`, `reg0`, `reg1`, `icmp_type`, `icmp_code`,
 *   `ipv6_src`, `ipv6_dst`, `nd_*`; and of the security groups: `ct_state`, `reg6`, `reg7`
 *   (value/mask), `tp_dst` (value/mask), `tcp6`, `udp6`, `conj_id`;
 * - conjunctive matches: the flows with `conjunction(id,k/n)` actions at one priority complete
 *   conjunction `id` when a flow of each of its n dimensions matches; the flow of `conj_id=id` is
 *   then the table's match (a plain flow of the same or a higher priority comes first, as both
 *   allow the same here);
 * - actions: `goto_table`, `resubmit(,N)`, `ct(table=N,…)` (the packet, the first of its
 *   connection, is then `+trk+new`), `ct(commit,…)`, `output`, `IN_PORT`, `drop`, `set_field`
 *   (registers, `tun_id`, `tun_dst`, `vlan_vid`, `arp_op`, the gateway's echo reply: `eth_src`,
 *   `ip_src`, `icmp_type`, a route's `eth_dst`, a network's `ip_dscp`, the slow path's reason in
 *   `reg5`, which also matches), `check_pkt_larger` (a traced packet is never larger), `push_vlan`, `pop_vlan`, `dec_ttl`, `move`, `CONTROLLER:65535` (the packet goes to
 *   the agent's slow path, and no further here)
 *   (applied only as far as the trace needs: the ARP and echo replies are reported, not
 *   rewritten); `nw_src` and `nw_dst` match an address or a prefix.
 *
 * - services (../agent/PIPELINE.md, "Services"): `tp_src`, `group:G` (the groups' lines, given
 *   to `evaluate`: the first packet of a connection could go to any bucket, so the walk names
 *   every candidate backend and follows the first: its `nat(dst=…)` rewrites the destination);
 *   a hairpin's `ct_zone`, `ct_nw_dst` or `ct_ipv6_dst` (the destination before that rewrite) and
 *   `ct(…,nat(src=…))`, which rewrites the source.
 *
 * Packets are IPv4 or IPv6 (TCP, UDP, ICMP or ICMPv6 echo requests, by the family of their
 * addresses) or ARP; neighbour discovery is never traced (`nd_*` matches never hold). A field it
 * does not know throws, so a pipeline that grows a new match cannot be evaluated wrongly in
 * silence.
 *
 * @module
 */

import { PUNT_ACTION, PUNT_REGISTER } from "./pipeline.ts";

/** One canonical flow line, taken apart. */
export interface ParsedFlow {
  /** The canonical line (`cookie=0x…,table=…,priority=…[,match],actions=…`). */
  line: string;
  cookie: string;
  table: number;
  priority: number;
  /** Match fields in line order; protocol keywords have the value "". */
  match: [string, string][];
  actions: string[];
}

/**
 * A packet as the trace builds it: IPv4 or IPv6 (TCP, UDP, ICMP: its addresses say which) or an
 * ARP request.
 */
export interface EvalPacket {
  proto: "tcp" | "udp" | "icmp" | "arp";
  inPort: number;
  tunId?: number;
  /** The 802.1Q tag it arrives with (physnet ingress of a VLAN network). */
  vlan?: number;
  dlSrc: string;
  dlDst: string;
  ipSrc: string;
  ipDst: string;
  dstPort?: number;
  srcPort?: number;
}

/** The flows a packet matched, in order; registers as the last one left them. */
export interface EvalResult {
  matched: ParsedFlow[];
  /** A service's select group the packet went through: its id, every bucket's backend. */
  balanced?: { group: number; candidates: string[] };
}

/** A select group as the walk follows it: per bucket, the backend it translates to, the table. */
interface Bucket {
  to: string;
  table: number;
}

/** The select groups among the compiler's lines (`group_id=…`), by id. */
export function flowGroups(lines: Iterable<string>): Map<number, Bucket[]> {
  const groups = new Map<number, Bucket[]>();
  for (const line of lines) {
    const id = /^group_id=(\d+),/.exec(line);
    if (!id) continue;
    // An IPv6 backend in brackets: `nat(dst=[fd00::3]:8080)`.
    const bucket = /ct\(commit,table=(\d+),[^)]*nat\(dst=([\d.]+:\d+|\[[\da-f:.]+\]:\d+)\)\)/g;
    const buckets = [...line.matchAll(bucket)].map((m) => ({ to: m[2], table: Number(m[1]) }));
    groups.set(Number(id[1]), buckets);
  }
  return groups;
}

/** A bucket's `ADDR:PORT` or `[ADDR6]:PORT`. */
function backendOf(to: string): { ip: string; port: number } {
  const at = to.lastIndexOf(":");
  return { ip: to.slice(0, at).replace(/^\[|\]$/g, ""), port: Number(to.slice(at + 1)) };
}

/** Splits a line at top-level commas (`ct(table=50,zone=…)` and `resubmit(,30)` keep theirs). */
export function parts(text: string): string[] {
  if (text === "") return [];
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out;
}

/** Takes a canonical line apart. */
export function parseFlowLine(line: string): ParsedFlow {
  const at = line.indexOf(",actions=");
  if (at < 0) throw new Error(`Cannot read flow "${line}": no actions`);
  const head = parts(line.slice(0, at));
  const actions = parts(line.slice(at + ",actions=".length));
  let cookie = "0x0000000000000000";
  let table = 0;
  let priority = 32768;
  const match: [string, string][] = [];
  for (const p of head) {
    const eq = p.indexOf("=");
    const key = eq < 0 ? p : p.slice(0, eq);
    const value = eq < 0 ? "" : p.slice(eq + 1);
    if (key === "cookie") cookie = value;
    else if (key === "table") table = Number(value);
    else if (key === "priority") priority = Number(value);
    else match.push([key, value]);
  }
  return { line, cookie, table, priority, match, actions };
}

/** Lines grouped by table, highest priority first (canonical lines never tie on a match). */
export function flowTables(lines: Iterable<string>): Map<number, ParsedFlow[]> {
  const tables = new Map<number, ParsedFlow[]>();
  for (const line of lines) {
    // A service's select group is not a flow (flowGroups reads them).
    if (line.startsWith("group_id=")) continue;
    const f = parseFlowLine(line);
    const list = tables.get(f.table) ?? [];
    list.push(f);
    tables.set(f.table, list);
  }
  for (const list of tables.values()) list.sort((a, b) => b.priority - a.priority);
  return tables;
}

interface State {
  p: EvalPacket;
  regs: Map<string, bigint>;
  /**
   * Set by a `ct(table=…)`: the packet is tracked. A traced packet is the first of its
   * connection, so it is always `+trk+new` (never `+est`, `+rel` or `+inv`).
   */
  tracked?: boolean;
  /** The zone of the last `ct(…)` (ct_zone). */
  zone?: number;
  /** The destination before a bucket's `nat(dst=…)` (ct_nw_dst: the connection's original one). */
  originalDst?: string;
  /** The conjunction being looked up (0: none), as Open vSwitch sets conj_id. */
  conjId: number;
}

/** Whether a `ct_state` value (`+new+trk`) holds for the first packet of a connection. */
function matchesCtState(s: State, value: string): boolean {
  const flags = value.match(/[+-][a-z]+/g) ?? [];
  return flags.every((f) => {
    const on = f[0] === "+";
    const holds = f.slice(1) === "trk" || f.slice(1) === "new" ? s.tracked === true : false;
    return holds === on;
  });
}

/** `v` against `value[/mask]` (numbers in decimal or 0x hex). */
function matchesMasked(value: string, v: bigint): boolean {
  const [want, mask] = value.split("/");
  const m = mask === undefined ? -1n : num(mask);
  return (v & m) === (num(want) & m);
}

/** An IPv4 address against `A` or `A/N`. */
function num(text: string): bigint {
  return BigInt(text);
}

function macNum(mac: string): bigint {
  return BigInt("0x" + mac.toLowerCase().split(":").join(""));
}

function matchesMac(value: string, actual: string): boolean {
  const [v, m] = value.split("/");
  const mask = m === undefined ? 0xffffffffffffn : macNum(m);
  return (macNum(v) & mask) === (macNum(actual) & mask);
}

function ipv4Num(text: string): number {
  return text.split(".").reduce((v, b) => v * 256 + Number(b), 0);
}

/** Whether IPv4 `ip` is `value`: an address, or `a.b.c.d/n` (a route's prefix). */
function inCidr(value: string, ip: string): boolean {
  const [base, bits] = value.split("/");
  if (bits === undefined) return base === ip;
  const size = 2 ** (32 - Number(bits));
  return Math.floor(ipv4Num(base) / size) === Math.floor(ipv4Num(ip) / size);
}

/** An IPv6 address as a number (RFC 4291 text: `::`, and a dotted IPv4 tail). */
export function ipv6Num(text: string): bigint {
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const groups = (part: string | undefined) =>
    (part ? part.split(":") : []).flatMap((g) =>
      g.includes(".") ? [ipv4Num(g) >>> 16, ipv4Num(g) & 0xffff] : [parseInt(g, 16)]
    );
  const h = groups(head);
  const t = groups(tail);
  const words = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill(0), ...t];
  return words.reduce((v, w) => (v << 16n) | BigInt(w), 0n);
}

/** Whether IPv6 `ip` is `value`: an address, or `x:x::/n` (a route's or a peer's prefix). */
function inCidr6(value: string, ip: string): boolean {
  const [base, bits] = value.split("/");
  const drop = 128n - BigInt(bits ?? 128);
  return ipv6Num(base) >> drop === ipv6Num(ip) >> drop;
}

function matchesField(s: State, key: string, value: string): boolean {
  const p = s.p;
  const isIp = p.proto !== "arp";
  // The family of an IP packet is its addresses'.
  const v6 = isIp && p.ipDst.includes(":");
  switch (key) {
    case "ip":
      return isIp && !v6;
    case "arp":
      return !isIp;
    case "tcp":
    case "udp":
    case "icmp":
      return !v6 && p.proto === key;
    case "ipv6":
      return v6;
    case "icmp6":
      return v6 && p.proto === "icmp";
    case "tcp6":
    case "udp6":
      return v6 && p.proto === key.slice(0, 3);
    case "ct_state":
      return matchesCtState(s, value);
    case "ct_zone":
      return s.zone === Number(value);
    case "ct_nw_dst":
    case "ct_ipv6_dst":
      return s.tracked === true && (s.originalDst ?? p.ipDst) === value;
    case "tp_dst":
      return p.dstPort !== undefined && matchesMasked(value, BigInt(p.dstPort));
    case "tp_src":
      return p.srcPort !== undefined && matchesMasked(value, BigInt(p.srcPort));
    case "in_port":
      return Number(value) === p.inPort;
    case "conj_id":
      return Number(value) === s.conjId;
    case "tun_id":
      return p.tunId !== undefined && num(value) === BigInt(p.tunId);
    case "vlan_tci": {
      const [v, m] = value.split("/");
      const tci = p.vlan === undefined ? 0n : 0x1000n | BigInt(p.vlan);
      const mask = m === undefined ? 0xffffn : num(m);
      return (tci & mask) === (num(v) & mask);
    }
    case "dl_vlan":
      return p.vlan !== undefined && Number(value) === p.vlan;
    case "dl_src":
      return matchesMac(value, p.dlSrc);
    case "dl_dst":
      return matchesMac(value, p.dlDst);
    case "nw_src":
      return isIp && !v6 && inCidr(value, p.ipSrc);
    case "nw_dst":
      return isIp && !v6 && inCidr(value, p.ipDst);
    case "arp_spa":
      return !isIp && value === p.ipSrc;
    case "arp_tpa":
      return !isIp && value === p.ipDst;
    case "arp_sha":
      return !isIp && matchesMac(value, p.dlSrc);
    case "arp_op":
      return !isIp && Number(value) === 1;
    case "reg0":
    case "reg1":
    case "reg6":
    case "reg7":
    case PUNT_REGISTER:
      return matchesMasked(value, s.regs.get(key) ?? 0n);
    case "icmp_type":
      // An ICMP packet of a trace is an echo request (ping): type 8, or 128 under icmp6.
      return p.proto === "icmp" && Number(value) === (v6 ? 128 : 8);
    case "icmp_code":
      return p.proto === "icmp" && Number(value) === 0;
    case "ipv6_src":
      return v6 && inCidr6(value, p.ipSrc);
    case "ipv6_dst":
      return v6 && inCidr6(value, p.ipDst);
    case "nd_sll":
    case "nd_tll":
    case "nd_target":
      // Only under neighbour discovery (icmp_type 135, 136), which a trace never sends.
      return false;
  }
  throw new Error(`The offline evaluator does not know the match field "${key}"`);
}

function matches(s: State, f: ParsedFlow): boolean {
  return f.match.every(([key, value]) => matchesField(s, key, value));
}

/** A flow's `conjunction(id,k/n)` actions as [id, k, n]; none for a plain flow. */
function conjunctions(f: ParsedFlow): [number, number, number][] {
  const out: [number, number, number][] = [];
  for (const a of f.actions) {
    const m = /^conjunction\((\d+),(\d+)\/(\d+)\)$/.exec(a);
    if (m) out.push([Number(m[1]), Number(m[2]), Number(m[3])]);
  }
  return out;
}

/**
 * The conjunction the packet completes at the highest priority above `floor`: the smallest id of
 * those whose every dimension has a matching flow at that priority; undefined when none does.
 */
function completed(s: State, flows: ParsedFlow[], floor: number): number | undefined {
  const byPriority = new Map<number, Map<number, { n: number; dims: Set<number> }>>();
  for (const f of flows) {
    if (f.priority <= floor) break;
    const conj = conjunctions(f);
    if (conj.length === 0 || !matches(s, f)) continue;
    const ids = byPriority.get(f.priority) ?? new Map();
    byPriority.set(f.priority, ids);
    for (const [id, k, n] of conj) {
      const c = ids.get(id) ?? { n, dims: new Set<number>() };
      c.dims.add(k);
      ids.set(id, c);
    }
  }
  for (const ids of byPriority.values()) {
    const done = [...ids].filter(([, c]) => c.dims.size === c.n).map(([id]) => id);
    if (done.length) return Math.min(...done);
  }
  return undefined;
}

/** The flow of a table the packet matches, conjunctive matches included. */
function lookup(s: State, flows: ParsedFlow[]): ParsedFlow | undefined {
  const plain = (f: ParsedFlow) => conjunctions(f).length === 0 && matches(s, f);
  const hard = flows.find(plain);
  const id = completed(s, flows, hard?.priority ?? -1);
  if (id === undefined) return hard;
  s.conjId = id;
  const f = flows.find((x) => x.match.some(([k]) => k === "conj_id") && plain(x));
  s.conjId = 0;
  return f ?? hard;
}

/** The next table of a flow's actions, or undefined when the packet leaves the pipeline there. */
function apply(s: State, f: ParsedFlow, balance: (group: number) => number | undefined) {
  let next: number | undefined;
  for (const a of f.actions) {
    if (a.startsWith("goto_table:")) next = Number(a.slice("goto_table:".length));
    else if (a.startsWith("group:")) next = balance(Number(a.slice("group:".length)));
    else if (a.startsWith("resubmit(,")) next = Number(a.slice("resubmit(,".length, -1));
    else if (a.startsWith("ct(")) {
      // ct(table=N,zone=…) tracks the packet and goes on in table N; ct(commit,…) goes on here.
      const table = /table=(\d+)/.exec(a);
      if (table) {
        s.tracked = true;
        s.zone = Number(/zone=(\d+)/.exec(a)?.[1] ?? 0);
        next = Number(table[1]);
      }
      // A hairpin's source NAT (to the VIP): FORWARD's flows after it see the new source.
      const snat = /nat\(src=\[?([\da-f:.]+)\]?\)/.exec(a);
      if (snat) s.p.ipSrc = snat[1];
    } else if (a.startsWith("set_field:")) {
      const [value, field] = a.slice("set_field:".length).split("->");
      if (["reg0", "reg1", "reg6", "reg7"].includes(field)) s.regs.set(field, num(value));
      else if (field === "vlan_vid") s.p.vlan = Number(value) - 4096;
      else if (field === "tun_id") s.p.tunId = Number(value);
      // A route's rewrite: the destination MAC decides FORWARD's flow after it.
      else if (field === "eth_dst") s.p.dlDst = value;
      // ip_dscp (a network's marking): no flow of the pipeline matches on it.
      else if (
        ![
          ...["xreg1", "tun_dst", "arp_op", "eth_src", "ip_src", "icmp_type", "ip_dscp"],
          PUNT_REGISTER,
          // The gateway's ICMPv6 echo reply, reported, not rewritten.
          ...["ipv6_src", "icmpv6_type"],
        ].includes(field)
      ) {
        throw new Error(`The offline evaluator does not know set_field to "${field}"`);
      }
    } else if (a === "pop_vlan") s.p.vlan = undefined;
    else if (
      !(a.startsWith("output:") || a.startsWith("push_vlan:") || a.startsWith("move:") ||
        a === "IN_PORT" || a === "drop" || a === "dec_ttl" || a === PUNT_ACTION ||
        // A traced packet is never larger than an MTU: the bit stays 0.
        a.startsWith("check_pkt_larger(") ||
        a.startsWith("sample(") ||
        a.startsWith("clone("))
    ) {
      throw new Error(`The offline evaluator does not know the action "${a}"`);
    }
  }
  return next;
}

/**
 * Runs `packet` through `tables` (flowTables) from table 0: the flows it matched, in order. A
 * table without a matching flow ends the walk (OpenFlow 1.3's table miss drops). `groups`
 * (flowGroups): the services' select groups a `group:G` action goes through.
 */
export function evaluate(
  tables: Map<number, ParsedFlow[]>,
  packet: EvalPacket,
  groups: Map<number, Bucket[]> = new Map(),
): EvalResult {
  const s: State = { p: { ...packet }, regs: new Map(), conjId: 0 };
  const result: EvalResult = { matched: [] };
  // The first bucket stands for all: which one the switch picks depends on its hash.
  const balance = (group: number) => {
    const buckets = groups.get(group) ?? [];
    result.balanced = { group, candidates: buckets.map((b) => b.to) };
    if (buckets.length === 0) return undefined;
    const { ip, port } = backendOf(buckets[0].to);
    s.originalDst = s.p.ipDst;
    s.p.ipDst = ip;
    s.p.dstPort = port;
    return buckets[0].table;
  };
  let table: number | undefined = 0;
  while (table !== undefined && result.matched.length < 64) {
    const f = lookup(s, tables.get(table) ?? []);
    if (!f) break;
    result.matched.push(f);
    table = apply(s, f, balance);
  }
  return result;
}
