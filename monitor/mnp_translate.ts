/**
 * One MultiNetworkPolicy, for one network, as security group rules (pure: what the cluster looks
 * like comes in as a World). Kubernetes semantics: the policy types say which directions the
 * selected pods are restricted in; an entry allows its peers on its ports; peers are pods (by pod
 * and namespace selectors: their addresses on that network, merged into the fewest CIDRs) or
 * ipBlocks (the CIDR minus its `except`); no peers means anyone, no ports every port. What cannot
 * be expressed (SCTP, named ports, a bad selector or CIDR) is a problem that names where it is,
 * and allows nothing: a policy is never wider than it says.
 */
import type { SecurityProtocol, SecurityRule } from "@knitter/common";
import { type Cidr, formatCidr, networkOf, parseIp, parseIpPrefix } from "@knitter/common/address";
import { coverAddresses, subtractCidrs } from "./cidr_set.ts";
import {
  type Labels,
  type LabelSelector,
  matchesSelector,
  selectorProblem,
} from "./label_selector.ts";
import type { MultiNetworkPolicy, PolicyPeer, PolicyPort } from "./mnp_types.ts";

/** A network exactly: its tenant (the namespace that owns it) and name. */
export interface NetRef {
  tenant: string;
  name: string;
}

/** A network as `policy-for` names it: "net" (the policy's namespace's, or a public one) or "ns/net". */
export interface NamedNet {
  tenant?: string;
  name: string;
}

export interface PodView {
  namespace: string;
  name: string;
  uid: string;
  labels: Labels;
}

/** What the cluster looks like, as the monitor's memory holds it. */
export interface World {
  /** Every namespace, with its labels. */
  namespaces: Map<string, Labels>;
  pods: PodView[];
  /** The addresses of the pod's ports on the network (IPv4 and IPv6). */
  addresses(uid: string, net: NetRef): string[];
}

export interface Directions {
  ingress: boolean;
  egress: boolean;
}

export interface Translation {
  rules: SecurityRule[];
  problems: string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The networks of the `policy-for` annotation; a problem for a missing or malformed one. */
export function parsePolicyFor(text: string | undefined): { nets: NamedNet[]; problem?: string } {
  if (text === undefined || text.trim() === "") {
    return {
      nets: [],
      problem:
        'no annotation "k8s.v1.cni.cncf.io/policy-for": name the networks the policy is for ("net" or "namespace/net", comma separated)',
    };
  }
  const nets: NamedNet[] = [];
  for (const item of text.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const parts = item.split("/");
    if (parts.length > 2 || !parts.every((p) => DNS_LABEL.test(p))) {
      return {
        nets: [],
        problem:
          `policy-for: "${item}" is not "net" or "namespace/net" (lowercase DNS labels); nothing of the policy applies until it is`,
      };
    }
    nets.push(parts.length === 2 ? { tenant: parts[0], name: parts[1] } : { name: parts[0] });
  }
  return { nets };
}

/** The directions the policy restricts, as Kubernetes defaults them. */
export function directionsOf(
  policy: MultiNetworkPolicy,
): { types: Directions; problems: string[] } {
  const spec = policy.spec;
  if (spec.policyTypes === undefined || spec.policyTypes.length === 0) {
    // Kubernetes adds Egress only for a non-empty egress list: `egress: []` leaves egress open.
    return { types: { ingress: true, egress: (spec.egress?.length ?? 0) > 0 }, problems: [] };
  }
  const problems = spec.policyTypes.filter((t) => t !== "Ingress" && t !== "Egress").map((t) =>
    `spec.policyTypes: "${t}" is neither Ingress nor Egress`
  );
  return {
    types: {
      ingress: spec.policyTypes.includes("Ingress"),
      egress: spec.policyTypes.includes("Egress"),
    },
    problems,
  };
}

/** The pods of the policy's namespace its podSelector selects (none when it is malformed). */
export function selectedPods(policy: MultiNetworkPolicy, world: World): PodView[] {
  const s = policy.spec.podSelector ?? {};
  if (selectorProblem(s)) return [];
  return world.pods.filter((p) =>
    p.namespace === policy.metadata.namespace && matchesSelector(s, p.labels)
  );
}

/** The rules of the policy on the network: ingress and egress, per entry, peer and port. */
export function translate(policy: MultiNetworkPolicy, net: NetRef, world: World): Translation {
  const { types, problems } = directionsOf(policy);
  const podProblem = selectorProblem(policy.spec.podSelector ?? {});
  if (podProblem) problems.push(`spec.podSelector: ${podProblem}`);
  const rules: SecurityRule[] = [];
  const sections = [
    { on: types.ingress, direction: "ingress" as const, field: "ingress", peers: "from" },
    { on: types.egress, direction: "egress" as const, field: "egress", peers: "to" },
  ];
  for (const s of sections) {
    if (!s.on) continue;
    const entries = (policy.spec[s.field as "ingress"] ?? []) as Record<string, unknown>[];
    for (const [i, entry] of entries.entries()) {
      const at = `spec.${s.field}[${i}]`;
      const peers = peerCidrs(
        entry[s.peers] as PolicyPeer[] | undefined,
        `${at}.${s.peers}`,
        policy,
        net,
        world,
        problems,
      );
      const ports = portSpecs(entry.ports as PolicyPort[] | undefined, `${at}.ports`, problems);
      for (const peer of peers) {
        for (const port of ports) {
          const rule: SecurityRule = { direction: s.direction, protocol: port.protocol };
          if (port.ports !== undefined) rule.ports = port.ports;
          if (peer !== undefined) rule.peer = { cidr: formatCidr(peer) };
          rules.push(rule);
        }
      }
    }
  }
  return { rules: unique(rules), problems };
}

/** The CIDRs of an entry's peers; [undefined] (anyone) when it names none. */
function peerCidrs(
  peers: PolicyPeer[] | undefined,
  at: string,
  policy: MultiNetworkPolicy,
  net: NetRef,
  world: World,
  problems: string[],
): (Cidr | undefined)[] {
  if (peers === undefined || peers.length === 0) return [undefined];
  const out: Cidr[] = [];
  for (const [i, peer] of peers.entries()) {
    const where = `${at}[${i}]`;
    const selectors = peer.podSelector !== undefined || peer.namespaceSelector !== undefined;
    if (peer.ipBlock !== undefined && selectors) {
      problems.push(`${where}: ipBlock cannot go with podSelector or namespaceSelector`);
    } else if (peer.ipBlock !== undefined) {
      out.push(...ipBlockCidrs(peer.ipBlock.cidr, peer.ipBlock.except ?? [], where, problems));
    } else if (selectors) {
      out.push(...podCidrs(peer, where, policy, net, world, problems));
    } else {
      problems.push(`${where}: names no podSelector, namespaceSelector or ipBlock`);
    }
  }
  return out;
}

function ipBlockCidrs(cidr: string, except: string[], at: string, problems: string[]): Cidr[] {
  const whole = cidrOf(cidr, `${at}.ipBlock.cidr`, problems);
  if (!whole) return [];
  const holes: Cidr[] = [];
  for (const [i, e] of except.entries()) {
    const hole = cidrOf(e, `${at}.ipBlock.except[${i}]`, problems);
    if (!hole) return [];
    const inside = hole.family === whole.family && hole.base >= whole.base &&
      hole.base + hole.size <= whole.base + whole.size;
    if (!inside) {
      problems.push(`${at}.ipBlock.except[${i}]: ${e} is not inside ${cidr}`);
      return [];
    }
    holes.push(hole);
  }
  return subtractCidrs(whole, holes);
}

function cidrOf(text: string, at: string, problems: string[]): Cidr | undefined {
  const r = parseIpPrefix(text ?? "", "required");
  if ("error" in r) {
    problems.push(`${at}: ${r.error}`);
    return undefined;
  }
  return networkOf(r.ip, r.prefix!);
}

/** The addresses on `net` of the pods a peer's selectors name, as the fewest CIDRs. */
function podCidrs(
  peer: PolicyPeer,
  at: string,
  policy: MultiNetworkPolicy,
  net: NetRef,
  world: World,
  problems: string[],
): Cidr[] {
  for (
    const [field, s] of [["podSelector", peer.podSelector], [
      "namespaceSelector",
      peer.namespaceSelector,
    ]] as [string, LabelSelector | undefined][]
  ) {
    const problem = s && selectorProblem(s);
    if (problem) {
      problems.push(`${at}.${field}: ${problem}`);
      return [];
    }
  }
  const nsSelector = peer.namespaceSelector;
  const inNamespace = (ns: string) =>
    nsSelector === undefined
      ? ns === policy.metadata.namespace
      : matchesSelector(nsSelector, world.namespaces.get(ns) ?? {}) && world.namespaces.has(ns);
  const pods = world.pods.filter((p) =>
    inNamespace(p.namespace) && matchesSelector(peer.podSelector ?? {}, p.labels)
  );
  const ips = pods.flatMap((p) => world.addresses(p.uid, net)).map(parseIp).filter((ip) =>
    ip !== null
  );
  return coverAddresses(ips);
}

interface PortSpec {
  protocol: SecurityProtocol;
  ports?: string;
}

/** An entry's ports as protocol and range; every protocol and port when it names none. */
function portSpecs(ports: PolicyPort[] | undefined, at: string, problems: string[]): PortSpec[] {
  if (ports === undefined || ports.length === 0) return [{ protocol: "any" }];
  const out: PortSpec[] = [];
  for (const [i, p] of ports.entries()) {
    const where = `${at}[${i}]`;
    const protocol = (p.protocol ?? "TCP").toUpperCase();
    if (protocol !== "TCP" && protocol !== "UDP") {
      problems.push(
        `${where}.protocol: ${p.protocol} is not supported (TCP and UDP are); this entry allows nothing on it`,
      );
      continue;
    }
    const spec: PortSpec = { protocol: protocol === "TCP" ? "tcp" : "udp" };
    if (typeof p.port === "string" && !/^\d+$/.test(p.port)) {
      problems.push(
        `${where}.port: the named port "${p.port}" is not supported; give its number`,
      );
      continue;
    }
    if (p.port !== undefined) {
      const first = Number(p.port);
      const last = p.endPort ?? first;
      if (!(first >= 1 && last <= 65535 && first <= last && Number.isInteger(last))) {
        problems.push(`${where}: port ${p.port}${p.endPort ? `-${p.endPort}` : ""} is not 1-65535`);
        continue;
      }
      spec.ports = first === last ? String(first) : `${first}-${last}`;
    } else if (p.endPort !== undefined) {
      problems.push(`${where}.endPort: needs port`);
      continue;
    }
    out.push(spec);
  }
  return out;
}

function unique(rules: SecurityRule[]): SecurityRule[] {
  const seen = new Set<string>();
  return rules.filter((r) => {
    const k = JSON.stringify(r);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
