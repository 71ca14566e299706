/**
 * The mirror filters of the flow compiler's input: per rule of a filtered mirror, what one local
 * source port sends that is copied to an output port (a collector's, or a mirror tunnel's) before
 * the pipeline goes on with it (../agent/PIPELINE.md, "Filtered mirrors"). Rules read as a
 * security group's egress rule: a protocol, a destination port range and the remote IPv4 CIDR.
 *
 * @module
 */

/** One rule of a filtered mirror on one source port. */
export interface FlowMirrorFilter {
  /** Ofport of the source: a local port of the model. */
  source: number;
  /** Ofport the copies go to: the collector's local port, or the mirror's tunnel port. */
  output: number;
  protocol: (typeof MIRROR_PROTOCOLS)[number];
  /** TCP and UDP only: the destination port range; absent, every port. */
  portMin?: number;
  portMax?: number;
  /** The remote end: an IPv4 CIDR ("10.1.0.0/24") the pod sends to; absent, any. */
  remote?: string;
}

/** Protocol codes, in the encoding the engine reads (assembly/mirror.ts). */
export const MIRROR_PROTOCOLS = ["tcp", "udp", "icmp", "any"] as const;

/** Highest ofport OVS assigns (OFPP_MAX is 0xff00). */
const MAX_OFPORT = 0xfeff;

/** Error code of the engine's check: the source is no local port of the model. */
export const MIRROR_UNKNOWN_SOURCE = 1;

/** Words per rule in the input area (layout at `mirrors` in assembly/mirror.ts). */
export const MIRROR_WORDS = 7;

/** A rule's remote CIDR as the engine reads it: the address as a number and the prefix. */
export function parseMirrorRemote(text: string): { v4: number; prefix: number } | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(text);
  if (!m) return null;
  const octets = m.slice(1, 5).map(Number);
  const prefix = m[5] === undefined ? 32 : Number(m[5]);
  if (octets.some((o) => o > 255) || prefix > 32) return null;
  const v4 = octets.reduce((a, o) => a * 256 + o, 0);
  const host = prefix === 0 ? v4 : v4 % 2 ** (32 - prefix);
  return host === 0 || prefix === 32 ? { v4, prefix } : null;
}

/** Checks the filters' types and ranges and returns their number of input words. */
export function checkMirrorShape(filters: FlowMirrorFilter[] | undefined): number {
  if (filters === undefined) return 0;
  if (!Array.isArray(filters)) throw new Error("mirrorFilters: expected an array");
  for (const [i, f] of filters.entries()) {
    const at = `mirrorFilters[${i}]`;
    if (typeof f !== "object" || f === null) throw new Error(`${at}: expected an object`);
    const bad = (field: string, want: string): never => {
      const value = JSON.stringify((f as unknown as Record<string, unknown>)[field]);
      throw new Error(`${at}.${field}: expected ${want}, got ${value}`);
    };
    for (const field of ["source", "output"] as const) {
      if (!Number.isInteger(f[field]) || f[field] < 1 || f[field] > MAX_OFPORT) {
        bad(field, `an integer in 1..${MAX_OFPORT}`);
      }
    }
    if (f.source === f.output) bad("output", "another ofport than the source's");
    if (!MIRROR_PROTOCOLS.includes(f.protocol)) bad("protocol", MIRROR_PROTOCOLS.join(", "));
    checkPorts(f, bad);
    if (f.remote !== undefined && parseMirrorRemote(f.remote) === null) {
      bad("remote", 'an IPv4 CIDR without host bits ("10.1.0.0/24")');
    }
  }
  return 1 + MIRROR_WORDS * filters.length;
}

/** A port range only for TCP and UDP, min ≤ max, both given or neither. */
function checkPorts(f: FlowMirrorFilter, bad: (field: string, want: string) => never): void {
  if (f.portMin === undefined && f.portMax === undefined) return;
  if (f.protocol !== "tcp" && f.protocol !== "udp") {
    bad("portMin", "no port range but for tcp, udp");
  }
  if (!Number.isInteger(f.portMin) || f.portMin! < 1 || f.portMin! > 65535) {
    bad("portMin", "an integer in 1..65535");
  }
  if (!Number.isInteger(f.portMax) || f.portMax! < f.portMin! || f.portMax! > 65535) {
    bad("portMax", "an integer in portMin..65535");
  }
}

/** The Error of the engine's check: rule `i`'s source is no local port. */
export function mirrorError(filters: FlowMirrorFilter[], i: number): Error {
  return new Error(
    `mirrorFilters[${i}].source: ${filters[i].source} is the ofport of no local port of the model`,
  );
}
