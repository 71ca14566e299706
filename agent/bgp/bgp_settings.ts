/**
 * What the node's BIRD is told (agent/README.md, "BGP advertisement"): the config file's `bgp`
 * section, each field the Node's keys set overridden by theirs (node_keys.ts), the next hop and
 * router ID from the underlay address unless given. Pure.
 *
 * @module
 */
import type { AgentConfig } from "../config.ts";
import type { BirdSettings } from "./bird_config.ts";
import type { NodeBgp } from "./node_keys.ts";

/** The settings, or what is missing for them (the ASN of peers). */
export function bgpSettings(
  config: AgentConfig,
  node: NodeBgp = {},
): { settings: BirdSettings } | { missing: string } {
  const bgp = config.bgp!;
  const dir = stateDirOf(config);
  const hop4 = node.nextHop ?? bgp.nextHop ?? config.underlayIp;
  const localAsn = node.localAsn ?? bgp.localAsn;
  const peers = node.peers ?? bgp.peers ?? [];
  if (peers.length > 0 && localAsn === undefined) {
    return {
      missing: "the node has peers but no ASN: set the Node's label bgp.knitter.io/asn or " +
        "bgp.localAsn in the agent's config file",
    };
  }
  const nextHop6 = node.nextHop6 ?? bgp.nextHop6;
  return {
    settings: {
      ...(localAsn !== undefined && { localAsn }),
      routerId: node.routerId ?? bgp.routerId ?? hop4,
      peers,
      communities: node.communities ?? bgp.communities,
      nextHop: hop4,
      logFile: `${dir}/bird.log`,
      ...(nextHop6 !== undefined && { nextHop6 }),
    },
  };
}

/** BIRD's files live in the state directory (a run directory for an in-memory agent). */
export function stateDirOf(config: AgentConfig): string {
  return config.stateDir === ":memory:" ? "/run/knitter" : config.stateDir;
}
