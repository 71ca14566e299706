/**
 * References to security groups from ports and networks (and peers): only the same tenant's groups
 * exist for them; another tenant's is absent (404), as if it were nobody's.
 */
import { ApiError } from "../errors.ts";
import { keys } from "../model.ts";
import type { Ctx } from "./context.ts";

/** The 404 of a group the tenant does not have, naming the field that named it. */
export function absentGroup(tenant: string, name: string, field?: string): ApiError {
  return new ApiError(
    "not_found",
    `Security group "${name}" does not exist in tenant "${tenant}"`,
    field,
  );
}

/** Throws 404 naming `field` unless every group of `names` is one of the tenant's. */
export async function requireGroups(
  ctx: Ctx,
  tenant: string,
  names: string[] | undefined | null,
  field: string,
): Promise<void> {
  for (const [i, name] of (names ?? []).entries()) {
    const g = await ctx.store.get(keys.securityGroup(tenant, name));
    if (!g.value) throw absentGroup(tenant, name, `${field}[${i}]`);
  }
}
