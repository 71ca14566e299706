/** A network's labels (who made it) and its "being deleted" state, in which it takes no new ports. */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("networks: labels are set at creation and answered; a bad key is refused", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const labels = {
    "app.kubernetes.io/managed-by": "knitter-monitor",
    "knitter.io/network-resource": "acme/blue",
  };
  const made = must(
    await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24", { labels })),
    201,
  );
  assert.deepEqual(made.labels, labels);
  assert.deepEqual(must(await t.call("GET", BLUE), 200).labels, labels);
  assert.equal(
    must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201).labels,
    undefined,
  );
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("green", "10.3.0.0/24", {
        labels: { "-bad": "x" },
      }),
    ),
    400,
    "invalid_request",
  );
});

Deno.test("networks: one being deleted takes no new ports, answers its existing ones, and can open again", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const p1 = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);

  const closing = must(await t.call("PATCH", BLUE, { deleting: true }), 200);
  assert.ok(Date.parse(closing.deletingSince) > 0);
  const again = must(await t.call("PATCH", BLUE, { deleting: true }), 200);
  assert.equal(again.deletingSince, closing.deletingSince, "the first time stays");

  mustFail(await t.call("PUT", `${BLUE}/ports/p2`, {}), 409, "network_deleting", {
    message: /Network "blue" of tenant "acme" is being deleted \(since .*\): it takes no new ports/,
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p3`, { ip: "10.1.0.9" }), 409, "network_deleting");
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 200).ip, p1.ip, "existing: kept");
  must(await t.call("DELETE", `${BLUE}/ports/p1`), 204);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 0);

  const open = must(await t.call("PATCH", BLUE, { deleting: false }), 200);
  assert.equal(open.deletingSince, undefined);
  must(await t.call("PUT", `${BLUE}/ports/p2`, {}), 201);
});
