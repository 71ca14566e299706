/**
 * Bandwidth limits at the manager: a network's default (create, change, clear) reaches its ports
 * as `networkBandwidth`, a port's own (`bandwidth` in its request) stays with it; values that
 * cannot be are refused naming the field.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("bandwidth: a network's default reaches its ports, a port's own stays its own", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const bandwidth = { ingressRate: 20_000_000, egressRate: 10_000_000, egressBurst: 400_000 };
  const created = must(
    await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24", { bandwidth })),
    201,
  );
  assert.deepEqual(created.bandwidth, bandwidth);
  const p1 = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  assert.deepEqual(p1.networkBandwidth, bandwidth);
  assert.equal(p1.bandwidth, undefined);
  const own = { egressRate: 5_000_000 };
  const p2 = must(await t.call("PUT", `${BLUE}/ports/p2`, { bandwidth: own }), 201);
  assert.deepEqual(p2.bandwidth, own);
  assert.deepEqual(must(await t.call("GET", `${BLUE}/ports/p2`), 200).bandwidth, own);

  const changed = { ingressRate: 50_000_000 };
  must(await t.call("PATCH", BLUE, { bandwidth: changed }, TOKEN.acme), 200);
  assert.deepEqual(must(await t.call("GET", `${BLUE}/ports/p1`), 200).networkBandwidth, changed);
  const cleared = must(await t.call("PATCH", BLUE, { bandwidth: null }, TOKEN.acme), 200);
  assert.equal(cleared.bandwidth, undefined);
  assert.equal(must(await t.call("GET", `${BLUE}/ports/p1`), 200).networkBandwidth, undefined);
});

Deno.test("bandwidth: limits that cannot be are refused, naming the field", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ ingressRate: 0 }, /ingressRate/],
    [{ ingressRate: -1 }, /ingressRate/],
    [{ egressRate: 1.5 }, /egressRate/],
    [{ egressRate: 1e12 }, /egressRate/],
    [{ ingressRate: 1e6, ingressBurst: 8 }, /ingressBurst/],
    [{ egressBurst: 1e6 }, /egressBurst needs egressRate/],
    [{ rate: 1e6 }, /rate/],
  ];
  for (const [bandwidth, field] of bad) {
    const r1 = await t.call(
      "POST",
      "tenants/acme/networks",
      net("red", "10.2.0.0/24", { bandwidth }),
    );
    const e1 = mustFail(r1, 400, "invalid_request");
    assert.match(`${r1.body.error.field} ${e1}`, field, JSON.stringify(bandwidth));
    const r2 = await t.call("PUT", `${BLUE}/ports/px`, { bandwidth });
    const e2 = mustFail(r2, 400, "invalid_request");
    assert.match(`${r2.body.error.field} ${e2}`, field, JSON.stringify(bandwidth));
  }
});
