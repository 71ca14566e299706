/**
 * The security group section of the flow compiler's input: per local port with groups, its rules
 * with their peers resolved into addresses (the agent resolves groups and networks). A port
 * without an entry keeps the flows it has without security groups.
 *
 * @module
 */

/** One allowed kind of connection into (ingress) or out of (egress) the port. */
export interface FlowAclRule {
  direction: "ingress" | "egress";
  protocol: "tcp" | "udp" | "icmp" | "icmpv6" | "any";
  /** TCP/UDP destination ports `portMin..portMax`; both absent: every port. */
  portMin?: number;
  portMax?: number;
  /**
   * The other end's addresses and CIDRs; absent: anyone. Empty: nobody (a group without
   * members), so the rule makes no flow.
   */
  remote?: string[];
}

/** The rules of one local port (by its cookie). */
export interface FlowAcl {
  cookie: number;
  rules: FlowAclRule[];
}

/** Protocol codes, in the encoding the WASM engine reads (assembly/acl.ts). */
export const PROTOCOLS = ["tcp", "udp", "icmp", "icmpv6", "any"] as const;

/**
 * Error codes of the checks that need the model (a cookie no local port has, one listed twice, a
 * remote that is not an address or CIDR, or has host bits set); both engines report them with the
 * same arguments (acl, rule, remote), so both throw the same text (aclError). Above ERR's codes.
 */
export const ACL_ERR = { UNKNOWN_COOKIE: 101, DUP_COOKIE: 102, BAD_REMOTE: 103, HOST_BITS: 104 };

/** The Error of a failed acls check: `code` from ACL_ERR, the acl, rule and remote at fault. */
export function aclError(acls: FlowAcl[], code: number, i: number, k = 0, j = 0): Error {
  const cookie = acls[i]?.cookie;
  const text = JSON.stringify(acls[i]?.rules[k]?.remote?.[j]);
  const remote = `acls[${i}].rules[${k}].remote[${j}]`;
  switch (code) {
    case ACL_ERR.UNKNOWN_COOKIE:
      return new Error(`acls[${i}].cookie: ${cookie} is no local port's cookie`);
    case ACL_ERR.DUP_COOKIE:
      return new Error(`acls[${i}].cookie: ${cookie} is listed twice`);
    case ACL_ERR.BAD_REMOTE:
      return new Error(`${remote}: ${text} is not an address or CIDR`);
    case ACL_ERR.HOST_BITS:
      return new Error(`${remote}: ${text} has host bits set`);
  }
  return new Error(`flow compiler: unknown acls error ${code} at acls[${i}]`);
}

function fail(path: string, expected: string, value: unknown): never {
  throw new Error(`${path}: expected ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}

function checkRule(r: FlowAclRule, path: string): void {
  if (typeof r !== "object" || r === null) fail(path, "an object", r);
  if (r.direction !== "ingress" && r.direction !== "egress") {
    fail(`${path}.direction`, '"ingress" or "egress"', r.direction);
  }
  if (!PROTOCOLS.includes(r.protocol)) fail(`${path}.protocol`, PROTOCOLS.join(", "), r.protocol);
  if ((r.portMin === undefined) !== (r.portMax === undefined)) {
    fail(`${path}.portMax`, "portMin and portMax, or neither", r.portMax);
  }
  if (r.portMin !== undefined) {
    if (r.protocol !== "tcp" && r.protocol !== "udp") fail(`${path}.portMin`, "none", r.portMin);
    const ok = (v: unknown) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 65535;
    if (!ok(r.portMin)) fail(`${path}.portMin`, "an integer in 0..65535", r.portMin);
    if (!ok(r.portMax) || r.portMax! < r.portMin!) {
      fail(`${path}.portMax`, `an integer in ${r.portMin}..65535`, r.portMax);
    }
  }
  if (r.remote !== undefined) {
    if (!Array.isArray(r.remote)) fail(`${path}.remote`, "an array of strings", r.remote);
    r.remote.forEach((s, i) =>
      typeof s !== "string" && fail(`${path}.remote[${i}]`, "a string", s)
    );
  }
}

/** Throws an Error naming the first field of the wrong type or out of range. */
export function checkAclShape(acls: FlowAcl[] | undefined): void {
  if (acls === undefined) return;
  if (!Array.isArray(acls)) fail("acls", "an array", acls);
  for (const [i, a] of acls.entries()) {
    if (typeof a !== "object" || a === null) fail(`acls[${i}]`, "an object", a);
    if (!Number.isInteger(a.cookie) || a.cookie < 1) {
      fail(`acls[${i}].cookie`, "a local port's cookie", a.cookie);
    }
    if (!Array.isArray(a.rules)) fail(`acls[${i}].rules`, "an array", a.rules);
    a.rules.forEach((r, k) => checkRule(r, `acls[${i}].rules[${k}]`));
  }
}
