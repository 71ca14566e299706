/**
 * Issue 32: a port's PUT no longer reads its tenant's quota and its cluster's record each time; it
 * uses the ones this manager last read or wrote, and its commit checks their versions. What a user
 * relies on: whatever another replica (a manager with its own caches on the same store) changed
 * in between is honoured by the very next PUT, allowed or refused, and counts stay exact.
 */
import assert from "node:assert/strict";
import { ApiError } from "../../errors.ts";
import { getQuota, setQuota } from "../quotas.ts";
import { createCluster, updateCluster } from "../clusters.ts";
import { putPort } from "./put.ts";
import { portsTest } from "./test_support.ts";

const refusedAs = (code: string) => (err: unknown) => err instanceof ApiError && err.code === code;

Deno.test("remembered records: a quota set or raised by another replica binds the next PUT", async () => {
  await using p = await portsTest();
  const other = p.replica();
  // This manager allocates, remembering that acme has no quota.
  await putPort(p.ctx, p.put("a"));
  await putPort(p.ctx, p.put("b"));
  // Another one sets a quota of the 2 ports acme holds: the next PUT here is refused.
  await setQuota(other, "acme", { ports: 2 });
  await assert.rejects(() => putPort(p.ctx, p.put("c")), refusedAs("quota_exceeded"));
  // Raised there: allowed here at once, though this manager last saw the quota full.
  await setQuota(other, "acme", { ports: 4 });
  assert.equal((await putPort(p.ctx, p.put("c"))).created, true);
  // Both managers allocate from one count, which stays exact.
  assert.equal((await putPort(other, p.put("d"))).created, true);
  await assert.rejects(() => putPort(p.ctx, p.put("e")), refusedAs("quota_exceeded"));
  assert.equal((await getQuota(p.ctx, "acme")).used.ports, 4);
});

Deno.test("remembered records: a cluster narrowed by another replica refuses the next PUT into it", async () => {
  await using p = await portsTest();
  const other = p.replica();
  await createCluster(p.ctx, { name: "east", tenants: ["acme"] });
  // This manager puts a port into cluster east, remembering its record.
  assert.equal((await putPort(p.ctx, p.put("a@east"))).created, true);
  // Another one takes acme out of east: the next PUT here is refused, as on that one.
  await updateCluster(other, "east", { tenants: [] });
  await assert.rejects(() => putPort(p.ctx, p.put("b@east")), refusedAs("forbidden"));
  await assert.rejects(() => putPort(other, p.put("b@east")), refusedAs("forbidden"));
  // Let in again there: allowed here at once, though this manager last saw it refuse.
  await updateCluster(other, "east", { tenants: ["acme"] });
  assert.equal((await putPort(p.ctx, p.put("b@east"))).created, true);
});
