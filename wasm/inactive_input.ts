/**
 * The inactive ports of the flow compiler's input: the local ports that are a live migration's
 * other end (their claim's traffic is another port's). They are in no other list of the model:
 * nothing is delivered to them and nothing they send goes on; one flow per port counts what its
 * guest sends from the claim's MAC (../agent/PIPELINE.md, "Inactive ports").
 *
 * @module
 */

/** A local port that is not its claim's active one. */
export interface FlowInactivePort {
  /** Ofport on br-int, 1..65279; no local port's, not the tunnel's. */
  ofport: number;
  /** Network id (one of `networks`). */
  network: number;
  /** The claim's MAC, as the guest sends from it. */
  mac: string;
  /** Node-local port number 1..2^31: the cookie's low 32 bits (no local port's). */
  cookie: number;
}

/** What the checks read of the rest of the model (flow_input.ts FlowInput). */
interface ModelAround {
  tunnelPort: number;
  networks: { id: number }[];
  localPorts: { ofport: number; cookie: number }[];
  inactivePorts?: FlowInactivePort[];
}

/** Highest ofport OVS assigns (OFPP_MAX is 0xff00). */
const MAX_OFPORT = 0xfeff;

/** Error code of the engine's check (assembly/inactive.ts): a malformed or multicast MAC. */
export const INACTIVE_BAD_MAC = 1;

/**
 * Checks the inactive ports against the rest of the model (types, ranges, references, no ofport
 * or cookie of another port) and returns their number of input words.
 */
export function checkInactiveShape(input: ModelAround): number {
  const ports = input.inactivePorts ?? [];
  if (!Array.isArray(ports)) throw new Error(`inactivePorts: expected an array`);
  const networks = new Set(input.networks.map((n) => n.id));
  const ofports = new Set([input.tunnelPort, ...input.localPorts.map((p) => p.ofport)]);
  const cookies = new Set(input.localPorts.map((p) => p.cookie));
  for (const [i, p] of ports.entries()) {
    const at = `inactivePorts[${i}]`;
    if (typeof p !== "object" || p === null) throw new Error(`${at}: expected an object`);
    const bad = (field: string, want: string) => {
      const value = JSON.stringify((p as unknown as Record<string, unknown>)[field]);
      throw new Error(`${at}.${field}: expected ${want}, got ${value}`);
    };
    if (!Number.isInteger(p.ofport) || p.ofport < 1 || p.ofport > MAX_OFPORT) {
      bad("ofport", `an integer in 1..${MAX_OFPORT}`);
    }
    if (ofports.has(p.ofport)) bad("ofport", "an ofport no other port of the model has");
    ofports.add(p.ofport);
    if (!networks.has(p.network)) bad("network", "the id of one of networks");
    if (typeof p.mac !== "string") bad("mac", "a string");
    if (!Number.isInteger(p.cookie) || p.cookie < 1 || p.cookie > 2 ** 31) {
      bad("cookie", `an integer in 1..${2 ** 31}`);
    }
    if (cookies.has(p.cookie)) bad("cookie", "a port number no other port of the model has");
    cookies.add(p.cookie);
  }
  return 1 + 4 * ports.length;
}

/** The Error of the engine's check: the MAC of inactive port `i`. */
export function inactiveError(input: ModelAround, i: number): Error {
  const mac = JSON.stringify(input.inactivePorts![i].mac);
  return new Error(
    `inactivePorts[${i}].mac: ${mac} is not a unicast MAC address (xx:xx:xx:xx:xx:xx)`,
  );
}
