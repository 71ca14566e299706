/**
 * A network's DSCP marking in the flow compiler's input (`networks[].dscp`, PIPELINE.md "DSCP
 * marking"), from what the agent knows of its ports: as the manager's feed last said it, so that a
 * change made through the API reaches the pods that run already, else as the port said when it
 * was wired.
 */
import type { Port } from "@knitter/common";
import type { PortRef } from "./port_key.ts";

/** What a port says of its network's marking. */
export type DscpSource = Pick<Port, "tenant" | "id" | "networkId" | "networkDscp">;

/** The ports the feed listed, this node's own included (remote.ts). */
export interface PortFeed {
  port(ref: PortRef): Port | undefined;
}

/** The DSCP the network of `port` marks its pods' IP traffic with; undefined: none. */
export function networkDscp(port: DscpSource, feed: PortFeed): number | undefined {
  return (feed.port(port) ?? port).networkDscp;
}

/** Whether a feed event changes a port's network marking (the flows must be compiled again). */
export function remarked(before: DscpSource | undefined, after: DscpSource): boolean {
  return before?.networkDscp !== after.networkDscp;
}
