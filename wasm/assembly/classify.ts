// Builders of table CLASSIFY (see ../../agent/PIPELINE.md).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  F_CLASSIFY_HOST_PRIORITY,
  F_CLASSIFY_HOST_TABLE,
  F_CLASSIFY_LOCAL_PRIORITY,
  F_CLASSIFY_LOCAL_TABLE,
  F_CLASSIFY_PHYSNET_PRIORITY,
  F_CLASSIFY_PHYSNET_TABLE,
  F_CLASSIFY_TUNNEL_PRIORITY,
  F_CLASSIFY_TUNNEL_TABLE,
  M_UNTAGGED,
  SAMPLE_DOMAIN,
  SP_SENT,
  T_FORWARD,
  T_SPOOF,
  VLAN,
} from "./generated/pipeline";
import { tunnelPort } from "./input";
import { putSample } from "./sample";
import { L_COOKIE, L_OFPORT, N_HOST_PORT, N_ID, N_PHYSNET, N_SEGMENT, N_TYPE } from "./layout";
import { begin, end, LINE_BOUND, putc, putDec, putHex, putNet, puts } from "./text";

export function classifyLocal(n: usize, p: usize): void {
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_CLASSIFY_LOCAL_TABLE,
    F_CLASSIFY_LOCAL_PRIORITY,
    LINE_BOUND,
  );
  puts(",in_port=");
  putDec(load<u32>(p, L_OFPORT));
  putc(44);
  puts(M_UNTAGGED);
  puts(",actions=");
  classifyLocalActions(n, p);
  end();
}

/** What every packet of local port p does first (a filtered mirror's flow too: mirror.ts). */
export function classifyLocalActions(n: usize, p: usize): void {
  // Flow records: what a local pod sends, sampled once, as it enters (../flow_sampling.ts).
  putSample(SAMPLE_DOMAIN, SP_SENT);
  puts("set_field:");
  putNet(n);
  puts("->reg0,set_field:");
  putHex(load<u32>(p, L_COOKIE));
  puts("->reg1,goto_table:");
  putDec(T_SPOOF);
}

export function classifyTunnel(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_CLASSIFY_TUNNEL_TABLE, F_CLASSIFY_TUNNEL_PRIORITY, LINE_BOUND);
  puts(",tun_id=");
  putHex(load<u32>(n, N_SEGMENT));
  puts(",in_port=");
  putDec(tunnelPort);
  putc(44);
  puts(M_UNTAGGED);
  puts(",actions=set_field:");
  putNet(n);
  puts("->reg0,goto_table:");
  putDec(T_FORWARD);
  end();
}

export function classifyPhysnet(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_CLASSIFY_PHYSNET_TABLE, F_CLASSIFY_PHYSNET_PRIORITY, LINE_BOUND);
  puts(",in_port=");
  putDec(load<u32>(n, N_PHYSNET));
  if (load<u32>(n, N_TYPE) == VLAN) {
    puts(",dl_vlan=");
    putDec(load<u32>(n, N_SEGMENT));
    puts(",actions=pop_vlan,set_field:");
  } else {
    putc(44);
    puts(M_UNTAGGED);
    puts(",actions=set_field:");
  }
  putNet(n);
  puts("->reg0,goto_table:");
  putDec(T_FORWARD);
  end();
}

/** ARP (`ip` false) or IPv4 from the network's host port: into the network as from outside. */
export function classifyHost(n: usize, proto: string): void {
  begin(load<u32>(n, N_ID), 0, F_CLASSIFY_HOST_TABLE, F_CLASSIFY_HOST_PRIORITY, LINE_BOUND);
  puts(proto);
  putDec(load<u32>(n, N_HOST_PORT));
  puts(",actions=set_field:");
  putNet(n);
  puts("->reg0,goto_table:");
  putDec(T_FORWARD);
  end();
}
