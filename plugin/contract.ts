/**
 * The CNI contract, as the plugin and the agent both speak it: the spec versions and commands,
 * the error codes and the error type, the result types and their conversion between versions,
 * and the rules for container IDs, network names and interface names.
 *
 * It imports nothing. It lives beside the native forwarder (knitter.c), whose build takes its
 * versions for the VERSION answer; the agent (and `common`, the manager) import it as
 * `@knitter/plugin/contract`.
 * @module
 */

// ---- versions and commands

/** Spec versions this plugin speaks, oldest first; the agent always answers in the newest. */
export const CNI_VERSIONS = ["0.4.0", "1.0.0", "1.1.0"] as const;
export type CniVersion = typeof CNI_VERSIONS[number];
export const LATEST_CNI_VERSION: CniVersion = "1.1.0";

export function isSupportedVersion(v: unknown): v is CniVersion {
  return (CNI_VERSIONS as readonly unknown[]).includes(v);
}

export const CNI_COMMANDS = ["ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC"] as const;
export type CniCommand = typeof CNI_COMMANDS[number];

// ---- errors

/**
 * Codes from the spec's table (below 100), then this project's own. 999 is the Go library's
 * "internal" code, which runtimes know.
 */
export const CNI_CODE = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  unknownContainer: 3,
  invalidEnvironment: 4,
  ioFailure: 5,
  decodeFailure: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  notAvailable: 50,
  limitedConnectivity: 51,
  /** CHECK found the pod's interfaces differ from what ADD made. */
  checkFailed: 100,
  internal: 999,
} as const;

/** A failure, as the agent answers it (non-2xx) and as the plugin prints it. */
export interface CniErrorBody {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

/** A failure the runtime is told about: a code, a message and optional details. */
export class CniError extends Error {
  constructor(readonly code: number, readonly msg: string, readonly details = "") {
    super(details ? `${msg}: ${details}` : msg);
    this.name = "CniError";
  }

  /** The spec's error object, in the version the runtime asked for. */
  toBody(cniVersion: string = LATEST_CNI_VERSION): CniErrorBody {
    const body: CniErrorBody = { cniVersion, code: this.code, msg: this.msg };
    if (this.details) body.details = this.details;
    return body;
  }
}

// ---- results

export interface CniInterface {
  name: string;
  mac?: string;
  sandbox?: string;
  /** 1.1 only, like socketPath and pciID. */
  mtu?: number;
  socketPath?: string;
  pciID?: string;
}

export interface CniIpConfig {
  address: string;
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

export interface CniRoute {
  dst: string;
  gw?: string;
  /** 1.1 only, like advmss, priority, table and scope. */
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** The result of ADD (the agent answers 1.1.0 form; the plugin converts it). */
export interface CniResult {
  cniVersion: string;
  interfaces?: CniInterface[];
  ips?: CniIpConfig[];
  routes?: CniRoute[];
  dns?: CniDns;
  [key: string]: unknown;
}

const INTERFACE_1_1_ONLY = ["mtu", "socketPath", "pciID"];
const ROUTE_1_1_ONLY = ["mtu", "advmss", "priority", "table", "scope"];

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function without(o: unknown, keys: string[]): unknown {
  if (!isObj(o)) return o;
  const copy = { ...o };
  for (const k of keys) delete copy[k];
  return copy;
}

/** 0.4.0 labels each IP; an address with ":" is IPv6 (that includes IPv4-mapped ones). */
function withIpVersion(ip: unknown): unknown {
  if (!isObj(ip) || typeof ip.address !== "string") return ip;
  return { ...ip, version: ip.address.includes(":") ? "6" : "4" };
}

function mapList(v: unknown, f: (item: unknown) => unknown): unknown {
  return Array.isArray(v) ? v.map(f) : v;
}

/**
 * A 1.1.0 result in the version the runtime asked for, as a new object: older versions get the
 * 1.1-only fields dropped, 0.4.0 also `version` on each IP. The cniVersion is always `to`.
 */
export function convertResult(result: Obj, to: CniVersion): Obj {
  const { cniVersion: _from, ...rest } = result;
  const out: Obj = { cniVersion: to, ...rest };
  if (to === "1.1.0") return out;
  if ("interfaces" in out) {
    out.interfaces = mapList(out.interfaces, (i) => without(i, INTERFACE_1_1_ONLY));
  }
  if ("routes" in out) out.routes = mapList(out.routes, (r) => without(r, ROUTE_1_1_ONLY));
  if (to === "0.4.0" && "ips" in out) out.ips = mapList(out.ips, withIpVersion);
  return out;
}

// ---- names

/** libcni's container ID / network name rule: alphanumeric first, then [A-Za-z0-9_.-]. */
export const CNI_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$/;

/** Linux's longest interface name, in bytes (IFNAMSIZ less the terminating NUL). */
export const MAX_IFNAME_BYTES = 15;

/**
 * Why `name` cannot be a Linux interface name (the kernel's dev_valid_name, as libcni checks
 * CNI_IFNAME): 1-15 bytes, not "." or "..", no "/", ":" or whitespace. Undefined when it can.
 */
export function ifNameProblem(name: string): string | undefined {
  if (name === "") return "is empty";
  if (name.length > MAX_IFNAME_BYTES) {
    return `"${name}" is longer than ${MAX_IFNAME_BYTES} characters`;
  }
  if (new TextEncoder().encode(name).length > MAX_IFNAME_BYTES) {
    return `"${name}" is longer than ${MAX_IFNAME_BYTES} bytes in UTF-8`;
  }
  if (name === "." || name === "..") return `"${name}" is not a valid interface name`;
  if (/[/:\s]/.test(name)) return `"${name}" contains "/", ":" or whitespace`;
  return undefined;
}

/** Whether the kernel takes `name` as an interface name (see ifNameProblem). */
export function isIfName(name: string): boolean {
  return ifNameProblem(name) === undefined;
}

/**
 * The interface (and OVS bridge) names knitter takes where it sets the rule itself (pod
 * annotations, knitctl's requests): the kernel's, narrowed to characters that are one plain token
 * on any command line.
 */
export const PLAIN_IFNAME_RE = /^[A-Za-z0-9_.-]{1,15}$/;
/** PLAIN_IFNAME_RE in words, for messages. */
export const PLAIN_IFNAME_RULE = "1-15 of A-Z a-z 0-9 _ . -";
