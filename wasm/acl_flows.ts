/**
 * The security group flows of br-int: hooks in FORWARD that send the IP traffic of ports with
 * groups through connection tracking (a zone per network, shared by the networks a router joins:
 * acl_zones.ts), and the EGRESS_ACL and INGRESS_ACL
 * tables that let through replies, known connections, neighbour discovery and what a rule allows.
 * A model without `acls` gets no line from here. This is the TypeScript twin of assembly/acl.ts,
 * which the WASM engine runs after its compile: the same checks in the same order, the same lines
 * (acl_flows_test.ts compares them on random models). See ../agent/PIPELINE.md, "Security groups".
 *
 * @module
 */
import type { FlowAcl, FlowAclRule } from "./acl_input.ts";
import { ACL_ERR, aclError, checkAclShape } from "./acl_input.ts";
import {
  ACL_KINDS,
  ACL_REG,
  ACL_STATE,
  ACL_TABLE,
  ACL_TABLES,
  ctZone,
  ND_TYPES,
} from "./acl_pipeline.ts";
import { aclZones } from "./acl_zones.ts";
import type { FlowInput, FlowLocalPort } from "./flow_input.ts";
import { flow, formatIpv4, formatIpv6, parseIpv4, parseIpv6 } from "./flows_ts.ts";
import { PRIORITY, TABLE } from "./pipeline.ts";

const hex = (v: number) => `0x${v.toString(16)}`;

/** A remote end as a match value: the address, or CIDR, as dump-flows prints it. */
interface Remote {
  v6: boolean;
  /** Empty: any address of the family (a /0). */
  text: string;
}

/**
 * A CIDR or address in the text dump-flows prints; throws (`err` with an ACL_ERR code) unless it
 * is one with no host bits.
 */
function remoteOf(text: string, err: (code: number) => Error): Remote {
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  const v6 = addr.includes(":");
  const bits = v6 ? 128 : 32;
  const prefixText = slash < 0 ? String(bits) : text.slice(slash + 1);
  const prefix = /^(0|[1-9][0-9]{0,2})$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > bits) throw err(ACL_ERR.BAD_REMOTE);
  let base: string;
  if (v6) {
    const w = new Uint16Array(8);
    if (!parseIpv6(addr, w)) throw err(ACL_ERR.BAD_REMOTE);
    for (let i = 0; i < 8; i++) {
      const keep = Math.max(0, Math.min(16, prefix - 16 * i));
      const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
      if ((w[i] & ~mask & 0xffff) !== 0) throw err(ACL_ERR.HOST_BITS);
    }
    base = formatIpv6(w);
  } else {
    const v = parseIpv4(addr);
    if (v < 0) throw err(ACL_ERR.BAD_REMOTE);
    if (v % 2 ** (32 - prefix) !== 0) throw err(ACL_ERR.HOST_BITS);
    base = formatIpv4(v);
  }
  if (prefix === 0) return { v6, text: "" };
  return { v6, text: prefix === bits ? base : `${base}/${prefix}` };
}

/** tp_dst matches that cover min..max exactly (prefix blocks); [""] for every port. */
function portMatches(min = 0, max = 65535): string[] {
  if (min === 0 && max === 65535) return [""];
  const out: string[] = [];
  for (let a = min; a <= max;) {
    let size = 1;
    while (a % (size * 2) === 0 && a + size * 2 - 1 <= max) size *= 2;
    out.push(
      size === 1 ? `,tp_dst=${a}` : `,tp_dst=${hex(a)}/${hex(0x10000 - size)}`,
    );
    a += size;
  }
  return out;
}

/** The protocol match of a rule in one family; null when the rule does not apply to it. */
function protocolMatch(protocol: FlowAclRule["protocol"], v6: boolean): string | null {
  switch (protocol) {
    case "tcp":
      return v6 ? "tcp6" : "tcp";
    case "udp":
      return v6 ? "udp6" : "udp";
    case "icmp":
      return v6 ? null : "icmp";
    case "icmpv6":
      return v6 ? "icmp6" : null;
    case "any":
      return v6 ? "ipv6" : "ip";
  }
}

/** A local port with groups: what its hooks and rules need. */
interface Guarded {
  port: FlowLocalPort;
  acl: FlowAcl;
  /** The conntrack zone of the port's network. */
  zone: number;
  v4: boolean;
  v6: boolean;
}

/** Parsed remotes by text: the members of a group recur in the rules of every port in it. */
type RemoteCache = Map<string, Remote>;

function remotesOf(
  rule: FlowAclRule,
  err: (code: number, j: number) => Error,
  cache: RemoteCache,
): (Remote | null)[] {
  if (rule.remote === undefined) return [null];
  return rule.remote.map((text, j) => {
    let r = cache.get(text);
    if (!r) cache.set(text, r = remoteOf(text, (code) => err(code, j)));
    return r;
  });
}

/** The rule flows of one port: one per family, remote and port block the rule allows. */
function ruleFlows(
  lines: string[],
  g: Guarded,
  rule: FlowAclRule,
  err: (code: number, j: number) => Error,
  cache: RemoteCache,
): void {
  const { port } = g;
  const remotes = remotesOf(rule, err, cache);
  const egress = rule.direction === "egress";
  const kind = egress ? ACL_KINDS.egressRule : ACL_KINDS.ingressRule;
  // Out: the port alone (reg1), as a route may have changed the network (reg0) already.
  const who = egress
    ? `reg1=${hex(port.cookie)}`
    : `reg0=${hex(port.network)},${ACL_REG.OUTPORT}=${hex(port.ofport)}`;
  const actions = egress
    ? `set_field:${hex(ACL_STATE.NEW_ALLOWED)}->${ACL_REG.STATE},resubmit(,${TABLE.FORWARD})`
    : `ct(commit,${ctZone(g.zone)}),output:${port.ofport}`;
  for (const v6 of [false, true]) {
    if (!(v6 ? g.v6 : g.v4)) continue;
    const proto = protocolMatch(rule.protocol, v6);
    if (proto === null) continue;
    const field = v6 ? (egress ? "ipv6_dst" : "ipv6_src") : (egress ? "nw_dst" : "nw_src");
    // One line made, then only the peer and port block change: cut it where they go.
    const line = flow(
      port.network,
      port.cookie,
      kind,
      `ct_state=+new+trk,${proto},${who}`,
      actions,
    );
    const cut = line.indexOf(",actions=");
    const [head, tail] = [line.slice(0, cut), line.slice(cut)];
    const blocks = portMatches(rule.portMin, rule.portMax);
    for (const remote of remotes) {
      if (remote !== null && remote.v6 !== v6) continue;
      const addr = remote === null || remote.text === "" ? "" : `,${field}=${remote.text}`;
      for (const tp of blocks) lines.push(head + addr + tp + tail);
    }
  }
}

/** The FORWARD hooks of one port: its IP out through EGRESS_ACL, to it through INGRESS_ACL. */
function hookFlows(lines: string[], g: Guarded): void {
  const { port } = g;
  const net = hex(port.network);
  const zone = ctZone(g.zone);
  for (const v6 of [false, true]) {
    if (!(v6 ? g.v6 : g.v4)) continue;
    const ip = v6 ? "ipv6" : "ip";
    lines.push(flow(
      port.network,
      port.cookie,
      ACL_KINDS.egressHook,
      // The port alone: a routed packet is in its destination's network (reg0) by now.
      `${ip},reg1=${hex(port.cookie)},${ACL_REG.STATE}=${ACL_STATE.UNTRACKED}`,
      `ct(table=${ACL_TABLE.EGRESS_ACL},${zone})`,
    ));
    lines.push(flow(
      port.network,
      port.cookie,
      ACL_KINDS.ingressHook,
      // 0 (untracked) or 2 (new, allowed out): not 1, a connection EGRESS_ACL found established.
      `${ip},reg0=${net},${ACL_REG.STATE}=0/0x1,dl_dst=${port.mac.toLowerCase()}`,
      `set_field:${
        hex(port.ofport)
      }->${ACL_REG.OUTPORT},ct(table=${ACL_TABLE.INGRESS_ACL},${zone})`,
    ));
  }
}

/**
 * A new connection allowed out, to a port without groups or another node: committed here, in the
 * network it is in now (routed or not), in the zone of the port that sent it.
 */
function commitFlow(network: number, zone: number, v6: boolean): string {
  return flow(
    network,
    0,
    ACL_KINDS.aclCommit,
    `${v6 ? "ipv6" : "ip"},reg0=${hex(network)},${ACL_REG.STATE}=${hex(ACL_STATE.NEW_ALLOWED)}`,
    `ct(commit,${ctZone(zone)}),set_field:${
      hex(ACL_STATE.DONE)
    }->${ACL_REG.STATE},resubmit(,${TABLE.FORWARD})`,
  );
}

/**
 * IPv4 from the node (the host port of `network`), not tracked yet: committed in the zone, so that
 * a pod's replies pass its egress rules as established, and marked done, so that the pod's ingress
 * rules do not apply (the node reaches its pods, as Kubernetes lets it: kubelet probes, hostPort).
 */
function hostCommitFlow(network: number, hostPort: number, zone: number): string {
  return flow(
    network,
    0,
    ACL_KINDS.hostCommit,
    `ip,${ACL_REG.STATE}=${ACL_STATE.UNTRACKED},in_port=${hostPort}`,
    `ct(commit,${ctZone(zone)}),set_field:${
      hex(ACL_STATE.DONE)
    }->${ACL_REG.STATE},resubmit(,${TABLE.FORWARD})`,
  );
}

/** The flows of both ACL tables that do not depend on a port: tracked traffic, ND, defaults. */
function sharedFlows(lines: string[]): void {
  const pass = {
    [ACL_TABLE.EGRESS_ACL]: `set_field:${
      hex(ACL_STATE.DONE)
    }->${ACL_REG.STATE},resubmit(,${TABLE.FORWARD})`,
    [ACL_TABLE.INGRESS_ACL]: `output:${ACL_REG.OUTPORT_FIELD}`,
  };
  const kinds = [ACL_KINDS.egressTracked, ACL_KINDS.ingressTracked];
  for (const kind of kinds) {
    const actions = pass[kind.table];
    lines.push(flow(0, 0, kind, "ct_state=+est+trk", actions));
    lines.push(flow(0, 0, kind, "ct_state=+rel+trk", actions));
    for (const t of ND_TYPES) lines.push(flow(0, 0, kind, `icmp6,icmp_type=${t}`, actions));
  }
  for (const t of ACL_TABLES) {
    lines.push(flow(0, 0, { table: t.id, priority: PRIORITY.DEFAULT }, "", t.default));
  }
}

/** The local ports the ACLs name, checked: each a local port, at most once. */
function guarded(input: FlowInput, acls: FlowAcl[], zones: Map<number, number>): Guarded[] {
  const byCookie = new Map(input.localPorts.map((p) => [p.cookie, p]));
  const seen = new Set<number>();
  return acls.map((acl, i) => {
    const port = byCookie.get(acl.cookie);
    if (!port) throw aclError(acls, ACL_ERR.UNKNOWN_COOKIE, i);
    if (seen.has(acl.cookie)) throw aclError(acls, ACL_ERR.DUP_COOKIE, i);
    seen.add(acl.cookie);
    const v6 = port.ips.some((ip) => ip.includes(":"));
    const zone = zones.get(port.network) ?? port.network;
    return { port, acl, zone, v6, v4: port.ips.some((ip) => !ip.includes(":")) };
  });
}

/**
 * The security group lines of a model (unsorted; the engines sort them with theirs). Throws on a
 * malformed `acls` section, naming the field.
 */
export function compileAclFlows(input: FlowInput): string[] {
  checkAclShape(input.acls);
  if (!input.acls || input.acls.length === 0) return [];
  const lines: string[] = [];
  sharedFlows(lines);
  const zones = aclZones(input);
  // The families sent out of ports with groups, by zone.
  const families = new Map<number, Set<boolean>>();
  const cache: RemoteCache = new Map();
  for (const [i, g] of guarded(input, input.acls, zones).entries()) {
    hookFlows(lines, g);
    g.acl.rules.forEach((rule, k) => {
      const err = (code: number, j: number) => aclError(input.acls!, code, i, k, j);
      ruleFlows(lines, g, rule, err, cache);
    });
    const set = families.get(g.zone) ?? new Set();
    if (g.v4) set.add(false);
    if (g.v6) set.add(true);
    families.set(g.zone, set);
  }
  // Every network of a zone: a route may take the connection into any of them.
  for (const n of input.networks) {
    const zone = zones.get(n.id) ?? n.id;
    const sent = families.get(zone) ?? new Set<boolean>();
    for (const v6 of sent) lines.push(commitFlow(n.id, zone, v6));
    if (n.hostPort !== undefined && sent.has(false)) {
      lines.push(hostCommitFlow(n.id, n.hostPort, zone));
    }
  }
  return lines;
}

/**
 * The engine's lines (sorted, no duplicates) with the security group lines merged in, the same
 * way: only the new lines are sorted, then the two runs are merged.
 */
export function withAclFlows(lines: string[], input: FlowInput): string[] {
  const acl = compileAclFlows(input);
  if (acl.length === 0) return lines;
  acl.sort();
  const out: string[] = [];
  let i = 0;
  let k = 0;
  while (i < lines.length || k < acl.length) {
    const next = k >= acl.length || (i < lines.length && lines[i] < acl[k]) ? lines[i++] : acl[k++];
    if (out.length === 0 || out[out.length - 1] !== next) out.push(next);
  }
  return out;
}
