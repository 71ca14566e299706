/**
 * What a CNI request asks for: which networks, on which interfaces, with which fixed addresses,
 * for which tenant and pod. Under Kubernetes this comes from the pod's annotations (read by the
 * agent through the API, see kube_pods.ts); without, from the network config, its runtimeConfig
 * and CNI_ARGS. Nothing asked means one interface on the default network.
 */
import {
  AnnotationError,
  type Bandwidth,
  parseBandwidth,
  parsePodAnnotations,
  type PodRef,
  resolveAnnotated,
  settle,
  STABLE_ADDRESS,
  STABLE_PREFIX,
} from "@knitter/common";
import { macKind, parseIpPrefix, parseMac } from "@knitter/common/address";
import type { CniRequest } from "@knitter/plugin/protocol";
import { createHash } from "node:crypto";
import { CNI_CODE, CNI_NAME_RE, CniError } from "@knitter/plugin/contract";

export type { CniRequest };

export interface WantedInterface {
  network: string;
  ifName: string;
  /** A fixed address, without prefix. */
  ip?: string;
  /** The prefix length the fixed address was asked with ("10.1.0.5/24"): the network's must match. */
  ipPrefix?: number;
  /** Where the fixed address was asked for, for messages ("IP= in CNI_ARGS"). */
  ipFrom?: string;
  ipGroup?: string;
  /** A fixed MAC, lowercase with colons. */
  mac?: string;
  /** Where the fixed MAC was asked for, for messages. */
  macFrom?: string;
  defaultRoute: boolean;
  /** Bandwidth limits from runtimeConfig.bandwidth (the primary interface only). */
  bandwidth?: Bandwidth;
  /**
   * The claim whose address and MAC the port gets (a Multus selection's ipam-claim-reference, or
   * networks[i].claim in the network config): the manager's, made for the pod's IPAMClaim.
   */
  claim?: string;
}

export interface PodRequest {
  tenant: string;
  /** Where the tenant came from, for the hint when it does not exist. */
  tenantFrom: "config" | "namespace" | "default";
  pod?: PodRef;
  /**
   * The part of the port IDs before the interface name: the pod's UID and the container ID (each
   * sandbox of a pod has ports of its own), the container ID alone without a UID, or the pod's name
   * for a stable StatefulSet pod (its ports outlive its sandboxes and its UID).
   */
  owner: string;
  interfaces: WantedInterface[];
}

/** What the agent read of the pod through the Kubernetes API (Kubernetes mode only). */
export interface KubePod {
  uid: string;
  annotations: Record<string, string>;
  /** Kinds of the pod's controllers (ownerReferences), e.g. ["StatefulSet"]. */
  ownerKinds: string[];
}

/** A CNI request as the agent handles it: in Kubernetes mode with the pod it read. */
export type AgentRequest = CniRequest & { kubePod?: KubePod };

export function podRequest(
  req: AgentRequest,
  defaults: { tenant: string; network?: string },
): PodRequest {
  const args = req.args ?? {};
  const config = req.config ?? {};
  const tenant = str(config.tenant) ?? args.K8S_POD_NAMESPACE ?? defaults.tenant;
  const tenantFrom = str(config.tenant)
    ? "config"
    : args.K8S_POD_NAMESPACE
    ? "namespace"
    : "default";
  const uid = req.kubePod?.uid ?? args.K8S_POD_UID;
  const pod = args.K8S_POD_NAMESPACE && args.K8S_POD_NAME
    ? { namespace: args.K8S_POD_NAMESPACE, name: args.K8S_POD_NAME, ...(uid ? { uid } : {}) }
    : undefined;
  const fromPod = req.kubePod ? fromAnnotations(req, req.kubePod, defaults.network) : undefined;
  const interfaces = fromPod ?? fromCni(req, defaults.network);
  for (const w of interfaces) checkWantedMac(w);
  // The runtime's limits are for the interface it names (CNI_IFNAME), as the reference plugin's.
  const bandwidth = bandwidthCapability(config.runtimeConfig?.bandwidth);
  const named = interfaces.find((w) => w.ifName === req.ifName);
  if (bandwidth && named) named.bandwidth = bandwidth;
  const owner = pod && req.kubePod && isStable(req.kubePod, interfaces)
    ? `${STABLE_PREFIX}${pod.namespace}:${pod.name}`
    : uid
    ? `${uid}-${req.containerId}`
    : req.containerId;
  return { tenant, tenantFrom, pod, owner, interfaces };
}

/** What to do when the manager has no tenant of this name, by where the name came from. */
export function missingTenantHint(want: Pick<PodRequest, "tenant" | "tenantFrom">): string {
  const create = `create it at the manager (knitctl create tenant ${want.tenant})`;
  switch (want.tenantFrom) {
    case "config":
      return `the "tenant" key of the network config names it: ${create}, or name another`;
    case "namespace":
      return `the pod's namespace (K8S_POD_NAMESPACE) names it: ${create}, or name another ` +
        `tenant with the "tenant" key of the network config`;
    default:
      return `the runtime passed no K8S_POD_NAMESPACE in CNI_ARGS (containerd's ctr, nerdctl, ` +
        `podman and cnitool pass none), so the pod went to the agent's default tenant: name its ` +
        `tenant with the "tenant" key of the network config (see plugin/README.md), or ${create}`;
  }
}

/**
 * A StatefulSet pod keeps its addresses when recreated under the same name if it asks for it or
 * takes them from an IP group: its port IDs then derive from its name, not its UID.
 */
function isStable(pod: KubePod, interfaces: WantedInterface[]): boolean {
  if (!pod.ownerKinds.includes("StatefulSet")) return false;
  return pod.annotations[STABLE_ADDRESS] === "true" || interfaces.some((i) => i.ipGroup);
}

/** The interface name kubelet's runtime gives the cluster's default network (Multus: the same). */
export const PRIMARY_IFNAME = "eth0";

/**
 * The interfaces a pod's annotations ask for, in Kubernetes mode. Two cases attach one interface
 * only, because the caller is Multus delegating one attachment (see agent/README.md, "Knitter as a
 * Multus delegate"):
 * - the network config names a network ("network" or "networks", as a NetworkAttachmentDefinition's
 *   config does): the config wins over the annotation (undefined: the CNI request decides);
 * - CNI_IFNAME is not the primary interface and names one of the Multus annotation's attachments
 *   (its "interface", or net1, net2... by position, as Multus names them): that one; with no such
 *   attachment, the network named as the config (Multus gives a NAD's config its name).
 * The tenant stays the pod's namespace, as on kubelet's call: `ns/name` of another namespace is
 * found only if public (the manager looks a name up in the tenant, then among public networks), so
 * an annotation never reaches into another tenant's private network.
 */
function fromAnnotations(
  req: CniRequest,
  pod: KubePod,
  defaultNetwork: string | undefined,
): WantedInterface[] | undefined {
  const config = req.config ?? {};
  if (config.network !== undefined || config.networks !== undefined) return undefined;
  try {
    const asked = parsePodAnnotations(pod.annotations);
    const delegated = req.ifName !== PRIMARY_IFNAME && asked?.format !== "knitter";
    if (delegated) {
      const all = asked
        ? resolveAnnotated(asked, { primaryIfName: PRIMARY_IFNAME, defaultNetwork })
        : [];
      const one = all.find((i) => i.ifName === req.ifName && i.ifName !== PRIMARY_IFNAME);
      if (one) {
        const { namespace: _ns, ...w } = one;
        const routed = !!asked?.networks.some((n) => n.defaultRoute);
        return [{ ...w, defaultRoute: one.defaultRoute && routed }];
      }
      const named = str(config.name);
      if (named && DNS_LABEL.test(named) && asked) {
        return [{ network: named, ifName: req.ifName, defaultRoute: false }];
      }
    }
    if (!asked) return undefined;
    const interfaces = resolveAnnotated(asked, { primaryIfName: req.ifName, defaultNetwork });
    return interfaces.map(({ namespace: _ns, ...w }) => w);
  } catch (err) {
    if (err instanceof AnnotationError) {
      throw new CniError(CNI_CODE.invalidConfig, `Pod ${podName(req)}: ${err.message}`);
    }
    throw err;
  }
}

function podName(req: CniRequest): string {
  return `${req.args?.K8S_POD_NAMESPACE}/${req.args?.K8S_POD_NAME}`;
}

function fromCni(req: CniRequest, defaultNetwork: string | undefined): WantedInterface[] {
  const args = req.args ?? {};
  const config = req.config ?? {};
  let wanted = fromArgs(args.KNITTER_NETWORKS) ?? fromConfig(config.networks);
  if (!wanted || wanted.length === 0) {
    const network = str(config.network) ?? defaultNetwork;
    if (!network) {
      throw new CniError(
        CNI_CODE.invalidConfig,
        'No network requested and no default: set "networks" in the network config, KNITTER_NETWORKS in CNI_ARGS, or the agent\'s defaultNetwork',
      );
    }
    wanted = [{ network }];
  }
  const settled = settle(
    wanted,
    req.ifName,
    (message) => new CniError(CNI_CODE.invalidConfig, capitalize(message)),
  );
  // A fixed address or MAC comes from the interface's entry in the config; the primary one's also
  // from CNI_ARGS (IP=, MAC=, as the reference static and host-local plugins read them) and from
  // the runtime's ips / mac capabilities. Sources that disagree are refused.
  const rc = config.runtimeConfig ?? {};
  const env = CNI_CODE.invalidEnvironment;
  return settled.map((r, i) => {
    const w = wanted[i];
    const primary = i === 0;
    const { ip: _ip, mac: _mac, ...out }: WantedInterface = r;
    const ip = oneOf(
      r.ifName,
      "address",
      [
        ...given(`networks[${i}].ip in the network config`, w.ip),
        ...(primary ? [...given("IP= in CNI_ARGS", args.IP, env), ...ipsCapability(rc.ips)] : []),
      ].map((f) => ({ ...f, value: parseFixedIp(f) })),
      sameIp,
    );
    const mac = oneOf(
      r.ifName,
      "MAC",
      [
        ...given(`networks[${i}].mac in the network config`, w.mac),
        ...(primary
          ? [...given("MAC= in CNI_ARGS", args.MAC, env), ...given("runtimeConfig.mac", rc.mac)]
          : []),
      ].map((f) => ({ ...f, value: parseFixedMac(f) })),
      (a, b) => a === b,
    );
    if (ip) {
      Object.assign(out, { ip: ip.value.ip, ipFrom: ip.from });
      if (ip.value.prefix !== undefined) out.ipPrefix = ip.value.prefix;
    }
    if (mac) Object.assign(out, { mac: mac.value, macFrom: mac.from });
    return out;
  });
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

interface Wanted {
  network: string;
  ifName?: string;
  ip?: string;
  ipGroup?: string;
  mac?: string;
  defaultRoute?: boolean;
  claim?: string;
}

/** KNITTER_NETWORKS=control@eth1,data (network[@interface], comma separated). */
function fromArgs(text: string | undefined): Wanted[] | undefined {
  if (!text) return undefined;
  return text.split(",").map((part) => part.trim()).filter(Boolean).map((part) => {
    const [network, ifName] = part.split("@");
    return ifName ? { network, ifName } : { network };
  });
}

function fromConfig(list: unknown): Wanted[] | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) {
    throw new CniError(CNI_CODE.invalidConfig, '"networks" in the network config must be a list');
  }
  return list.map((item, i) => {
    if (typeof item === "string") return { network: item };
    if (item && typeof item === "object" && typeof item.name === "string") {
      return {
        network: item.name,
        ifName: str(item.interface),
        ip: str(item.ip),
        ipGroup: str(item.ipGroup),
        mac: str(item.mac),
        defaultRoute: item.defaultRoute === true,
        claim: str(item.claim),
      };
    }
    throw new CniError(
      CNI_CODE.invalidConfig,
      `networks[${i}] must be a network name or an object with "name" (and optional interface, ip, ipGroup, mac, defaultRoute, claim)`,
    );
  });
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

// ---- fixed addresses and MACs

/** One source's ask for a fixed address or MAC; `code` is the CNI error its bad value gets. */
interface Fixed {
  from: string;
  text: string;
  code: number;
}

/** The ask of one source, if it asks. */
function given(from: string, v: unknown, code: number = CNI_CODE.invalidConfig): Fixed[] {
  return v === undefined || v === null ? [] : [{ from, text: String(v), code }];
}

/**
 * runtimeConfig.bandwidth (the "bandwidth" capability, as the reference bandwidth plugin reads it:
 * rates in bits per second, bursts in bits), for the primary interface.
 */
function bandwidthCapability(v: unknown): Bandwidth | undefined {
  try {
    return parseBandwidth(v, "runtimeConfig.bandwidth");
  } catch (err) {
    throw new CniError(CNI_CODE.invalidConfig, (err as Error).message);
  }
}

/** runtimeConfig.ips (the "ips" capability): one address at most, for the primary interface. */
function ipsCapability(ips: unknown): Fixed[] {
  if (ips === undefined || ips === null) return [];
  if (!Array.isArray(ips) || ips.some((x) => typeof x !== "string")) {
    throw new CniError(CNI_CODE.invalidConfig, "runtimeConfig.ips must be a list of addresses");
  }
  if (ips.length === 0) return [];
  if (ips.length > 1) {
    throw new CniError(
      CNI_CODE.invalidConfig,
      `runtimeConfig.ips lists ${ips.length} addresses (${
        ips.join(", ")
      }); knitter gives an interface one address: ask for one, and for another network for another address`,
    );
  }
  return given("runtimeConfig.ips", ips[0]);
}

/** The one value several sources ask for, or none; sources that disagree are refused. */
function oneOf<T>(
  ifName: string,
  what: string,
  asked: (Fixed & { value: T })[],
  same: (a: T, b: T) => boolean,
): (Fixed & { value: T }) | undefined {
  const [first, ...rest] = asked;
  const other = rest.find((a) => !same(first.value, a.value));
  if (other) {
    throw new CniError(
      CNI_CODE.invalidConfig,
      `The ${what} of ${ifName} is asked for twice, differently: "${first.text}" (${first.from}) and "${other.text}" (${other.from}); ask for it once`,
    );
  }
  return first;
}

function sameIp(a: { ip: string; prefix?: number }, b: { ip: string; prefix?: number }): boolean {
  return a.ip === b.ip &&
    (a.prefix === undefined || b.prefix === undefined || a.prefix === b.prefix);
}

/** "10.1.0.5" or "10.1.0.5/24" (IPv6 alike): the address, lowercase, and the prefix if given. */
export function parseFixedIp(f: Fixed): { ip: string; prefix?: number } {
  const bad = (why: string) => new CniError(f.code, `${f.from} "${clip(f.text)}" ${why}`);
  const r = parseIpPrefix(f.text);
  if ("error" in r) {
    throw bad(
      r.part === "address"
        ? "is not an IP address (IPv4 like 10.1.0.5, or IPv6; a /prefix may follow)"
        : r.why,
    );
  }
  const slash = f.text.indexOf("/");
  const ip = (slash < 0 ? f.text : f.text.slice(0, slash)).toLowerCase();
  return r.prefix === undefined ? { ip } : { ip, prefix: r.prefix };
}

/** A MAC as "02:aa:bb:cc:dd:ee" ("-" separators are accepted); unicast and not all zero. */
export function parseFixedMac(f: Fixed): string {
  const bad = (why: string) => new CniError(f.code, `${f.from} "${clip(f.text)}" ${why}`);
  const mac = parseMac(f.text);
  if (mac === null) throw bad("is not a MAC address like 02:00:0a:01:00:05");
  const problem = macProblem(mac);
  if (problem) throw bad(problem);
  return mac;
}

/** Why a well-formed MAC cannot be an interface's, if it cannot. */
function macProblem(mac: string): string | undefined {
  const kind = macKind(mac);
  if (kind === "broadcast" || kind === "multicast") {
    return "is a multicast (or broadcast) address; an interface needs a unicast MAC, whose first octet is even (e.g. 02:...)";
  }
  if (kind === "zero") return "is the all-zero address, which no interface may have";
  return undefined;
}

/** Annotations check the MAC's form; whether it can be an interface's is checked here. */
function checkWantedMac(w: WantedInterface): void {
  const problem = w.mac === undefined ? undefined : macProblem(w.mac);
  if (problem) {
    throw new CniError(
      CNI_CODE.invalidConfig,
      `${w.macFrom ?? `The MAC asked for ${w.ifName}`} "${w.mac}" ${problem}`,
    );
  }
}

// ---- the request's identity

/**
 * Longest container ID the agent takes: it is part of the journal's keys (Deno KV: 2 KiB a key).
 * Runtimes use 64 hex digits.
 */
export const MAX_CONTAINER_ID = 1024;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** What the manager takes as a pod's UID; Kubernetes' own are UUIDs. */
const POD_UID = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$/;

/** The K8S_* arguments kubelet passes in CNI_ARGS, and what each must look like. */
const K8S_ARGS: [string, (v: string) => boolean, string][] = [
  [
    "K8S_POD_NAMESPACE",
    (v) => DNS_LABEL.test(v),
    "a namespace name (a lowercase DNS label: a-z, 0-9, '-', at most 63)",
  ],
  [
    "K8S_POD_NAME",
    (v) => DNS_SUBDOMAIN.test(v),
    "a pod name (a lowercase DNS subdomain: a-z, 0-9, '-', '.', at most 253)",
  ],
  [
    "K8S_POD_UID",
    (v) => POD_UID.test(v),
    "a pod UID (1-64 of A-Z, a-z, 0-9, '.', '_', '-', alphanumeric at both ends)",
  ],
  [
    "K8S_POD_INFRA_CONTAINER_ID",
    (v) => CNI_NAME_RE.test(v) && v.length <= MAX_CONTAINER_ID,
    "a container ID (alphanumeric first, then A-Z, a-z, 0-9, '_', '.', '-')",
  ],
];

/**
 * Refuses, with every problem at once, an ADD whose identity the agent cannot keep: a container ID
 * or K8S_* argument that is malformed. Nothing is made for such a request, so a DEL with the same
 * arguments never has anything to fail on.
 */
export function checkAddRequest(req: CniRequest): void {
  const problems: string[] = [];
  const id = req.containerId ?? "";
  if (!CNI_NAME_RE.test(id) || id.length > MAX_CONTAINER_ID) {
    problems.push(
      `CNI_CONTAINERID "${
        clip(id)
      }" must be 1-${MAX_CONTAINER_ID} characters, alphanumeric first, then A-Z, a-z, 0-9, '_', '.', '-'`,
    );
  }
  const args = req.args ?? {};
  for (const [key, ok, what] of K8S_ARGS) {
    const v = args[key];
    if (v !== undefined && v !== "" && !ok(v)) {
      problems.push(`CNI_ARGS ${key} "${clip(v)}" is not ${what}`);
    }
  }
  if (problems.length > 0) {
    throw new CniError(
      CNI_CODE.invalidEnvironment,
      `${problems.join("; ")}: the runtime must pass the sandbox's own values`,
    );
  }
}

function clip(v: string): string {
  return v.length > 64 ? `${v.slice(0, 61)}...` : v;
}

// ---- port IDs

/** The manager's limit on port IDs. */
const MAX_PORT_ID = 200;

/**
 * The manager's port ID for one interface of a pod: `OWNER-IFNAME` with what the manager does not
 * take replaced by "_". A non-stable ID too long for the manager, or ending in what it does not
 * take, keeps its start and ends in a hash of the whole, so that two IDs never collapse into one.
 * Stable IDs are kept as they were, since the monitor reads the pod's name out of them.
 */
export function portIdFor(owner: string, ifName: string): string {
  const id = `${owner}-${ifName}`.replace(/[^A-Za-z0-9._:-]/g, "_");
  if (owner.startsWith(STABLE_PREFIX)) return id.slice(0, MAX_PORT_ID);
  if (id.length <= MAX_PORT_ID && /[A-Za-z0-9]$/.test(id)) return id;
  const digest = createHash("sha256").update(`${owner}-${ifName}`).digest("hex").slice(0, 16);
  return `${id.slice(0, MAX_PORT_ID - digest.length - 1)}-${digest}`;
}
