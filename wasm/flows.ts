/**
 * The OpenFlow rule compiler of the node agent: from what the node knows (its pod ports, their
 * networks, the ports of the same networks on other nodes) to the complete rule set of br-int, as
 * canonical `ovs-ofctl -O OpenFlow13 add-flow` lines, sorted and without duplicates. The pipeline
 * is described in ../agent/PIPELINE.md.
 *
 * `compileFlows` runs in WebAssembly (assembly/flows.ts); `compileFlowsTs` is the same source run
 * as plain JavaScript, for benchmarks and tests only (flow_engines.ts).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { checkShape, flowError, type FlowInput, NETWORK_TYPES } from "./flow_input.ts";
import { aclError, checkAclShape, type FlowAcl, PROTOCOLS } from "./acl_input.ts";
import { type Engine, engine, putText } from "./flow_engines.ts";
import { checkSampling } from "./flow_sampling.ts";
import { checkInactiveShape, inactiveError } from "./inactive_input.ts";
import {
  checkMirrorShape,
  type FlowMirrorFilter,
  MIRROR_PROTOCOLS,
  mirrorError,
  parseMirrorRemote,
} from "./mirror_input.ts";
import {
  checkServiceShape,
  type FlowService,
  SERVICE_PROTOCOLS,
  serviceError,
} from "./service_input.ts";

/**
 * Writes the model into the WASM input area (layout: `compile` in assembly/flows.ts): `words` u32
 * words, then the strings as one blob, written by one encodeInto when all ASCII.
 */
function encode(wasm: Engine, input: FlowInput, words: number): void {
  // The strings are concatenated as they come (a rope, flattened once by encodeInto): cheaper
  // than collecting them in an array to join.
  let blob = "";
  let ipCount = 0;
  for (const n of input.networks) {
    if (n.gateway === undefined) continue;
    blob += n.gateway;
    blob += n.gatewayMac!;
    ipCount++;
    if (n.gateway6 === undefined) continue;
    blob += n.gateway6;
    ipCount++;
  }
  for (const p of input.localPorts) {
    blob += p.mac;
    for (const ip of p.ips) blob += ip;
    ipCount += p.ips.length;
  }
  for (const p of input.remotePorts) {
    blob += p.mac;
    blob += p.nodeIp;
    for (const ip of p.ips) blob += ip;
    ipCount += p.ips.length;
  }
  const routes = input.routes ?? [];
  for (const r of routes) {
    blob += r.dst;
    blob += r.via ?? "";
  }
  // Growing the memory detaches older views: take them after the last allocation.
  const base = wasm.input(words * 4 + blob.length);
  const w = new Uint32Array(wasm.memory.buffer, base, words);
  let i = 0;
  w[i++] = input.tunnelPort;
  w[i++] = input.networks.length;
  w[i++] = input.localPorts.length;
  w[i++] = input.remotePorts.length;
  w[i++] = ipCount;
  for (const n of input.networks) {
    w[i++] = n.id;
    w[i++] = NETWORK_TYPES.indexOf(n.type);
    w[i++] = n.segmentId ?? 0;
    w[i++] = n.physnetPort ?? 0;
    // One more than the length, so that 0 says "no gateway" (and "" is still malformed).
    w[i++] = n.gateway === undefined ? 0 : n.gateway.length + 1;
    w[i++] = n.gatewayMac === undefined ? 0 : n.gatewayMac.length + 1;
    w[i++] = n.gateway6 === undefined ? 0 : n.gateway6.length + 1;
    // One more than the DSCP, so that 0 says "no marking" (and DSCP 0 still clears a pod's own).
    w[i++] = n.dscp === undefined ? 0 : n.dscp + 1;
    w[i++] = n.hostPort ?? 0;
    w[i++] = n.routerAdvertisements ? 1 : 0;
  }
  for (const p of input.localPorts) {
    w[i++] = p.ofport;
    w[i++] = p.network;
    w[i++] = p.cookie;
    w[i++] = p.ips.length;
    w[i++] = p.mac.length;
    for (const ip of p.ips) w[i++] = ip.length;
  }
  for (const p of input.remotePorts) {
    w[i++] = p.network;
    w[i++] = p.ips.length;
    w[i++] = p.mac.length;
    w[i++] = p.nodeIp.length;
    for (const ip of p.ips) w[i++] = ip.length;
  }
  w[i++] = routes.length;
  for (const r of routes) {
    w[i++] = r.from;
    w[i++] = r.to;
    w[i++] = r.dst.length;
    w[i++] = r.via === undefined ? 0 : r.via.length + 1;
    w[i++] = r.mtu ?? 0;
  }
  putText(wasm, base + words * 4, blob);
}

/**
 * Writes the acls section into the input area (layout at `acl` in assembly/acl.ts) and returns
 * its number of words.
 */
function encodeAcls(wasm: Engine, acls: FlowAcl[]): number {
  let blob = "";
  let words = 1;
  for (const a of acls) {
    words += 2;
    for (const r of a.rules) {
      words += 5 + (r.remote?.length ?? 0);
      for (const t of r.remote ?? []) blob += t;
    }
  }
  const base = wasm.input(words * 4 + blob.length);
  const w = new Uint32Array(wasm.memory.buffer, base, words);
  let i = 0;
  w[i++] = acls.length;
  for (const a of acls) {
    w[i++] = a.cookie;
    w[i++] = a.rules.length;
    for (const r of a.rules) {
      w[i++] = r.direction === "egress" ? 1 : 0;
      w[i++] = PROTOCOLS.indexOf(r.protocol);
      w[i++] = r.portMin ?? 0;
      w[i++] = r.portMax ?? 65535;
      w[i++] = r.remote === undefined ? 0xffffffff : r.remote.length;
      for (const t of r.remote ?? []) w[i++] = t.length;
    }
  }
  putText(wasm, base + words * 4, blob);
  return words;
}

/** Writes the inactive ports into the input area (layout at `inactive` in assembly/inactive.ts). */
function encodeInactive(wasm: Engine, input: FlowInput, words: number): number {
  const ports = input.inactivePorts!;
  const blob = ports.map((p) => p.mac).join("");
  const base = wasm.input(words * 4 + blob.length);
  const w = new Uint32Array(wasm.memory.buffer, base, words);
  let i = 0;
  w[i++] = ports.length;
  for (const p of ports) {
    w[i++] = p.ofport;
    w[i++] = p.network;
    w[i++] = p.cookie;
    w[i++] = p.mac.length;
  }
  putText(wasm, base + words * 4, blob);
  return words;
}

/** Writes the mirror rules into the input area (layout at `mirrors` in assembly/mirror.ts). */
function encodeMirrors(wasm: Engine, filters: FlowMirrorFilter[], words: number): number {
  const base = wasm.input(words * 4);
  const w = new Uint32Array(wasm.memory.buffer, base, words);
  let i = 0;
  w[i++] = filters.length;
  for (const f of filters) {
    const remote = f.remote === undefined ? { v4: 0, prefix: 0 } : parseMirrorRemote(f.remote)!;
    w[i++] = f.source;
    w[i++] = f.output;
    w[i++] = MIRROR_PROTOCOLS.indexOf(f.protocol);
    w[i++] = f.portMin ?? 0;
    w[i++] = f.portMax ?? 65535;
    w[i++] = remote.v4;
    w[i++] = remote.prefix;
  }
  return words;
}

/**
 * Writes the services section into the input area (layout at `services` in assembly/service.ts)
 * and returns its number of words.
 */
function encodeServices(wasm: Engine, services: FlowService[]): number {
  let blob = "";
  let words = 1;
  for (const s of services) {
    words += 7 + 3 * s.ports.length + s.backends.length;
    blob += s.vip;
    blob += s.mac;
    for (const b of s.backends) blob += b;
  }
  const base = wasm.input(words * 4 + blob.length);
  const w = new Uint32Array(wasm.memory.buffer, base, words);
  let i = 0;
  w[i++] = services.length;
  for (const s of services) {
    w[i++] = s.id;
    w[i++] = s.network;
    w[i++] = s.affinity ? 1 : 0;
    w[i++] = s.ports.length;
    w[i++] = s.backends.length;
    w[i++] = s.vip.length;
    w[i++] = s.mac.length;
    for (const p of s.ports) {
      w[i++] = SERVICE_PROTOCOLS.indexOf(p.protocol);
      w[i++] = p.port;
      w[i++] = p.targetPort;
    }
    for (const b of s.backends) w[i++] = b.length;
  }
  putText(wasm, base + words * 4, blob);
  return words;
}

/**
 * Compiles the model into the complete rule set of br-int. Each line is a complete
 * `ovs-ofctl -O OpenFlow13 add-flow` spec in the one canonical form
 * `cookie=0x<16 hex>,table=<n>,priority=<p>[,<match>],actions=<actions>`, whose match and actions
 * read exactly as `ovs-ofctl -O OpenFlow13 --no-names dump-flows` prints them (see
 * `parseDumpFlows`). Sorted (as JS sorts strings), no duplicates.
 *
 * Throws an Error naming the offending item (`localPorts[3].ips[1]: …`) for a field of the wrong
 * type or range, a malformed or non-unicast MAC or IP, an unknown network id, or a collision
 * (network id, VNI, VLAN on a physnet port, ofport, port cookie, MAC or IP within a network).
 */
export function compileFlows(input: FlowInput): string[] {
  return compileWith(engine("wasm"), input);
}

/**
 * `compileFlows` run as plain JavaScript: the same AssemblyScript source, built without
 * WebAssembly (flow_engines.ts). The benchmark yardstick and second opinion of the tests; same
 * lines, same errors.
 */
export function compileFlowsTs(input: FlowInput): string[] {
  return compileWith(engine("js"), input);
}

function compileWith(wasm: Engine, input: FlowInput): string[] {
  const words = checkShape(input);
  checkSampling(input.sampling);
  // Flow records (flow_sampling.ts): the sample actions, or none (0).
  wasm.sampling(input.sampling?.probability ?? 0, input.sampling?.collectorSetId ?? 0);
  encode(wasm, input, words);
  const rc = wasm.compile(words);
  if (rc !== 0) {
    const a = [0, 1, 2, 3, 4].map((i) => wasm.errorArg(i));
    throw flowError(input, rc, a[0], a[1], a[2], a[3], a[4]);
  }
  // The security group flows (assembly/acl.ts), when a port has groups.
  checkAclShape(input.acls);
  if (input.acls && input.acls.length > 0) {
    const rc = wasm.acl(encodeAcls(wasm, input.acls));
    if (rc !== 0) {
      const [i, k, j] = [0, 1, 2].map((n) => wasm.aclErrorArg(n));
      throw aclError(input.acls, rc, i, k, j);
    }
  }
  // The inactive ports' flows (assembly/inactive.ts), during a live migration.
  if (input.inactivePorts && input.inactivePorts.length > 0) {
    const rc = wasm.inactive(encodeInactive(wasm, input, checkInactiveShape(input)));
    if (rc !== 0) throw inactiveError(input, wasm.inactiveErrorArg());
  }
  // The service flows and select groups (assembly/service.ts), when the model has services.
  checkServiceShape(input.services);
  if (input.services && input.services.length > 0) {
    const rc = wasm.services(encodeServices(wasm, input.services));
    if (rc !== 0) {
      throw serviceError(input.services, rc, wasm.serviceErrorArg(0), wasm.serviceErrorArg(1));
    }
  }
  // The filtered mirrors' copies (assembly/mirror.ts), when a mirror has a filter.
  const mirrorWords = checkMirrorShape(input.mirrorFilters);
  if (input.mirrorFilters && input.mirrorFilters.length > 0) {
    const rc = wasm.mirrors(encodeMirrors(wasm, input.mirrorFilters, mirrorWords));
    if (rc !== 0) throw mirrorError(input.mirrorFilters, wasm.mirrorErrorArg());
  }
  // The lines are ASCII (the compiler writes constants and the numbers and addresses it renders,
  // never input bytes), so the ASCII decoder reads them as they are; in Deno it costs about 6 ms
  // of CPU less than a TextDecoder at 10,000 ports, garbage collection included.
  const out = Buffer.from(wasm.memory.buffer, wasm.outPtr(), wasm.outLen());
  return out.toString("ascii").split("\n");
}

/** Bytes currently reserved by the WASM memory (diagnostics and tests; not re-exported). */
export function flowsMemoryBytes(): number {
  return engine("wasm").memory.buffer.byteLength;
}

// Fields dump-flows prints before the match that are not part of a flow's identity.
const DUMP_FIELDS =
  /^(duration|n_packets|n_bytes|idle_age|hard_age|idle_timeout|hard_timeout|importance|reset_counts|send_flow_rem|no_packet_counts|no_byte_counts|check_overlap)\b/;

/**
 * Turns the output of `ovs-ofctl -O OpenFlow13 --no-names dump-flows <bridge>` (with or without
 * --no-stats) into canonical lines comparable with `compileFlows`: the cookie padded to 16 digits,
 * `table=0` and the default priority (32768) made explicit, statistics dropped. Sorted.
 */
export function parseDumpFlows(text: string): string[] {
  const lines: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || /^(OFPST|NXST)_FLOW/.test(line)) continue;
    // The head ends with ", " or " " before the actions; an empty head is not printed at all.
    const at = line.startsWith("actions=") ? 0 : line.indexOf(" actions=") + 1;
    if (at < 0 || !line.startsWith("actions=", at)) {
      throw new Error(`not a dump-flows line: ${line}`);
    }
    const head = line.slice(0, at).trim().replace(/,$/, "");
    let cookie = 0n;
    let table = 0;
    let match = "";
    for (const field of head === "" ? [] : head.split(", ")) {
      if (field.startsWith("cookie=")) cookie = BigInt(field.slice(7));
      else if (field.startsWith("table=")) table = Number(field.slice(6));
      else if (!DUMP_FIELDS.test(field)) match = field;
    }
    if (!match.startsWith("priority=")) {
      match = match ? `priority=32768,${match}` : "priority=32768";
    }
    const hex = cookie.toString(16).padStart(16, "0");
    lines.push(`cookie=0x${hex},table=${table},${match},${line.slice(at)}`);
  }
  return lines.sort();
}
