/**
 * Security groups in the API: a tenant's named set of stateful rules that ports name (or their
 * network names for them). The checks zod cannot make (ports only with TCP/UDP, a CIDR's syntax,
 * peers that exist) are in service/security_groups.ts.
 */
import { z } from "zod";

/** Rules in one group: each may become a flow per port, peer address and port block. */
export const MAX_RULES_PER_GROUP = 64;
/** Groups in one tenant. */
export const MAX_GROUPS_PER_TENANT = 256;
/** Groups one port or network names. */
export const MAX_GROUPS_PER_PORT = 8;

const GroupName = z.string().regex(
  /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
  "must be a lowercase DNS label (a-z, 0-9, '-', 1-63)",
);

/** A port or range as a rule gives it (a mirror filter's rule too: schemas.ts). */
export const PortRange = z.string().regex(
  /^[0-9]{1,5}(-[0-9]{1,5})?$/,
  'must be a port ("80") or a range ("8000-8100")',
);

const Peer = z.union([
  z.strictObject({ cidr: z.string().min(1).max(64).meta({ example: "10.1.0.0/24" }) }),
  z.strictObject({ group: GroupName.meta({ description: "a security group of the same tenant" }) }),
  z.strictObject({
    network: GroupName.meta({ description: "a network of the same tenant: its CIDR" }),
  }),
]).meta({ description: "the other end: a CIDR, the ports of a group, or a network; absent: any" });

export const SecurityRuleSchema = z.strictObject({
  direction: z.enum(["ingress", "egress"]).meta({
    description: "ingress: connections into the port; egress: connections it opens",
  }),
  protocol: z.enum(["tcp", "udp", "icmp", "icmpv6", "any"]),
  ports: PortRange.optional().meta({ description: "TCP and UDP only; absent: every port" }),
  peer: Peer.optional(),
});

/** The rule as answered: a network peer carries the CIDR it stands for. */
const SecurityRuleView = SecurityRuleSchema.extend({
  peer: z.union([
    z.object({ cidr: z.string() }),
    z.object({ group: z.string() }),
    z.object({ network: z.string(), cidr: z.string() }),
  ]).optional(),
});

const Rules = z.array(SecurityRuleSchema).max(MAX_RULES_PER_GROUP);

export const SecurityGroupCreate = z.strictObject({
  name: GroupName,
  description: z.string().max(1024).optional(),
  rules: Rules.default([]),
});

export const SecurityGroupUpdate = z.strictObject({
  description: z.string().max(1024).optional(),
  rules: Rules.meta({ description: "the new rules, replacing all of the old" }),
});

export const SecurityGroup = z.object({
  name: z.string(),
  tenant: z.string(),
  description: z.string().optional(),
  rules: z.array(SecurityRuleView),
  createdAt: z.string().meta({ format: "date-time" }),
  updatedAt: z.string().meta({ format: "date-time" }),
});

/** Groups a port or network names: a set of this tenant's groups. */
export const GroupNames = z.array(GroupName).max(MAX_GROUPS_PER_PORT).refine(
  (names) => new Set(names).size === names.length,
  "names a group twice",
);
