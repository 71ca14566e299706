// Builders of table FORWARD (see ../../agent/PIPELINE.md).
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  F_FLOOD_IN_PRIORITY,
  F_FLOOD_IN_TABLE,
  F_FLOOD_PRIORITY,
  F_FLOOD_TABLE,
  F_FORWARD_HOST_PRIORITY,
  F_FORWARD_HOST_TABLE,
  F_FORWARD_LOCAL_PRIORITY,
  F_FORWARD_LOCAL_TABLE,
  F_FORWARD_REMOTE_PRIORITY,
  F_FORWARD_REMOTE_TABLE,
  F_FROM_OUTSIDE_PRIORITY,
  F_FROM_OUTSIDE_TABLE,
  F_GATEWAY_DROP_PRIORITY,
  F_GATEWAY_DROP_TABLE,
  F_HOST_GUARD_PRIORITY,
  F_HOST_GUARD_TABLE,
  F_UNKNOWN_UNICAST_PRIORITY,
  F_UNKNOWN_UNICAST_TABLE,
  M_MCAST,
  VLAN,
  VXLAN,
} from "./generated/pipeline";
import { localAt, tunnelPort } from "./input";
import {
  B_NODES,
  buffer,
  L_COOKIE,
  L_MAC_TEXT,
  L_OFPORT,
  N_GW_MAC_TEXT,
  N_HOST_PORT,
  N_ID,
  N_LOCAL_COUNT,
  N_LOCAL_FIRST,
  N_NODE_COUNT,
  N_NODE_FIRST,
  N_PHYSNET,
  N_SEGMENT,
  N_TYPE,
  R_MAC_TEXT,
  R_NODE_TEXT,
  V4_SLOT,
} from "./layout";
import {
  actionsEnd,
  begin,
  end,
  LINE_BOUND,
  putc,
  putDec,
  putHex,
  putIpv4,
  putMac,
  putNet,
  puts,
  putSlot,
  wp,
} from "./text";

/** Anything else addressed to the gateway MAC (what no router routes): dropped. */
export function gatewayDrop(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_GATEWAY_DROP_TABLE, F_GATEWAY_DROP_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(n + N_GW_MAC_TEXT);
  puts(",actions=drop");
  end();
}

/** What a local port sends to the gateway MAC of a network with a host port: to the node. */
export function forwardHost(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_FORWARD_HOST_TABLE, F_FORWARD_HOST_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(n + N_GW_MAC_TEXT);
  puts(",actions=output:");
  putDec(load<u32>(n, N_HOST_PORT));
  end();
}

/** The gateway MAC from outside (reg1 0) never reaches the node: only local pods use it. */
export function hostGuard(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_HOST_GUARD_TABLE, F_HOST_GUARD_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",reg1=0,dl_dst=");
  putMac(n + N_GW_MAC_TEXT);
  puts(",actions=drop");
  end();
}

export function forwardLocal(n: usize, p: usize): void {
  begin(
    load<u32>(n, N_ID),
    load<u32>(p, L_COOKIE),
    F_FORWARD_LOCAL_TABLE,
    F_FORWARD_LOCAL_PRIORITY,
    LINE_BOUND,
  );
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(p + L_MAC_TEXT);
  puts(",actions=output:");
  putDec(load<u32>(p, L_OFPORT));
  end();
}

/** `output:P,` for every local port of the network, by ofport. */
function localOutputs(n: usize): void {
  const first = load<u32>(n, N_LOCAL_FIRST);
  const last = first + load<u32>(n, N_LOCAL_COUNT);
  for (let i = first; i < last; i++) {
    puts("output:");
    putDec(load<u32>(localAt(i), L_OFPORT));
    putc(44);
  }
}

function toPhysnet(n: usize): void {
  if (load<u32>(n, N_TYPE) == VLAN) {
    puts("push_vlan:0x8100,set_field:");
    putDec(4096 + load<u32>(n, N_SEGMENT));
    puts("->vlan_vid,");
  }
  puts("output:");
  putDec(load<u32>(n, N_PHYSNET));
}

function floodBound(n: usize): usize {
  return LINE_BOUND + <usize> load<u32>(n, N_LOCAL_COUNT) * 16 +
    <usize> load<u32>(n, N_NODE_COUNT) * 64;
}

export function floodIn(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_FLOOD_IN_TABLE, F_FLOOD_IN_PRIORITY, floodBound(n));
  puts(",reg0=");
  putNet(n);
  puts(",reg1=0,");
  puts(M_MCAST);
  puts(",actions=");
  const start = wp;
  localOutputs(n);
  actionsEnd(start);
  end();
}

export function fromOutside(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_FROM_OUTSIDE_TABLE, F_FROM_OUTSIDE_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",reg1=0,actions=drop");
  end();
}

export function forwardRemote(n: usize, r: usize): void {
  begin(load<u32>(n, N_ID), 0, F_FORWARD_REMOTE_TABLE, F_FORWARD_REMOTE_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",dl_dst=");
  putMac(r + R_MAC_TEXT);
  puts(",actions=");
  if (load<u32>(n, N_TYPE) == VXLAN) {
    puts("set_field:");
    putHex(load<u32>(n, N_SEGMENT));
    puts("->tun_id,set_field:");
    putSlot(r + R_NODE_TEXT, V4_SLOT);
    puts("->tun_dst,output:");
    putDec(tunnelPort);
  } else {
    toPhysnet(n);
  }
  end();
}

export function flood(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_FLOOD_TABLE, F_FLOOD_PRIORITY, floodBound(n));
  puts(",reg0=");
  putNet(n);
  putc(44);
  puts(M_MCAST);
  puts(",actions=");
  const start = wp;
  localOutputs(n);
  if (load<u32>(n, N_TYPE) != VXLAN) {
    toPhysnet(n);
  } else if (load<u32>(n, N_NODE_COUNT) > 0) {
    puts("set_field:");
    putHex(load<u32>(n, N_SEGMENT));
    puts("->tun_id");
    const nodes = buffer(B_NODES);
    const first = load<u32>(n, N_NODE_FIRST);
    const last = first + load<u32>(n, N_NODE_COUNT);
    for (let i = first; i < last; i++) {
      puts(",set_field:");
      putIpv4(<u32> load<u64>(nodes + (<usize> i << 3)));
      puts("->tun_dst,output:");
      putDec(tunnelPort);
    }
  }
  actionsEnd(start);
  end();
}

export function unknownUnicast(n: usize): void {
  begin(load<u32>(n, N_ID), 0, F_UNKNOWN_UNICAST_TABLE, F_UNKNOWN_UNICAST_PRIORITY, LINE_BOUND);
  puts(",reg0=");
  putNet(n);
  puts(",actions=");
  toPhysnet(n);
  end();
}
