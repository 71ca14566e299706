/**
 * References to security groups from ports and networks (and peers): only the same tenant's groups
 * exist for them; another tenant's is absent (404), as if it were nobody's. A commit that names a
 * group checks the group's entry as it read it: deleteSecurityGroup marks the group before it looks
 * for users, so a reference racing the delete either is found by it or fails its commit and, on the
 * retry, meets the mark (409).
 */
import type { SecurityGroup } from "@knitter/common";
import { ApiError } from "../errors.ts";
import { keys, type SecurityGroupRecord } from "../model.ts";
import type { Entry } from "../store/store.ts";
import type { Ctx } from "./context.ts";

/** The 404 of a group the tenant does not have, naming the field that named it. */
export function absentGroup(tenant: string, name: string, field?: string): ApiError {
  return new ApiError(
    "not_found",
    `Security group "${name}" does not exist in tenant "${tenant}"`,
    field,
  );
}

/** The group `name` as a commit naming it checks; 404 when absent, 409 while being deleted. */
export async function groupRef(
  ctx: Ctx,
  ref: { tenant: string; name: string; field: string },
): Promise<Entry<SecurityGroupRecord>> {
  const { tenant, name, field } = ref;
  const e = await ctx.store.get<SecurityGroupRecord>(keys.securityGroup(tenant, name));
  if (!e.value) throw absentGroup(tenant, name, field);
  if (markHolds(e.value, Date.now())) {
    throw new ApiError(
      "conflict",
      `Security group "${name}" is being deleted (since ${e.value.deletingSince}); name another, or make it again once it is gone`,
      field,
    );
  }
  return e;
}

/**
 * How long a delete's mark holds. A delete takes a scan of the tenant's ports, networks and groups;
 * a mark older than this is one whose delete died (the manager stopped mid-way), and is let be:
 * the delete itself gives up when its own mark has grown this old (deleteSecurityGroup).
 */
export const DELETE_MARK_MS = 60_000;

/** Whether a delete's mark on the group still refuses new references at `nowMs`. */
export function markHolds(g: SecurityGroupRecord, nowMs: number): boolean {
  return g.deletingSince !== undefined && nowMs - Date.parse(g.deletingSince) < DELETE_MARK_MS;
}

/** Every group of `names`, each as {@link groupRef} reads it, the field indexed per name. */
export async function groupRefs(
  ctx: Ctx,
  refs: { tenant: string; names: string[] | undefined | null; field: string },
): Promise<Entry<SecurityGroupRecord>[]> {
  const { tenant, names, field } = refs;
  const out: Entry<SecurityGroupRecord>[] = [];
  for (const [i, name] of (names ?? []).entries()) {
    out.push(await groupRef(ctx, { tenant, name, field: `${field}[${i}]` }));
  }
  return out;
}

/** A group as the API and the feed show it: without the delete's mark. */
export function groupView(g: SecurityGroupRecord): SecurityGroup {
  const { deletingSince: _d, deletingBy: _b, ...view } = g;
  return view;
}
