/**
 * Security groups: a tenant's named sets of stateful rules. Ports name them (PUT .../ports with
 * `securityGroups`), a network names defaults for its ports that name none. Every name a group,
 * port or network uses is one of the same tenant's: another tenant's group is absent (404). A
 * change reaches the agents through the feed (a `securityGroup` event); they resolve group peers
 * into the addresses of the ports that name the group and recompile their flows.
 */
import type { SecurityGroup, SecurityPeer, SecurityRule } from "@knitter/common";
import type { z } from "zod";
import { formatCidr, parseCidr } from "@knitter/common/address";
import { ApiError, invalid } from "../errors.ts";
import { keys, type NetworkRecord, type SecurityGroupRecord } from "../model.ts";
import {
  MAX_GROUPS_PER_TENANT,
  type SecurityGroupCreate,
  type SecurityGroupUpdate,
} from "../security_group_schema.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { getTenantEntry } from "./tenants.ts";
import { listPorts } from "./ports/mod.ts";
import type { Tx } from "../store/tx.ts";
import { absentGroup, groupRef, groupView, markHolds } from "./security_group_refs.ts";

type RuleBody = z.infer<typeof SecurityGroupCreate>["rules"][number];

const ADMIN = { scope: "admin" } as const;

/**
 * The rules as stored: checked beyond their shape (ports only with TCP and UDP and in order, CIDRs
 * well formed and of the protocol's family, peers that exist), network peers with their CIDR.
 * `self` may be named as a peer: the group being written.
 */
async function checkedRules(
  ctx: Ctx,
  tx: Tx,
  tenant: string,
  self: string,
  rules: RuleBody[],
): Promise<SecurityRule[]> {
  const out: SecurityRule[] = [];
  for (const [i, r] of rules.entries()) {
    const at = `rules[${i}]`;
    const rule: SecurityRule = { direction: r.direction, protocol: r.protocol };
    if (r.ports !== undefined) rule.ports = checkedPorts(`${at}.ports`, r.protocol, r.ports);
    if (r.peer !== undefined) {
      rule.peer = await checkedPeer(ctx, tx, tenant, self, `${at}.peer`, r);
    }
    out.push(rule);
  }
  return out;
}

/** A rule's ports, canonical ("80", "8000-8100"); a mirror filter's too (mirrors.ts). */
export function checkedPorts(field: string, protocol: string, ports: string): string {
  if (protocol !== "tcp" && protocol !== "udp") {
    throw invalid(field, `ports apply to tcp and udp only, not to ${protocol}; leave them out`);
  }
  const [a, b = a] = ports.split("-").map(Number);
  if (a < 1 || b > 65535 || a > b) {
    throw invalid(field, `"${ports}" must be a port or a range start-end within 1-65535`);
  }
  return a === b ? String(a) : `${a}-${b}`;
}

async function checkedPeer(
  ctx: Ctx,
  tx: Tx,
  tenant: string,
  self: string,
  field: string,
  r: RuleBody,
): Promise<SecurityPeer> {
  const peer = r.peer!;
  if ("cidr" in peer) {
    const cidr = parseCidr(peer.cidr);
    if ("error" in cidr) throw invalid(`${field}.cidr`, `"${peer.cidr}": ${cidr.error}`);
    const clash = (r.protocol === "icmp" && cidr.family === 6) ||
      (r.protocol === "icmpv6" && cidr.family === 4);
    if (clash) {
      throw invalid(`${field}.cidr`, `${r.protocol} does not reach IPv${cidr.family} ${peer.cidr}`);
    }
    return { cidr: formatCidr(cidr) };
  }
  if ("group" in peer) {
    if (peer.group !== self) {
      tx.check(await groupRef(ctx, { tenant, name: peer.group, field: `${field}.group` }));
    }
    return { group: peer.group };
  }
  const net = (await ctx.store.get<NetworkRecord>(keys.network(tenant, peer.network))).value;
  if (!net) {
    throw new ApiError(
      "not_found",
      `Network "${peer.network}" does not exist in tenant "${tenant}"`,
      `${field}.network`,
    );
  }
  return { network: net.name, cidr: net.cidr };
}

export async function createSecurityGroup(
  ctx: Ctx,
  tenant: string,
  body: z.infer<typeof SecurityGroupCreate>,
): Promise<SecurityGroup> {
  await getTenantEntry(ctx, tenant);
  const group = await retry(ctx, async (tx) => {
    const t = await getTenantEntry(ctx, tenant);
    const rules = await checkedRules(ctx, tx, tenant, body.name, body.rules);
    const e = await ctx.store.get(keys.securityGroup(tenant, body.name));
    if (e.value) {
      throw new ApiError(
        "already_exists",
        `Security group "${body.name}" already exists in tenant "${tenant}"`,
        "name",
      );
    }
    const count = (await listValues(ctx.store, keys.securityGroups(tenant))).length;
    if (count >= MAX_GROUPS_PER_TENANT) {
      throw new ApiError(
        "quota_exceeded",
        `Tenant "${tenant}" has ${count} security groups, the most a tenant may have; delete one first`,
        "name",
      );
    }
    const at = now();
    const group: SecurityGroupRecord = {
      name: body.name,
      tenant,
      rules,
      createdAt: at,
      updatedAt: at,
    };
    if (body.description !== undefined) group.description = body.description;
    // The tenant written again (a new version): a tenant deleted meanwhile takes no group, and a
    // delete that listed no group before this one commits fails its check.
    tx.check(t).set(t.key, t.value!).check(e).set(e.key, group);
    return group;
  });
  ctx.feed.publish({ type: "securityGroup", op: "put", securityGroup: group });
  return group;
}

export async function getSecurityGroup(
  ctx: Ctx,
  tenant: string,
  name: string,
): Promise<SecurityGroup> {
  const g = (await ctx.store.get<SecurityGroupRecord>(keys.securityGroup(tenant, name))).value;
  if (!g) {
    await getTenantEntry(ctx, tenant);
    throw absentGroup(tenant, name);
  }
  return groupView(g);
}

/** One tenant's groups; without a tenant, every tenant's (for the agents). */
export async function listSecurityGroups(ctx: Ctx, tenant?: string): Promise<SecurityGroup[]> {
  if (tenant !== undefined) await getTenantEntry(ctx, tenant);
  return (await listValues<SecurityGroupRecord>(ctx.store, keys.securityGroups(tenant)))
    .map(groupView);
}

/** Replaces a group's rules; ports that name it follow at once (through the feed). */
export async function updateSecurityGroup(
  ctx: Ctx,
  req: { tenant: string; name: string; body: z.infer<typeof SecurityGroupUpdate> },
): Promise<SecurityGroup> {
  const { tenant, name, body } = req;
  await getSecurityGroup(ctx, tenant, name);
  const group = await retry(ctx, async (tx) => {
    const e = await ctx.store.get<SecurityGroupRecord>(keys.securityGroup(tenant, name));
    if (!e.value) throw absentGroup(tenant, name);
    const rules = await checkedRules(ctx, tx, tenant, name, body.rules);
    const group: SecurityGroupRecord = { ...e.value, rules, updatedAt: now() };
    if (body.description !== undefined) group.description = body.description;
    tx.check(e).set(e.key, group);
    return groupView(group);
  });
  ctx.feed.publish({ type: "securityGroup", op: "put", securityGroup: group });
  return group;
}

/** Who names the group: ports, networks (as their default) and rules of other groups. */
async function usersOf(ctx: Ctx, tenant: string, name: string): Promise<string[]> {
  const users: string[] = [];
  for (const p of await listPorts(ctx, ADMIN, { tenant })) {
    if (p.securityGroups?.includes(name)) users.push(`port "${p.id}" of network "${p.network}"`);
  }
  for (const n of await listValues<NetworkRecord>(ctx.store, keys.networks(tenant))) {
    if (n.securityGroups?.includes(name)) users.push(`network "${n.name}"`);
  }
  for (const g of await listValues<SecurityGroupRecord>(ctx.store, keys.securityGroups(tenant))) {
    const names = g.name !== name && g.rules.some((r) =>
      r.peer && "group" in r.peer &&
      r.peer.group === name
    );
    if (names) users.push(`security group "${g.name}"`);
  }
  return users;
}

/**
 * Deletes a group nothing names. The group is marked first, with this delete's own mark: a commit
 * that names it after the mark fails its check of the group and meets the mark on its retry (409);
 * one that went in before is among the users found after it, and the delete is refused (409). The
 * delete commits only while its own mark is on the group (another delete may have replaced it) and
 * young (markHolds: an old mark no longer refuses references), and takes back only its own mark.
 */
export async function deleteSecurityGroup(ctx: Ctx, tenant: string, name: string): Promise<void> {
  const group = await getSecurityGroup(ctx, tenant, name);
  const mark = crypto.randomUUID();
  await setMark(ctx, tenant, name, mark);
  let deleted = false;
  try {
    const users = await usersOf(ctx, tenant, name);
    if (users.length > 0) {
      const shown = users.slice(0, 5).join(", ") + (users.length > 5 ? ", …" : "");
      throw new ApiError(
        "in_use",
        `Cannot delete security group "${name}": ${shown} name it; take it out of them first`,
      );
    }
    await retry(ctx, async (tx) => {
      const e = await ctx.store.get<SecurityGroupRecord>(keys.securityGroup(tenant, name));
      if (!e.value) throw absentGroup(tenant, name);
      if (e.value.deletingBy !== mark || !markHolds(e.value, Date.now())) {
        throw new ApiError(
          "conflict",
          `Security group "${name}" was changed while it was being deleted; try again`,
        );
      }
      tx.check(e).delete(e.key);
    });
    deleted = true;
  } finally {
    if (!deleted) await setMark(ctx, tenant, name, undefined, mark).catch(() => {});
  }
  ctx.feed.publish({ type: "securityGroup", op: "delete", securityGroup: group });
}

/**
 * Puts a delete's mark on the group (replacing any other), or takes back the mark `ours` (and no
 * other). A group gone meanwhile stays gone.
 */
async function setMark(
  ctx: Ctx,
  tenant: string,
  name: string,
  mark: string | undefined,
  ours?: string,
): Promise<void> {
  await retry(ctx, async (tx) => {
    const e = await ctx.store.get<SecurityGroupRecord>(keys.securityGroup(tenant, name));
    if (!e.value) {
      if (mark !== undefined) throw absentGroup(tenant, name);
      return;
    }
    if (mark === undefined && e.value.deletingBy !== ours) return;
    const { deletingSince: _s, deletingBy: _b, ...group } = e.value;
    const next = mark === undefined ? group : { ...group, deletingSince: now(), deletingBy: mark };
    tx.check(e).set(e.key, next);
  });
}
