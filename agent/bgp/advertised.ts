/**
 * What a node advertises (agent/README.md, "BGP advertisement"), from the ports of the networks
 * whose manager record says `advertise`: each such network's CIDRs (IPv4 and IPv6) from the nodes
 * that host its pods (or from every node, `advertiseFrom: "all"`), and a host route (/32, /128) for
 * each of this node's own pods, so the fabric sends a pod's traffic straight to its node: a node
 * delivers to its local pods only (its host port's flows keep to them), never on through the
 * tunnel. Also the floating addresses (/32, and /128 for an IPv6 one) of each of this node's pods
 * that has one, whatever its network (the node NATs it: dataplane/floating_nft.ts): they follow the
 * pod from node to node.
 *
 * @module
 */
import type { Port } from "@knitter/common";
import { bitsOf, formatCidr, networkOf, parseIpPrefix } from "@knitter/common/address";
import type { Advertised } from "./bird_config.ts";
import { managerSaysActive } from "../dataplane/migration.ts";

export interface AdvertisedInput {
  /** This node's ports, as the feed has them now. */
  local: Port[];
  /** The networks whose host port is set up here: only they can take traffic in. */
  ready: ReadonlySet<string>;
  /** Every port the agent's view holds (for "all"). */
  all: Iterable<Port>;
  from: "hosting" | "all";
}

export function advertisedRoutes(input: AdvertisedInput): Advertised {
  const out = { v4: new Set<string>(), v6: new Set<string>() };
  for (const p of input.local) {
    if (!input.ready.has(p.networkId)) continue;
    if (managerSaysActive(p)) addFloating(out, p);
    if (p.networkAdvertise === true) addPort(out, p, true);
  }
  if (input.from === "all") {
    for (const p of input.all) if (p.networkAdvertise === true) addPort(out, p, false);
  }
  return { v4: [...out.v4].sort(), v6: [...out.v6].sort() };
}

/** The port's floating addresses (its active port's): a /32 and a /128. */
function addFloating(out: { v4: Set<string>; v6: Set<string> }, p: Port): void {
  if (p.floating !== undefined) out.v4.add(`${p.floating}/32`);
  if (p.floating6 !== undefined) out.v6.add(`${p.floating6}/128`);
}

/** The port's network CIDRs, and its own addresses as host routes (`host`). */
function addPort(out: { v4: Set<string>; v6: Set<string> }, p: Port, host: boolean): void {
  for (const text of [p.address, p.address6]) {
    if (text === undefined) continue;
    const parsed = parseIpPrefix(text, "required");
    if ("error" in parsed) continue;
    const set = parsed.ip.family === 4 ? out.v4 : out.v6;
    set.add(formatCidr(networkOf(parsed.ip, parsed.prefix!)));
    const bits = bitsOf(parsed.ip.family);
    if (host && parsed.prefix !== bits) set.add(formatCidr(networkOf(parsed.ip, bits)));
  }
}
