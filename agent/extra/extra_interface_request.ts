/**
 * What knitctl may ask the agent for (attach / detach), validated at the socket: one target netns,
 * one kind (a Knitter network or a plain OVS bridge), and values that are single, well-formed tokens
 * because they end up in `ip` and `ovs-vsctl` command lines.
 */
import { z } from "zod";
import { isIp, isIpPrefix, MAC_RE } from "@knitter/common/address";
import { PLAIN_IFNAME_RE, PLAIN_IFNAME_RULE } from "@knitter/plugin/contract";

const NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

const targetIssue = {
  message: "name the netns with exactly one of netns (name or path), pid or pod (NAMESPACE/NAME)",
  path: ["netns"],
};

const Target = {
  netns: z.string().min(1).max(4096).regex(/^\S+$/, "must be a netns name or path without spaces")
    .optional(),
  pid: z.int().min(1).max(4_194_304, "must be a process ID (at most 4194304, Linux's pid_max)")
    .optional(),
  pod: z.string().regex(/^[^/\s]+\/[^/\s]+$/, "must be NAMESPACE/NAME").optional(),
  ifName: z.string().regex(
    PLAIN_IFNAME_RE,
    `must be a Linux interface name (${PLAIN_IFNAME_RULE})`,
  ),
};

const RouteSpec = z.strictObject({
  dst: z.string().refine((v) => isIpPrefix(v), "must be a CIDR like 10.9.0.0/16"),
  via: z.string().refine(isIp, "must be an IP address").optional(),
});

export const AttachSchema = z.strictObject({
  ...Target,
  network: z.string().regex(NAME, "must be a network name").optional(),
  tenant: z.string().regex(NAME, "must be a tenant name").optional(),
  bridge: z.string().regex(PLAIN_IFNAME_RE, "must be an OVS bridge name (1-15 characters)")
    .optional(),
  vlan: z.int().min(1).max(4094).optional(),
  ip: z.string().max(64).optional(),
  mac: z.string().regex(MAC_RE, "must be a lowercase MAC like 02:00:0a:01:00:05").optional(),
  mtu: z.int().min(68).max(65535).optional(),
  routes: z.array(RouteSpec).max(64).default([]),
})
  .refine((r) => oneTarget(r), targetIssue)
  .refine((r) => !r.network !== !r.bridge, {
    message: "give exactly one of network (a Knitter network) or bridge (a plain OVS bridge)",
    path: ["network"],
  })
  .refine((r) => r.vlan === undefined || r.bridge !== undefined, {
    message: "vlan goes with bridge; a network's segment comes from the network",
    path: ["vlan"],
  })
  .refine((r) => r.ip === undefined || isIpPrefix(r.ip, r.bridge ? "required" : "optional"), {
    message:
      "must be an address with prefix for a bridge (192.168.5.2/24), an address for a network",
    path: ["ip"],
  });

export const DetachSchema = z.strictObject(Target).refine((r) => oneTarget(r), targetIssue);

export type AttachBody = z.infer<typeof AttachSchema>;
export type DetachBody = z.infer<typeof DetachSchema>;

function oneTarget(r: { netns?: string; pid?: number; pod?: string }): boolean {
  return [r.netns, r.pid, r.pod].filter((v) => v !== undefined).length === 1;
}

/** The first problem of a body, as one sentence naming the field. */
export function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  const field = issue.path.join(".");
  return field ? `${field}: ${issue.message}` : issue.message;
}
