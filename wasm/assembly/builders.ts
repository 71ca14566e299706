// Runs the per-table builders for the whole model: the defaults, then each network's flows
// and its ports', in the order their lines sort in (by table, then text) as far as it is known
// without looking at the addresses, so that sorting has little left to do.
// Part of the AssemblyScript flow compiler (flows.ts is the entry); built by ../build.ts.

import {
  D_ARP,
  D_CLASSIFY,
  D_FORWARD,
  D_NEXT_HOP,
  D_ROUTE,
  D_SPOOF,
  P_DEFAULT,
  T_ARP,
  T_CLASSIFY,
  T_FORWARD,
  T_NEXT_HOP,
  T_ROUTE,
  T_SPOOF,
  VXLAN,
} from "./generated/pipeline";
import {
  arpOwner,
  arpReply,
  arpReplyShared,
  gatewayLinkGuard,
  gatewayNd,
  gatewayPing,
  ndAdvert,
  ndGuard,
  ndReplyShared,
  ndSolicit,
} from "./arp";
import { classifyHost, classifyLocal, classifyPhysnet, classifyTunnel } from "./classify";
import {
  flood,
  floodIn,
  forwardHost,
  forwardLocal,
  forwardRemote,
  fromOutside,
  gatewayDrop,
  hostGuard,
  unknownUnicast,
} from "./forward";
import { localAt, net, netCount, remoteAt, v4Slot, v6Gateways, v6Slot } from "./input";
import {
  B_NET_ORDER,
  buffer,
  L_COOKIE,
  L_MAC,
  L_V4_COUNT,
  L_V4_FIRST,
  L_V6_COUNT,
  L_V6_FIRST,
  N_ADVERTS,
  N_GW6_SLOT,
  N_GW_MAC,
  N_GW_SLOT,
  N_GW_V6,
  N_HOST_PORT,
  N_LOCAL_COUNT,
  N_LOCAL_FIRST,
  N_REMOTE_COUNT,
  N_REMOTE_FIRST,
  N_TYPE,
  R_MAC,
  R_V4_COUNT,
  R_V4_FIRST,
} from "./layout";
import { hostExit, routeFlows, routeIn } from "./route";
import { raSolicit } from "./slow_path";
import { spoofArp, spoofDad, spoofIpv4, spoofIpv6 } from "./spoof";
import { begin, end, LINE_BOUND, putDec, puts } from "./text";

/** The default flow of `table`, with the actions FLOW_TABLES gives it (D_*). */
function tableDefault(table: u32, actions: string): void {
  begin(0, 0, table, P_DEFAULT, LINE_BOUND);
  puts(",actions=");
  puts(actions);
  end();
}

/** The default flow of each table; ARP_REPLY's is the shared reply. */
function defaults(): void {
  tableDefault(T_CLASSIFY, D_CLASSIFY);
  tableDefault(T_SPOOF, D_SPOOF);
  tableDefault(T_ARP, D_ARP);
  arpReplyShared();
  if (v6Gateways) ndReplyShared();
  tableDefault(T_ROUTE, D_ROUTE);
  tableDefault(T_NEXT_HOP, D_NEXT_HOP);
  tableDefault(T_FORWARD, D_FORWARD);
}

function localFlows(n: usize, p: usize): void {
  classifyLocal(n, p);
  const cookie = load<u32>(p, L_COOKIE);
  const v4 = load<u32>(p, L_V4_FIRST);
  const v4End = v4 + load<u32>(p, L_V4_COUNT);
  const v6 = load<u32>(p, L_V6_FIRST);
  const v6End = v6 + load<u32>(p, L_V6_COUNT);
  if (v4End > v4) spoofArp(n, p, 0);
  for (let i = v4; i < v4End; i++) spoofArp(n, p, v4Slot(i));
  if (v6End > v6) spoofDad(n, p);
  for (let i = v4; i < v4End; i++) spoofIpv4(n, p, v4Slot(i));
  // One past the IPv6 addresses stands for link-local (fe80::/10).
  if (v6End > v6) { for (let i = v6; i <= v6End; i++) spoofIpv6(n, p, i < v6End ? v6Slot(i) : 0); }
  for (let i = v4; i < v4End; i++) arpReply(n, cookie, load<u64>(p, L_MAC), v4Slot(i));
  for (let i = v4; i < v4End; i++) arpOwner(n, p, v4Slot(i));
  if (v6End > v6) {
    ndSolicit(n, p, false);
    ndSolicit(n, p, true);
    for (let i = v6; i <= v6End; i++) {
      const ip = i < v6End ? v6Slot(i) : 0;
      ndAdvert(n, p, ip, false);
      ndAdvert(n, p, ip, true);
    }
  }
  forwardLocal(n, p);
}

function networkFlows(n: usize): void {
  const vxlan = load<u32>(n, N_TYPE) == VXLAN;
  if (vxlan) classifyTunnel(n);
  else classifyPhysnet(n);
  const hostPort = load<u32>(n, N_HOST_PORT);
  // A host port carries each family the network has a gateway of: IPv4 (`gw`, unless it is
  // IPv6), IPv6 (a dual-stack network's `gw6`, or an IPv6-only network's `gw`).
  const gw = load<u32>(n, N_GW_SLOT);
  const gw6 = load<u32>(n, N_GW6_SLOT);
  const hostV4 = hostPort != 0 && gw != 0 && load<u32>(n, N_GW_V6) == 0;
  const hostV6 = hostPort != 0 && (gw6 != 0 || load<u32>(n, N_GW_V6) != 0);
  if (hostV4) {
    classifyHost(n, ",arp,in_port=");
    classifyHost(n, ",ip,in_port=");
  }
  if (hostV6) classifyHost(n, ",ipv6,in_port=");
  const rFirst = load<u32>(n, N_REMOTE_FIRST);
  const rLast = rFirst + load<u32>(n, N_REMOTE_COUNT);
  for (let i = rFirst; i < rLast; i++) {
    const r = remoteAt(i);
    const v4 = load<u32>(r, R_V4_FIRST);
    const v4End = v4 + load<u32>(r, R_V4_COUNT);
    const mac = load<u64>(r, R_MAC);
    for (let k = v4; k < v4End; k++) arpReply(n, 0, mac, v4Slot(k));
  }
  // The gateway is answered like a port of the network (arpReply), and answers pings.
  if (gw != 0 && load<u32>(n, N_GW_V6) == 0) {
    arpReply(n, 0, load<u64>(n, N_GW_MAC), v4Slot(gw - 1));
    gatewayPing(n, v4Slot(gw - 1), false);
  } else if (gw != 0) {
    gatewayPing(n, v6Slot(gw - 1), true);
    gatewayNd(n, v6Slot(gw - 1));
  }
  if (gw6 != 0) {
    gatewayPing(n, v6Slot(gw6 - 1), true);
    gatewayNd(n, v6Slot(gw6 - 1));
  }
  ndGuard(n, 135);
  ndGuard(n, 136);
  // The gateway advertises: solicitations to the slow path, no pod may advertise, and the
  // advertisements' source (the gateway's link-local address) is answered.
  if (load<u32>(n, N_ADVERTS) != 0) {
    raSolicit(n);
    ndGuard(n, 134);
    gatewayNd(n, 0, true);
    gatewayLinkGuard(n);
  }
  if (!vxlan) unknownUnicast(n);
  // With a host port, what reaches the gateway MAC goes to the node: IP through ROUTE (routes
  // first, hostExit below them), ARP replies, neighbour advertisements and the rest straight.
  if (gw != 0 && hostPort != 0) {
    if (hostV4) {
      routeIn(n);
      hostExit(n);
    }
    if (hostV6) {
      routeIn(n, true);
      hostExit(n, true);
    }
    forwardHost(n);
    hostGuard(n);
  } else if (gw != 0) gatewayDrop(n);
  flood(n);
  for (let i = rFirst; i < rLast; i++) forwardRemote(n, remoteAt(i));
  fromOutside(n);
  floodIn(n);
  const lFirst = load<u32>(n, N_LOCAL_FIRST);
  const lLast = lFirst + load<u32>(n, N_LOCAL_COUNT);
  for (let i = lFirst; i < lLast; i++) localFlows(n, localAt(i));
}

/** Renders every line of the decoded model into the text area, one record each. */
export function buildAll(): void {
  defaults();
  for (let i: u32 = 0; i < netCount; i++) {
    networkFlows(net(<u32> load<u64>(buffer(B_NET_ORDER) + (<usize> i << 3))));
  }
  routeFlows();
}
