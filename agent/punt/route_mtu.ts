/**
 * Which routes check a packet's size (agent/PIPELINE.md, "Router errors"): a route into a network
 * whose MTU is smaller than its source network's. A pod cannot send more than its own network's
 * MTU, so a route to an equal or larger MTU needs no check (and gets none: it costs a datapath
 * action per packet).
 * @module
 */
import type { FlowRoute } from "@knitter/wasm";

/** The routes, each with `mtu` set where its destination's MTU is the smaller. */
export function withMtuChecks(routes: FlowRoute[], mtuOf: Map<number, number>): FlowRoute[] {
  return routes.map((r) => {
    const from = mtuOf.get(r.from);
    const to = mtuOf.get(r.to);
    return from !== undefined && to !== undefined && to < from ? { ...r, mtu: to } : r;
  });
}
