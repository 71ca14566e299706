/**
 * The BIRD 2 configuration of a node, as data then text (agent/README.md, "BGP advertisement"):
 * one static protocol per family holding what the node advertises, and one BGP session per peer
 * that exports only those routes, with the node's next hop and communities, and imports nothing
 * (the node's routing stays the agent's). Pure: bgp_speaker.ts writes it and reloads BIRD.
 *
 * @module
 */
import { formatIp, parseIp } from "@knitter/common/address";

/** A BGP neighbour of the node (the agent's `bgp.peers`). */
export interface BgpPeer {
  address: string;
  asn: number;
  /** Seconds without a message before the session drops (BIRD's default 240); 3 = fast loss. */
  holdTime?: number;
  /** TCP MD5 password of the session. */
  password?: string;
}

/** What the node says to its peers. */
export interface BirdSettings {
  /** The node's ASN; needed when there are peers (bgp_settings.ts sees to it). */
  localAsn?: number;
  /** BIRD's router ID: an IPv4 address. */
  routerId: string;
  peers: BgpPeer[];
  /** Standard communities ("ASN:VALUE") added to every advertised route. */
  communities: string[];
  /** The next hop of IPv4 routes: an address of this node the peers reach. */
  nextHop: string;
  /** The next hop of IPv6 routes; absent: no IPv6 route is advertised. */
  nextHop6?: string;
  /** Where BIRD logs (it runs in the background); absent: syslog. */
  logFile?: string;
}

/** The prefixes advertised now (CIDRs and the local pods' host routes), per family. */
export interface Advertised {
  v4: string[];
  v6: string[];
}

const HEADER =
  "# Written by the Knitter agent (agent/bgp/bird_config.ts); changes are overwritten.";

/** The whole configuration file. */
export function birdConfig(s: BirdSettings, routes: Advertised): string {
  const v6 = s.nextHop6 !== undefined;
  return [
    HEADER,
    `router id ${s.routerId};`,
    ...(s.logFile !== undefined ? [`log "${s.logFile}" all;`] : []),
    "",
    // BGP needs to know the node's interfaces to reach directly connected peers.
    "protocol device {",
    "  scan time 10;",
    "}",
    "",
    ...staticProtocol("knitter4", "ipv4", routes.v4),
    ...(v6 ? staticProtocol("knitter6", "ipv6", routes.v6) : []),
    ...exportFilter(s.communities),
    ...s.peers.flatMap((p) => bgpProtocol(s, p)),
  ].join("\n");
}

/** Unreachable static routes: BGP announces them; no kernel protocol installs them here. */
function staticProtocol(name: string, family: string, prefixes: string[]): string[] {
  return [
    `protocol static ${name} {`,
    `  ${family};`,
    ...[...prefixes].sort().map((p) => `  route ${p} unreachable;`),
    "}",
    "",
  ];
}

/** Only the static protocols' routes leave, with the communities. */
function exportFilter(communities: string[]): string[] {
  return [
    "filter knitter_export {",
    "  if source != RTS_STATIC then reject;",
    ...communities.map((c) => `  bgp_community.add((${c.replace(":", ",")}));`),
    "  accept;",
    "}",
    "",
  ];
}

function bgpProtocol(s: BirdSettings, p: BgpPeer): string[] {
  if (s.localAsn === undefined) throw new Error(`BGP peer ${p.address} without a local ASN`);
  return [
    `protocol bgp ${peerName(p.address)} {`,
    `  local as ${s.localAsn};`,
    `  neighbor ${p.address} as ${p.asn};`,
    ...(p.holdTime !== undefined ? [`  hold time ${p.holdTime};`] : []),
    ...(p.password !== undefined ? [`  password "${p.password}";`] : []),
    "  ipv4 {",
    "    import none;",
    "    export filter knitter_export;",
    `    next hop address ${s.nextHop};`,
    "  };",
    ...(s.nextHop6 !== undefined
      ? [
        "  ipv6 {",
        "    import none;",
        "    export filter knitter_export;",
        `    next hop address ${s.nextHop6};`,
        "  };",
      ]
      : []),
    "}",
    "",
  ];
}

/**
 * The BGP protocol of a peer, as `birdc show protocols` names it: after its address, so that a
 * reload (`birdc configure`) keeps the session of a peer still there whatever the others do.
 */
export function peerName(address: string): string {
  const ip = parseIp(address);
  return `peer_${(ip ? formatIp(ip) : address).replace(/[.:]/g, "_")}`;
}
