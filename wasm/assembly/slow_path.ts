// The router's punts (see ../../agent/PIPELINE.md, "Router errors"): the flows that hand a routed
// packet to the agent's slow path, which answers as the gateway with an ICMP error. A TTL that
// runs out needs no flow of its own: routeTo's `dec_ttl` hands it up.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  F_GATEWAY_SELF_PRIORITY,
  F_GATEWAY_SELF_TABLE,
  F_ROUTE_MISS_PRIORITY,
  F_ROUTE_MISS_TABLE,
  PUNT_ACTION,
  PUNT_GATEWAY,
  PUNT_REGISTER,
  PUNT_UNREACHABLE,
} from "./generated/pipeline";
import { v4Slot } from "./input";
import { N_GW_SLOT, N_ID, V4_SLOT } from "./layout";
import { begin, end, LINE_BOUND, putHex, putNet, puts, putSlot } from "./text";

/** `set_field:WHY->reg5,CONTROLLER:65535`: the reason, then up to the agent. */
function punt(why: u32): void {
  puts("set_field:");
  putHex(why);
  puts("->");
  puts(PUNT_REGISTER);
  puts(",");
  puts(PUNT_ACTION);
}

/** IPv4 of a routed network that no route takes: destination unreachable. */
export function routeMiss(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_ROUTE_MISS_TABLE, F_ROUTE_MISS_PRIORITY, LINE_BOUND);
  puts(",ip,reg0=");
  putNet(n);
  puts(",actions=");
  punt(PUNT_UNREACHABLE);
  end();
}

/** IPv4 to the gateway's own address that it does not answer (not a ping): port unreachable. */
export function gatewaySelf(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_GATEWAY_SELF_TABLE, F_GATEWAY_SELF_PRIORITY, LINE_BOUND);
  puts(",ip,reg0=");
  putNet(n);
  puts(",nw_dst=");
  putSlot(v4Slot(load<u32>(n, N_GW_SLOT) - 1), V4_SLOT);
  puts(",actions=");
  punt(PUNT_GATEWAY);
  end();
}
