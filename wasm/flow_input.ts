/**
 * The input model of the flow compiler and its validation, shared by both engines: the types of
 * the model, the shape checks of single fields (types and ranges), the codes of the checks that
 * need the whole model (which each engine makes itself, in the same order) and the wording of
 * every error, so that both throw the same text.
 *
 * @module
 */

import type { FlowAcl } from "./acl_input.ts";
import type { FlowSampling } from "./flow_sampling.ts";
import type { FlowInactivePort } from "./inactive_input.ts";
import type { FlowMirrorFilter } from "./mirror_input.ts";
import type { FlowService } from "./service_input.ts";

/** The MTUs a route may check: IPv4's minimum (RFC 791) to the largest a jumbo frame carries. */
export const MIN_ROUTE_MTU = 68;
export const MAX_ROUTE_MTU = 65000;

/** A network with ports on this node. */
export interface FlowNetwork {
  /** Node-local network number 1..65535 (the agent assigns it); in reg0 and the cookie. */
  id: number;
  type: "vxlan" | "vlan" | "flat";
  /** VNI for vxlan (1..16777215), VLAN ID for vlan (1..4094); none for flat. */
  segmentId?: number;
  /** Ofport on br-int of the patch port to the network's physnet bridge (vlan, flat only). */
  physnetPort?: number;
  /**
   * The network's gateway (IPv4 or IPv6), answered on this node (ARP or neighbour discovery, and
   * ICMP echo; see ../agent/PIPELINE.md, "Distributed gateway"); with `gatewayMac`, or neither.
   */
  gateway?: string;
  /** The MAC the gateway answers with: `gatewayMac(networkId)`, the same on every node. */
  gatewayMac?: string;
  /**
   * A dual-stack network's IPv6 gateway, besides `gateway`: answered the same way (neighbour
   * discovery, ICMPv6 echo) with the same `gatewayMac`. Needs `gateway` and `gatewayMac`.
   */
  gateway6?: string;
  /**
   * DSCP (0..63) of every IPv4 and IPv6 packet a pod of the network sends (the SPOOF flows set
   * it, see ../agent/PIPELINE.md, "DSCP marking"); unset: the pods' own marking is left alone.
   */
  dscp?: number;
  /**
   * Ofport on br-int of the network's host port: the node's own interface on the network (egress,
   * the node reaching its pods; ../agent/PIPELINE.md, "Host port"). It has the gateway MAC and
   * the gateway's address (IPv4 or IPv6), so it needs a `gateway`; with `gateway6`, the IPv6
   * gateway too (its IPv6 flows). None: the node is not on the network.
   */
  hostPort?: number;
  /**
   * The gateway sends router advertisements (../agent/PIPELINE.md, "Router advertisements"): the
   * pods' solicitations go to the agent, the pods' own advertisements are dropped, and the
   * gateway's link-local address (from its MAC) is answered. Needs an IPv6 gateway.
   */
  routerAdvertisements?: boolean;
}

/**
 * The gateway MAC of a network, from the manager's network ID: `0a:58:` and the 32-bit FNV-1a
 * hash of the ID. The same on every node (a pod's neighbour entry for its gateway stays valid
 * wherever the traffic goes), locally administered and unicast (first octet 0x0a), and outside
 * the `02:` block the manager derives its ports' MACs from.
 */
export function gatewayMac(networkId: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < networkId.length; i++) h = Math.imul(h ^ networkId.charCodeAt(i), 0x01000193);
  const bytes = [h >>> 24, (h >>> 16) & 0xff, (h >>> 8) & 0xff, h & 0xff];
  return GATEWAY_MAC_PREFIX + bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/** The first two octets of every gateway MAC (gatewayMac); no port MAC starts so. */
export const GATEWAY_MAC_PREFIX = "0a:58:";

/**
 * The gateway fields of a network's FlowNetwork, from what its ports say: the gateway with its
 * MAC, and on a dual-stack network the IPv6 gateway too (alone, it is the gateway).
 */
export function flowGateways(
  networkId: string,
  gateway?: string,
  gateway6?: string,
): Pick<FlowNetwork, "gateway" | "gatewayMac" | "gateway6"> {
  const first = gateway ?? gateway6;
  if (first === undefined) return {};
  const answered = { gateway: first, gatewayMac: gatewayMac(networkId) };
  return gateway !== undefined && gateway6 !== undefined ? { ...answered, gateway6 } : answered;
}

/** A pod port on this node. */
export interface FlowLocalPort {
  /** Ofport on br-int, 1..65279. */
  ofport: number;
  /** Network id. */
  network: number;
  /** `02:ab:cd:ef:01:23` (either case; the lines have lowercase). */
  mac: string;
  /** IPv4 and/or IPv6 addresses, without prefix length. */
  ips: string[];
  /** Node-local port number 1..2^31: the cookie's low 32 bits, and reg1. */
  cookie: number;
}

/** A port of one of the networks on another node. */
export interface FlowRemotePort {
  network: number;
  mac: string;
  ips: string[];
  /** Tunnel endpoint of its node (IPv4). */
  nodeIp: string;
}

/**
 * A route from one network to another (../agent/PIPELINE.md, "Routing"): IP of `dst`'s family that
 * a port of `from` sends to its gateway with a destination in `dst` goes to network `to`: to the
 * port that has the destination address (a connected network), or to the port with address `via`
 * (a static route; none of `to`'s ports has it yet: the route waits). Both networks need a gateway
 * of that family (an IPv6 one: `gateway`, or a dual-stack network's `gateway6`).
 */
export interface FlowRoute {
  from: number;
  to: number;
  /** IPv4 or IPv6 CIDR without host bits (`10.2.0.0/24`, `fd00:2::/64`). */
  dst: string;
  /** The next hop's address (of dst's family), a port of `to`; absent: `dst` is `to`'s subnet. */
  via?: string;
  /**
   * `to`'s MTU when it is smaller than `from`'s, for routes of either family: a routed packet
   * larger than that goes to the router's slow path ("fragmentation needed", IPv6's "packet too
   * big", ../agent/PIPELINE.md "Router errors").
   */
  mtu?: number;
}

/** What the compiler needs to know about the node. */
export interface FlowInput {
  /** Ofport of the one flow-based VXLAN port (options:remote_ip=flow, key=flow, tos=inherit). */
  tunnelPort: number;
  networks: FlowNetwork[];
  localPorts: FlowLocalPort[];
  remotePorts: FlowRemotePort[];
  /** The routes of the routers that connect these networks; none when absent. */
  routes?: FlowRoute[];
  /** The rules of the local ports with security groups (acl_input.ts); absent: none has any. */
  acls?: FlowAcl[];
  /** Flow records' sample actions (flow_sampling.ts); absent: none. */
  sampling?: FlowSampling;
  /** Local ports of a live migration's other end (inactive_input.ts); absent: none. */
  inactivePorts?: FlowInactivePort[];
  /** The services of these networks (service_input.ts); absent: none. */
  services?: FlowService[];
  /** The rules of filtered mirrors on local ports (mirror_input.ts); absent: none. */
  mirrorFilters?: FlowMirrorFilter[];
}

/** Highest ofport OVS assigns (OFPP_MAX is 0xff00). */
const MAX_OFPORT = 0xfeff;
/** Highest node-local port number (the cookie's low 32 bits). */
const MAX_PORT_COOKIE = 2 ** 31;
/** Highest node-local network number (reg0 and the cookie's high 32 bits). */
const MAX_NETWORK_ID = 0xffff;
/** Highest DSCP: six bits of the IPv4 TOS / IPv6 traffic class. */
export const MAX_DSCP = 63;

/** Network type codes, in the encoding the WASM engine reads (assembly/input.ts). */
export const NETWORK_TYPES = ["vxlan", "vlan", "flat"] as const;

/**
 * Error codes of the checks that need the whole model (string syntax, references, uniqueness);
 * both engines report the same codes with the same arguments, so both throw the same text.
 */
export const ERR = {
  DUP_NETWORK: 1,
  DUP_VNI: 2,
  DUP_SEGMENT: 3,
  PHYSNET_IS_TUNNEL: 4,
  UNKNOWN_NETWORK: 5,
  OFPORT_IS_TUNNEL: 6,
  OFPORT_IS_PHYSNET: 7,
  DUP_OFPORT: 8,
  DUP_COOKIE: 9,
  BAD_MAC: 10,
  DUP_MAC: 11,
  BAD_IP: 12,
  DUP_IP: 13,
  BAD_NODE_IP: 14,
  BAD_GATEWAY: 15,
  BAD_GATEWAY_MAC: 16,
  ROUTE_NETWORK: 17,
  BAD_ROUTE_DST: 18,
  BAD_ROUTE_VIA: 19,
  BAD_GATEWAY6: 20,
} as const;

/** Item kinds in error arguments. */
export const KIND = { NETWORK: 0, LOCAL: 1, REMOTE: 2, ROUTE: 3 } as const;
const KIND_NAMES = ["networks", "localPorts", "remotePorts", "routes"];

// ---------------------------------------------------------------------------------------------
// Shape checks (types and ranges of single fields).

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) {
    return String(value);
  }
  return Array.isArray(value) ? "an array" : typeof value;
}

function fail(path: string, expected: string, value: unknown): never {
  throw new Error(`${path}: expected ${expected}, got ${show(value)}`);
}

function int(value: unknown, min: number, max: number, path: string): void {
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) {
    fail(path, `an integer in ${min}..${max}`, value);
  }
}

function str(value: unknown, path: string): void {
  if (typeof value !== "string") fail(path, "a string", value);
}

function strings(value: unknown, path: string): number {
  if (!Array.isArray(value)) fail(path, "an array of strings", value);
  for (let i = 0; i < value.length; i++) str(value[i], `${path}[${i}]`);
  return value.length;
}

function record(value: unknown, path: string): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(path, "an object", value);
  }
}

function list(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) fail(path, "an array", value);
  return value;
}

function checkNetwork(n: FlowNetwork, path: string): void {
  record(n, path);
  int(n.id, 1, MAX_NETWORK_ID, `${path}.id`);
  const { type, segmentId, physnetPort } = n;
  if (type === "vxlan") {
    int(segmentId, 1, 0xffffff, `${path}.segmentId (VNI)`);
    if (physnetPort !== undefined) fail(`${path}.physnetPort`, "none for vxlan", physnetPort);
  } else if (type === "vlan" || type === "flat") {
    if (type === "vlan") int(segmentId, 1, 4094, `${path}.segmentId (VLAN ID)`);
    else if (segmentId !== undefined) fail(`${path}.segmentId`, "none for flat", segmentId);
    int(physnetPort, 1, MAX_OFPORT, `${path}.physnetPort`);
  } else {
    fail(`${path}.type`, '"vxlan", "vlan" or "flat"', type);
  }
  if (n.gateway !== undefined || n.gatewayMac !== undefined || n.gateway6 !== undefined) {
    str(n.gateway, `${path}.gateway`);
    str(n.gatewayMac, `${path}.gatewayMac`);
  }
  if (n.gateway6 !== undefined) str(n.gateway6, `${path}.gateway6`);
  if (n.dscp !== undefined) int(n.dscp, 0, MAX_DSCP, `${path}.dscp`);
  if (n.hostPort !== undefined) checkHostPort(n, path);
  if (n.routerAdvertisements !== undefined) checkAdvertising(n, path);
}

/** Advertisements come from an IPv6 gateway. */
function checkAdvertising(n: FlowNetwork, path: string): void {
  if (typeof n.routerAdvertisements !== "boolean") {
    fail(`${path}.routerAdvertisements`, "a boolean", n.routerAdvertisements);
  }
  const v6 = [n.gateway, n.gateway6].some((g) => typeof g === "string" && g.includes(":"));
  if (n.routerAdvertisements && !v6) {
    fail(`${path}.routerAdvertisements`, "a network with an IPv6 gateway", n.gateway ?? "none");
  }
}

/** A host port answers as the network's gateways (IPv4, IPv6 or both): it needs one. */
function checkHostPort(n: FlowNetwork, path: string): void {
  int(n.hostPort, 1, MAX_OFPORT, `${path}.hostPort`);
  if (typeof n.gateway !== "string") fail(`${path}.hostPort`, "a network with a gateway", "none");
}

/**
 * Throws an Error naming the first field of the wrong type or out of range. Returns the number of
 * u32 words of the model's encoding for the WASM compiler (see encode in flows.ts).
 */
export function checkShape(input: FlowInput): number {
  record(input, "input");
  int(input.tunnelPort, 1, MAX_OFPORT, "tunnelPort");
  const networks = list(input.networks, "networks") as FlowNetwork[];
  const locals = list(input.localPorts, "localPorts") as FlowLocalPort[];
  const remotes = list(input.remotePorts, "remotePorts") as FlowRemotePort[];
  let words = 5 + 10 * networks.length + 5 * locals.length + 4 * remotes.length;
  for (let i = 0; i < networks.length; i++) {
    checkNetwork(networks[i], `networks[${i}]`);
    if (networks[i].hostPort === input.tunnelPort) {
      fail(`networks[${i}].hostPort`, "an ofport other than the tunnel port", input.tunnelPort);
    }
  }
  for (let i = 0; i < locals.length; i++) {
    const p = locals[i];
    const path = `localPorts[${i}]`;
    record(p, path);
    int(p.ofport, 1, MAX_OFPORT, `${path}.ofport`);
    int(p.network, 1, MAX_NETWORK_ID, `${path}.network`);
    str(p.mac, `${path}.mac`);
    words += strings(p.ips, `${path}.ips`);
    int(p.cookie, 1, MAX_PORT_COOKIE, `${path}.cookie`);
  }
  for (let i = 0; i < remotes.length; i++) {
    const p = remotes[i];
    const path = `remotePorts[${i}]`;
    record(p, path);
    int(p.network, 1, MAX_NETWORK_ID, `${path}.network`);
    str(p.mac, `${path}.mac`);
    words += strings(p.ips, `${path}.ips`);
    str(p.nodeIp, `${path}.nodeIp`);
  }
  const routes = list(input.routes ?? [], "routes") as FlowRoute[];
  words += 1 + 5 * routes.length;
  for (let i = 0; i < routes.length; i++) {
    const r = routes[i];
    const path = `routes[${i}]`;
    record(r, path);
    int(r.from, 1, MAX_NETWORK_ID, `${path}.from`);
    int(r.to, 1, MAX_NETWORK_ID, `${path}.to`);
    str(r.dst, `${path}.dst`);
    if (r.via !== undefined) str(r.via, `${path}.via`);
    if (r.mtu !== undefined) int(r.mtu, MIN_ROUTE_MTU, MAX_ROUTE_MTU, `${path}.mtu`);
  }
  return words;
}

// ---------------------------------------------------------------------------------------------
// Errors of the model checks.

function itemName(kind: number, index: number): string {
  return `${KIND_NAMES[kind]}[${index}]`;
}

/**
 * The errors of a route (kind ROUTE); `sub` 0 names `from`, 1 `to`. A `dst` with a colon is an
 * IPv6 route, checked against IPv6 gateways and a via of its family.
 */
function routeError(route: FlowRoute, at: string, code: number, sub: number): Error {
  const family = route.dst.includes(":") ? "IPv6" : "IPv4";
  if (code === ERR.ROUTE_NETWORK) {
    const [field, id] = sub === 0 ? ["from", route.from] : ["to", route.to];
    return new Error(`${at}.${field}: network ${id} is not here or has no ${family} gateway`);
  }
  if (code === ERR.BAD_ROUTE_DST) {
    const form = family === "IPv6" ? "x:x::/n" : "a.b.c.d/n";
    return new Error(
      `${at}.dst: ${
        JSON.stringify(route.dst)
      } is not an ${family} CIDR without host bits (${form})`,
    );
  }
  return new Error(`${at}.via: ${JSON.stringify(route.via)} is not a unicast ${family} address`);
}

function portOf(input: FlowInput, kind: number, index: number): FlowLocalPort | FlowRemotePort {
  return kind === KIND.LOCAL ? input.localPorts[index] : input.remotePorts[index];
}

/**
 * The Error for a failed model check: `code` from ERR, the item at fault (kind, index, sub-index
 * such as the position in `ips`) and, for conflicts, the item it collides with.
 */
export function flowError(
  input: FlowInput,
  code: number,
  kind: number,
  index: number,
  sub: number,
  otherKind: number,
  otherIndex: number,
): Error {
  const at = itemName(kind, index);
  if (kind === KIND.ROUTE) return routeError(input.routes![index], at, code, sub);
  const other = itemName(otherKind, otherIndex);
  const net = kind === KIND.NETWORK ? input.networks[index] : undefined;
  const port = kind === KIND.NETWORK ? undefined : portOf(input, kind, index);
  const netId = port?.network;
  switch (code) {
    case ERR.DUP_NETWORK:
      return new Error(`${at}: id ${net!.id} is already used by ${other}`);
    case ERR.DUP_VNI:
      return new Error(`${at}: VNI ${net!.segmentId} is already used by ${other}`);
    case ERR.DUP_SEGMENT:
      return new Error(
        net!.type === "vlan"
          ? `${at}: VLAN ${net!.segmentId} on physnet port ${
            net!.physnetPort
          } is already used by ${other}`
          : `${at}: the untagged traffic of physnet port ${
            net!.physnetPort
          } already belongs to ${other}`,
      );
    case ERR.PHYSNET_IS_TUNNEL:
      return new Error(`${at}: physnetPort ${net!.physnetPort} is the tunnel port`);
    case ERR.UNKNOWN_NETWORK:
      return new Error(`${at}: unknown network ${netId}`);
    case ERR.OFPORT_IS_TUNNEL:
      return new Error(`${at}: ofport ${(port as FlowLocalPort).ofport} is the tunnel port`);
    case ERR.OFPORT_IS_PHYSNET:
      return new Error(
        `${at}: ofport ${(port as FlowLocalPort).ofport} is the physnet port of ${other}`,
      );
    case ERR.DUP_OFPORT:
      return new Error(
        `${at}: ofport ${(port as FlowLocalPort).ofport} is already used by ${other}`,
      );
    case ERR.DUP_COOKIE:
      return new Error(
        `${at}: cookie ${(port as FlowLocalPort).cookie} is already used by ${other}`,
      );
    case ERR.BAD_MAC:
      return new Error(
        `${at}.mac: ${JSON.stringify(port!.mac)} is not a unicast MAC address (xx:xx:xx:xx:xx:xx)`,
      );
    case ERR.DUP_MAC:
      if (otherKind === KIND.NETWORK) {
        return new Error(
          `${at}.mac: ${port!.mac} is the gateway MAC of network ${netId} (${other})`,
        );
      }
      return new Error(`${at}.mac: ${port!.mac} is already used in network ${netId} by ${other}`);
    case ERR.BAD_IP:
      return new Error(
        `${at}.ips[${sub}]: ${
          JSON.stringify(port!.ips[sub])
        } is not a unicast IPv4 or IPv6 address`,
      );
    case ERR.DUP_IP:
      if (otherKind === KIND.NETWORK) {
        return new Error(
          `${at}.ips[${sub}]: ${port!.ips[sub]} is the gateway of network ${netId} (${other})`,
        );
      }
      return new Error(
        `${at}.ips[${sub}]: ${port!.ips[sub]} is already used in network ${netId} by ${other}`,
      );
    case ERR.BAD_GATEWAY:
      return new Error(
        `${at}.gateway: ${JSON.stringify(net!.gateway)} is not a unicast IPv4 or IPv6 address`,
      );
    case ERR.BAD_GATEWAY6:
      return new Error(
        `${at}.gateway6: ${JSON.stringify(net!.gateway6)} is not a unicast IPv6 address`,
      );
    case ERR.BAD_GATEWAY_MAC:
      return new Error(
        `${at}.gatewayMac: ${
          JSON.stringify(net!.gatewayMac)
        } is not a unicast MAC address (xx:xx:xx:xx:xx:xx)`,
      );
    case ERR.BAD_NODE_IP:
      return new Error(
        `${at}.nodeIp: ${
          JSON.stringify((port as FlowRemotePort).nodeIp)
        } is not a unicast IPv4 address`,
      );
  }
  return new Error(`flow compiler: unknown error ${code} at ${at}`);
}
