/**
 * What a pod's annotations ask for, and what its network-status annotation tells. Two request
 * formats: Knitter's `networks` ({"ports": [{"attach_to_network", "attributes"}]}, every interface
 * listed) and Multus' `k8s.v1.cni.cncf.io/networks` (a comma list or a JSON list of extra networks
 * beside the default one on eth0). The agent allocates from the result; the monitor parses the same
 * way to tell users, through an Event, what is wrong before any address is taken.
 */
import { PLAIN_IFNAME_RE, PLAIN_IFNAME_RULE } from "@knitter/plugin/contract";
import { isMac, parseIpPrefix } from "./address.ts";
import type { Dns, Port } from "./api_types.ts";
import { portIps } from "./port_addresses.ts";

export const KNITTER_NETWORKS = "networks";
export const MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks";
export const MULTUS_DEFAULT_NETWORK = "v1.multus-cni.io/default-network";
export const NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status";
/** Opt-in of a StatefulSet pod to keep its addresses across recreation. */
export const STABLE_ADDRESS = "knitter.io/stable-address";
/** Port IDs of pods that keep their addresses across recreation start with this. */
export const STABLE_PREFIX = "stable:";

/** Whether a port belongs to a pod name rather than to one pod (see STABLE_ADDRESS). */
export function isStablePortId(id: string): boolean {
  return id.startsWith(STABLE_PREFIX);
}

/** The pod name a stable port ID ("stable:NAMESPACE:NAME-IFNAME") is kept for. */
export function stablePodOf(
  id: string,
  ifName: string | undefined,
): { namespace: string; name: string } | undefined {
  if (!isStablePortId(id) || !ifName || !id.endsWith(`-${ifName}`)) return undefined;
  const rest = id.slice(STABLE_PREFIX.length, -(ifName.length + 1));
  const colon = rest.indexOf(":");
  if (colon < 0) return undefined;
  return { namespace: rest.slice(0, colon), name: rest.slice(colon + 1) };
}

/** One interface a pod asks for, before names and the default route are settled. */
export interface AnnotatedNetwork {
  network: string;
  /** The namespace a Multus reference names (absent: the pod's own). */
  namespace?: string;
  ifName?: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute?: boolean;
  /** The IPAMClaim (a claim at the manager) whose address and MAC the interface gets. */
  claim?: string;
}

/** The pod's networks as its annotations ask: undefined when it has no network annotation. */
export interface AnnotatedRequest {
  format: "knitter" | "multus";
  networks: AnnotatedNetwork[];
  /** Multus only: the network that replaces the default one on the primary interface. */
  defaultNetwork?: string;
}

/** An annotation a user wrote that cannot be understood; the message says where and why. */
export class AnnotationError extends Error {
  readonly annotation: string;

  /** `where` is the annotation's name, then where in its value: "networks ports[0]". */
  constructor(where: string, message: string) {
    const [annotation, ...at] = where.split(" ");
    super(`Annotation "${annotation}"${at.length ? `, ${at.join(" ")}` : ""}: ${message}`);
    this.name = "AnnotationError";
    this.annotation = annotation;
  }
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Parses the network annotations of a pod; throws AnnotationError for anything malformed. */
export function parsePodAnnotations(
  annotations: Record<string, string> | undefined,
): AnnotatedRequest | undefined {
  const a = annotations ?? {};
  const knitter = a[KNITTER_NETWORKS];
  const multus = a[MULTUS_NETWORKS];
  const defaultNetwork = a[MULTUS_DEFAULT_NETWORK];
  if (knitter !== undefined && multus !== undefined) {
    throw new AnnotationError(
      KNITTER_NETWORKS,
      `the pod also has "${MULTUS_NETWORKS}"; use one of the two formats`,
    );
  }
  if (knitter !== undefined) return { format: "knitter", networks: parseKnitter(knitter) };
  if (multus === undefined && defaultNetwork === undefined) return undefined;
  const out: AnnotatedRequest = {
    format: "multus",
    networks: multus === undefined ? [] : parseMultus(multus),
  };
  if (defaultNetwork !== undefined) {
    out.defaultNetwork = networkRef(MULTUS_DEFAULT_NETWORK, defaultNetwork.trim()).network;
  }
  return out;
}

// ---- Knitter's format

const KNITTER_ATTRIBUTES = new Set([
  "nic_name",
  "ip_addr",
  "ip_group_name",
  "mac_addr",
  "default_route",
  // The original's attributes that change nothing here (SR-IOV, DPDK acceleration).
  "function",
  "nic_type",
  "accelerate",
]);

function parseKnitter(text: string): AnnotatedNetwork[] {
  const where = KNITTER_NETWORKS;
  const doc = parseJson(where, text);
  if (!isObject(doc) || !Array.isArray(doc.ports)) {
    throw new AnnotationError(where, 'must be a JSON object with a "ports" list');
  }
  if (doc.ports.length === 0) throw new AnnotationError(where, '"ports" is empty');
  return doc.ports.map((p: unknown, i: number) => knitterPort(`${where} ports[${i}]`, p));
}

function knitterPort(where: string, p: unknown): AnnotatedNetwork {
  if (!isObject(p) || typeof p.attach_to_network !== "string") {
    throw new AnnotationError(where, 'needs "attach_to_network": the name of a network');
  }
  const attrs = p.attributes ?? {};
  if (!isObject(attrs)) throw new AnnotationError(where, '"attributes" must be an object');
  for (const k of Object.keys(attrs)) {
    if (!KNITTER_ATTRIBUTES.has(k)) {
      throw new AnnotationError(
        where,
        `unknown attribute "${k}" (known: ${[...KNITTER_ATTRIBUTES].join(", ")})`,
      );
    }
  }
  const out: AnnotatedNetwork = { network: networkName(where, p.attach_to_network) };
  setIf(out, "ifName", ifName(where, optText(where, attrs, "nic_name")));
  setIf(out, "ip", ipText(where, optText(where, attrs, "ip_addr")));
  setIf(out, "ipGroup", label(where, "ip_group_name", optText(where, attrs, "ip_group_name")));
  setIf(out, "mac", macText(where, optText(where, attrs, "mac_addr")));
  const dr = attrs.default_route;
  if (dr !== undefined) out.defaultRoute = dr === true || dr === "true";
  return out;
}

// ---- Multus' format

const MULTUS_KEYS = new Set([
  "name",
  "namespace",
  "interface",
  "ips",
  "mac",
  "default-route",
  // The IPAMClaim whose address the interface gets (k8snetworkplumbingwg/ipamclaims).
  "ipam-claim-reference",
  // Read by other tools, harmless here.
  "cni-args",
  "portMappings",
  "bandwidth",
  "infiniband-guid",
]);

function parseMultus(text: string): AnnotatedNetwork[] {
  const where = MULTUS_NETWORKS;
  const trimmed = text.trim();
  if (trimmed === "") throw new AnnotationError(where, "is empty");
  if (trimmed.startsWith("[") || trimmed.startsWith("{")) {
    const doc = parseJson(where, trimmed);
    if (!Array.isArray(doc)) throw new AnnotationError(where, "JSON form must be a list");
    return doc.map((item, i) => multusItem(`${where} [${i}]`, item));
  }
  return trimmed.split(",").map((part, i) => {
    const ref = part.trim();
    if (ref === "") throw new AnnotationError(where, `item ${i + 1} of the comma list is empty`);
    const [target, ifn, ...rest] = ref.split("@");
    if (rest.length > 0) throw new AnnotationError(where, `"${ref}" has more than one "@"`);
    const out = networkRef(where, target);
    setIf(out, "ifName", ifName(`${where} "${ref}"`, ifn));
    return out;
  });
}

function multusItem(where: string, item: unknown): AnnotatedNetwork {
  if (!isObject(item) || typeof item.name !== "string") {
    throw new AnnotationError(where, 'must be an object with "name"');
  }
  for (const k of Object.keys(item)) {
    if (!MULTUS_KEYS.has(k)) throw new AnnotationError(where, `unknown key "${k}"`);
  }
  const out: AnnotatedNetwork = { network: networkName(where, item.name) };
  setIf(out, "namespace", label(where, "namespace", optText(where, item, "namespace")));
  setIf(out, "ifName", ifName(where, optText(where, item, "interface")));
  if (item.ips !== undefined) {
    if (!Array.isArray(item.ips) || item.ips.some((x) => typeof x !== "string")) {
      throw new AnnotationError(where, '"ips" must be a list of addresses');
    }
    if (item.ips.length > 1) {
      throw new AnnotationError(
        where,
        `"ips" lists ${item.ips.length} addresses; a Knitter interface has one (ask for another network for another address)`,
      );
    }
    setIf(out, "ip", ipText(where, item.ips[0] as string | undefined));
  }
  setIf(out, "mac", macText(where, optText(where, item, "mac")));
  setIf(out, "claim", claimName(where, optText(where, item, "ipam-claim-reference")));
  const dr = item["default-route"];
  if (dr !== undefined) {
    if (!Array.isArray(dr)) {
      throw new AnnotationError(where, '"default-route" must be a list of gateway addresses');
    }
    out.defaultRoute = true;
  }
  return out;
}

/** "net", "ns/net" (a Multus reference). */
function networkRef(where: string, text: string): AnnotatedNetwork {
  const parts = text.split("/");
  if (parts.length > 2) throw new AnnotationError(where, `"${text}" is not [namespace/]network`);
  if (parts.length === 2) {
    return {
      namespace: label(where, "namespace", parts[0])!,
      network: networkName(where, parts[1]),
    };
  }
  return { network: networkName(where, parts[0]) };
}

// ---- settling names and the default route

export interface ResolvedInterface {
  network: string;
  /** The namespace a Multus reference names (absent: the pod's own). */
  namespace?: string;
  ifName: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute: boolean;
  claim?: string;
}

/**
 * The interfaces a pod gets from its annotations: names filled in (the first unnamed one is the
 * primary, then net1, net2, ...), one default route (the first interface unless one asks). Multus
 * requests keep the primary interface on the default network, as Multus does.
 */
export function resolveAnnotated(
  req: AnnotatedRequest,
  opts: { primaryIfName: string; defaultNetwork?: string },
): ResolvedInterface[] {
  const list: AnnotatedNetwork[] = [...req.networks];
  if (req.format === "multus") {
    const primary = req.defaultNetwork ?? opts.defaultNetwork;
    if (primary) list.unshift({ network: primary, ifName: opts.primaryIfName });
    else if (list.length === 0) {
      throw new AnnotationError(
        MULTUS_DEFAULT_NETWORK,
        "names no network and the agent has no default network",
      );
    }
  }
  return settle(list, opts.primaryIfName, (msg) => new AnnotationError(annotationOf(req), msg));
}

function annotationOf(req: AnnotatedRequest): string {
  return req.format === "knitter" ? KNITTER_NETWORKS : MULTUS_NETWORKS;
}

/** Names, uniqueness and the single default route; shared with the non-Kubernetes requests. */
export function settle(
  list: AnnotatedNetwork[],
  primaryIfName: string,
  fail: (message: string) => Error,
): ResolvedInterface[] {
  const names = new Set<string>();
  let extra = 0;
  const out = list.map((w, i): ResolvedInterface => {
    const name = w.ifName ?? (i === 0 ? primaryIfName : `net${++extra}`);
    if (!PLAIN_IFNAME_RE.test(name)) {
      throw fail(
        `interface name "${name}" is not a valid Linux interface name (${PLAIN_IFNAME_RULE})`,
      );
    }
    if (names.has(name)) throw fail(`interface "${name}" is requested twice`);
    names.add(name);
    const r: ResolvedInterface = { network: w.network, ifName: name, defaultRoute: false };
    setIf(r, "namespace", w.namespace);
    if (w.defaultRoute) r.defaultRoute = true;
    setIf(r, "ip", w.ip);
    setIf(r, "ipGroup", w.ipGroup);
    setIf(r, "mac", w.mac);
    setIf(r, "claim", w.claim);
    return r;
  });
  const routed = out.filter((i) => i.defaultRoute);
  if (routed.length > 1) {
    throw fail(
      `more than one interface asks for the default route (${
        routed.map((i) => i.ifName).join(", ")
      })`,
    );
  }
  if (routed.length === 0 && out.length > 0) out[0].defaultRoute = true;
  return out;
}

// ---- network-status

/** One entry of the Multus network-status annotation. */
export interface NetworkStatusEntry {
  name: string;
  interface: string;
  ips: string[];
  mac: string;
  default: boolean;
  dns: Dns;
  gateway?: string[];
}

/**
 * The network-status of a pod from its ports: the primary interface (eth0, else the first by name)
 * is marked default, the rest follow in interface order.
 */
export function networkStatus(ports: Port[], primaryIfName = "eth0"): NetworkStatusEntry[] {
  const sorted = [...ports].sort((a, b) => ifOrder(a, primaryIfName) - ifOrder(b, primaryIfName));
  const primary = sorted.find((p) => p.interface === primaryIfName) ?? sorted[0];
  return sorted.map((p) => {
    const e: NetworkStatusEntry = {
      name: `${p.networkTenant}/${p.network}`,
      interface: p.interface ?? "",
      ips: portIps(p),
      mac: p.mac,
      default: p === primary,
      dns: p.dns ?? {},
    };
    const gateways = [p.gateway, p.gateway6].filter((g) => g !== undefined);
    if (gateways.length > 0) e.gateway = gateways;
    return e;
  });
}

function ifOrder(p: Port, primary: string): number {
  const name = p.interface ?? "";
  if (name === primary) return -1;
  const m = name.match(/(\d+)$/);
  return m ? Number(m[1]) : 1e6;
}

// ---- small validators

function parseJson(where: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new AnnotationError(where, `is not valid JSON (${(err as Error).message})`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function optText(where: string, obj: Record<string, unknown>, key: string): string | undefined {
  const v = obj[key];
  if (v === undefined || v === "") return undefined;
  if (typeof v !== "string") throw new AnnotationError(where, `"${key}" must be a string`);
  return v;
}

function networkName(where: string, name: string): string {
  if (!DNS_LABEL.test(name)) {
    throw new AnnotationError(
      where,
      `network name "${name}" is not a lowercase DNS label (a-z, 0-9, '-', 1-63)`,
    );
  }
  return name;
}

function label(where: string, what: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!DNS_LABEL.test(v)) {
    throw new AnnotationError(where, `${what} "${v}" is not a lowercase DNS label`);
  }
  return v;
}

/** An IPAMClaim's name: a Kubernetes object name (KubeVirt's are VM.NETWORK). */
function claimName(where: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!DNS_SUBDOMAIN.test(v)) {
    throw new AnnotationError(
      where,
      `ipam-claim-reference "${v}" is not the name of an IPAMClaim (a lowercase DNS subdomain)`,
    );
  }
  return v;
}

function ifName(where: string, v: string | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  if (!PLAIN_IFNAME_RE.test(v)) {
    throw new AnnotationError(
      where,
      `interface name "${v}" is not a valid Linux interface name (${PLAIN_IFNAME_RULE})`,
    );
  }
  return v;
}

/** An address, or an address with a prefix length (Multus "ips" carry one): the address part. */
function ipText(where: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if ("error" in parseIpPrefix(v)) throw new AnnotationError(where, `"${v}" is not an IP address`);
  return v.includes("/") ? v.slice(0, v.indexOf("/")) : v;
}

function macText(where: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const mac = v.toLowerCase();
  if (!isMac(mac)) {
    throw new AnnotationError(where, `"${v}" is not a MAC address like 02:00:0a:01:00:05`);
  }
  return mac;
}

function setIf<T extends object, K extends keyof T>(obj: T, key: K, v: T[K] | undefined): void {
  if (v !== undefined) obj[key] = v;
}
