/**
 * Releasing a port (DELETE): its address and a fixed MAC go into quarantine for
 * quarantineSeconds (a pod elsewhere may still hold them in its caches), are handed out again
 * after it, and the release of a port that is gone is a 404 that writes nothing.
 */
import assert from "node:assert/strict";
import { ApiError } from "../../errors.ts";
import { unchanged } from "../../test_support.ts";
import { deletePort, getPort, putPort } from "./mod.ts";
import { portsTest } from "./test_support.ts";

const QUARANTINE_S = 60;

/** A test on a /30 (two addresses) with quarantine, and the clock it reads (ms), moved by hand. */
async function quarantined() {
  const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
  const p = await portsTest("10.1.0.0/30", {
    quarantineSeconds: QUARANTINE_S,
    clock: () => clock.now,
  });
  return { p, clock };
}

async function code(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(() => null, (e) => e);
  assert.ok(err instanceof ApiError, `refused with an ApiError, got ${err}`);
  return `${err.code}: ${err.message}`;
}

Deno.test("release: the address stays out of use for the quarantine, then is handed out again", async () => {
  const { p, clock } = await quarantined();
  await using _ = p;
  const a = await putPort(p.ctx, p.put("a", { mac: "02:aa:00:00:00:01" }));
  await deletePort(p.ctx, p.port("a"));
  const b = await putPort(p.ctx, p.put("b"));
  assert.notEqual(b.port.ip, a.port.ip, "the other address, not the released one");
  assert.match(
    await code(unchanged(p.t, () => putPort(p.ctx, p.put("c")))),
    /^pool_exhausted: .*1 of them released and in quarantine/,
  );
  assert.match(
    await code(putPort(p.ctx, p.put("c", { ip: a.port.ip }))),
    /^address_taken: .* is in quarantine until 2026-01-01T00:01:00/,
  );
  assert.match(
    await code(putPort(p.ctx, p.put("c", { mac: "02:aa:00:00:00:01" }))),
    /^mac_taken: .* in quarantine/,
  );
  clock.now += (QUARANTINE_S + 1) * 1000;
  const c = await putPort(p.ctx, p.put("c", { mac: "02:aa:00:00:00:01" }));
  assert.equal(c.port.ip, a.port.ip);
});

Deno.test("release: a port that is gone (or never was) is 404 and nothing is written", async () => {
  await using p = await portsTest();
  await putPort(p.ctx, p.put("a"));
  await deletePort(p.ctx, p.port("a"));
  for (const id of ["a", "never"]) {
    assert.match(await code(unchanged(p.t, () => deletePort(p.ctx, p.port(id)))), /^not_found/);
  }
  assert.match(await code(getPort(p.ctx, p.port("a"))), /^not_found/);
});
