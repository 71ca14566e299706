/**
 * The bridge's controller for the router's slow path, in OVSDB: ovs-vswitchd listens on a unix
 * socket beside the bridge's management socket (`punix:RUNDIR/BRIDGE.slowpath`) and the agent
 * connects to it (router_slow_path.ts). A Controller row, not the management socket, because its
 * `controller_rate_limit` / `controller_burst_limit` are the switch's own budget of packet-ins: a
 * pod that floods what the flows punt is held back in ovs-vswitchd, where its packets are queued per
 * ingress port and served in turn, before they reach the agent. The bridge's fail mode stays
 * secure: without the agent connected, nothing is switched otherwise.
 * @module
 */
import type { Ovs } from "../dataplane/ovs.ts";

/** Packet-ins per second, and the burst, that ovs-vswitchd sends up (its minimums: 100 and 25). */
export const SWITCH_RATE_LIMIT = { rate: 100, burst: 25 };

/** The socket the slow path connects to. */
export function slowPathSocket(bridge: string, rundir?: string): string {
  const dir = rundir ?? Deno.env.get("OVS_RUNDIR") ?? "/var/run/openvswitch";
  return `${dir}/${bridge}.slowpath`;
}

/**
 * Makes the slow path's socket the bridge's one controller, with the switch's rate limit; leaves a
 * controller that is already so alone (setting it again would drop the connection).
 */
export async function ensureSlowPathController(ovs: Ovs, bridge: string): Promise<string> {
  const socket = slowPathSocket(bridge, ovs.target.rundir);
  const target = `punix:${socket}`;
  const wanted = [
    `controller_rate_limit=${SWITCH_RATE_LIMIT.rate}`,
    `controller_burst_limit=${SWITCH_RATE_LIMIT.burst}`,
    // A unix socket needs no in-band flows; out-of-band says so.
    "connection_mode=out-of-band",
  ];
  const current = (await ovs.vsctl(["get-controller", bridge])).trim();
  const set = current === target ? [] : ["set-controller", bridge, target, "--"];
  await ovs.vsctl([...set, "set", "Controller", bridge, ...wanted]);
  return socket;
}
