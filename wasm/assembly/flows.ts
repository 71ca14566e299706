// AssemblyScript source of the OpenFlow rule compiler (see ../../agent/PIPELINE.md), the one
// definition of both engines: ../build.ts builds it to WebAssembly (compileFlows) and, without
// SIMD, on to plain JavaScript (compileFlowsTs); ../flow_engines.ts loads them. It reads the
// pipeline's tables, priorities and texts from ../pipeline.ts (through generated/pipeline.ts) and
// the input codes from ../flow_input.ts.
//
// ../flows.ts checks the shape of the model (types and ranges of single fields) and writes it
// into the input area as u32 words plus one blob of ASCII strings read in order (layout at
// `compile`). Everything else happens here, by concern:
//
//   input.ts     decoding, address syntax (address.ts), references and uniqueness, grouping
//   route.ts     the routes: decoding and checks, and their builders (ARP, ROUTE, NEXT_HOP, SPOOF)
//   classify.ts, spoof.ts, arp.ts, forward.ts
//                one builder per flow kind, by table; builders.ts runs them for the whole model
//   text.ts      the writers of the line text and the line records
//   output.ts    the lines sorted by (cookie, text), without duplicates, joined by "\n"
//   layout.ts    the growable buffers and the layout of the model's records
//   keys.ts      the address rules asked for many texts at once (../flow_keys.ts)
//   inactive.ts  the flows of inactive ports (a live migration's other end), a third call
//   mirror.ts    the flows of filtered mirrors (copies of what a local port sends), a call too
//
// No managed objects: every array is a growable buffer in linear memory (heap.realloc on the TLSF
// heap of --runtime minimal), kept from one call to the next. No decorators (see bitmap.ts).

import { buildAll } from "./builders";
import { decode } from "./input";
import { parseRoutes } from "./route";
import { join } from "./output";
import { textRewind } from "./text";

export { errorArg, input } from "./input";
export { acl, aclErrorArg } from "./acl";
export { serviceErrorArg, services } from "./service";
export { outLen, outPtr } from "./output";
export { keyPtr, keys } from "./keys";
export { sampling } from "./sample";
export { inactive, inactiveErrorArg } from "./inactive";
export { mirrorErrorArg, mirrors } from "./mirror";

/**
 * Compiles the model in the input area: `words` u32 words, then the strings. Returns 0 and leaves
 * the lines in the output area (outPtr, outLen), or an error code (arguments: errorArg).
 *
 * Words: tunnelPort, networks, localPorts, remotePorts, total IPs; per network: id, type
 * (0 vxlan, 1 vlan, 2 flat), segmentId (0 if none), physnetPort (0 if none), 1 + the length
 * of gateway, of gatewayMac and of gateway6 (0 if none; their strings come first in the blob),
 * 1 + dscp (0 if none), hostPort (0 if none);
 * per local port:
 * ofport, network, cookie, IP count, then the length of the MAC and of each IP; per remote port:
 * network, IP count, then the length of the MAC, of nodeIp and of each IP; the route count, and
 * per route: from, to, the length of dst and 1 + the length of via (0 if none). The strings follow
 * in the same order.
 */
export function compile(words: u32): i32 {
  let rc = decode(words);
  if (rc != 0) return rc;
  rc = parseRoutes();
  if (rc != 0) return rc;
  textRewind();
  buildAll();
  join();
  return 0;
}
