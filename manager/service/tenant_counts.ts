/**
 * The count of one kind of a tenant's objects (mirrors, services), kept under a key of its own that
 * every create and delete writes: concurrent ones are serialised on it, so the cap holds exactly.
 */
import { ApiError } from "../errors.ts";
import type { Entry, Key } from "../store/store.ts";
import type { Tx } from "../store/tx.ts";
import type { Ctx } from "./context.ts";

/**
 * The entry of a new object of a tenant's, `name` free and counted one more: refused when the name
 * is taken (409) or the tenant has `most` of the kind already (403). The commit checks both.
 */
export async function claimName(
  ctx: Ctx,
  tx: Tx,
  claim: { key: Key; count: Key; most: number; tenant: string; kind: string; name: string },
): Promise<Entry<unknown>> {
  const e = await ctx.store.get(claim.key);
  if (e.value) {
    throw new ApiError(
      "already_exists",
      `${claim.kind} "${claim.name}" already exists in tenant "${claim.tenant}"`,
      "name",
    );
  }
  tx.check(e);
  await countOneMore(ctx, tx, {
    key: claim.count,
    most: claim.most,
    tenant: claim.tenant,
    what: `${claim.kind.toLowerCase()}s`,
  });
  return e;
}

/** One more: refused (403 quota_exceeded) when the tenant has `most` already. */
async function countOneMore(
  ctx: Ctx,
  tx: Tx,
  cap: { key: Key; most: number; tenant: string; what: string },
): Promise<void> {
  const count = await ctx.store.get<number>(cap.key);
  const had = count.value ?? 0;
  if (had >= cap.most) {
    throw new ApiError(
      "quota_exceeded",
      `Tenant "${cap.tenant}" has ${had} ${cap.what}, the most a tenant may have; delete one first`,
      "name",
    );
  }
  tx.check(count).set(count.key, had + 1);
}

/** One fewer (the key goes at zero). */
export async function countOneLess(ctx: Ctx, tx: Tx, key: Key): Promise<void> {
  const count = await ctx.store.get<number>(key);
  const left = (count.value ?? 1) - 1;
  tx.check(count);
  if (left > 0) tx.set(count.key, left);
  else tx.delete(count.key);
}
