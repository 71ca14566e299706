/**
 * DSCP marking at the manager: a network's `dscp` (create, change, clear) reaches its ports as
 * `networkDscp`, a change reaches the agents' feed through the network's ports, and values that
 * are not a DSCP are refused with an error that says what a DSCP is.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("dscp: a network's marking reaches its ports, and a change reaches the feed", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const created = must(
    await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24", { dscp: 46 })),
    201,
  );
  assert.equal(created.dscp, 46);
  const p1 = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  assert.equal(p1.networkDscp, 46);
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201);
  const plain = must(await t.call("PUT", "tenants/acme/networks/red/ports/p2", {}), 201);
  assert.equal(plain.networkDscp, undefined, "no marking unless the network asks for one");

  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor;
  assert.equal(must(await t.call("PATCH", BLUE, { dscp: 0 }, TOKEN.acme), 200).dscp, 0);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const seen = page.events.map((e: { type: string; op: string }) => `${e.type}:${e.op}`);
  assert.deepEqual(seen, ["port:put"], "the agents hear of it through the network's port");
  assert.equal(page.events[0].port.networkDscp, 0, "0 is a marking too: it clears the pods' own");

  const cleared = must(await t.call("PATCH", BLUE, { dscp: null }, TOKEN.acme), 200);
  assert.equal(cleared.dscp, undefined);
  assert.equal(must(await t.call("GET", `${BLUE}/ports/p1`), 200).networkDscp, undefined);
  const again = must(
    await t.call("GET", `feed?after=${page.cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.equal(again.events.length, 1);
  assert.equal(again.events[0].port.networkDscp, undefined);

  // The same value again changes nothing the agents must hear of.
  must(await t.call("PATCH", BLUE, { description: "data plane" }, TOKEN.acme), 200);
  const quiet = must(
    await t.call("GET", `feed?after=${again.cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.deepEqual(quiet.events, []);
});

Deno.test("dscp: values that are not a DSCP are refused on create and change, saying what is", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const bad: [unknown, RegExp][] = [
    [64, /0\.\.63/],
    [184, /not the TOS byte 184/],
    [-1, /0\.\.63/],
    [4.5, /integer/],
    ["46", /integer/],
    [true, /integer/],
  ];
  for (const [dscp, message] of bad) {
    const r1 = await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24", { dscp }));
    const e1 = mustFail(r1, 400, "invalid_request");
    assert.equal(r1.body.error.field, "dscp", JSON.stringify(dscp));
    assert.match(e1, message, JSON.stringify(dscp));
    const r2 = await t.call("PATCH", BLUE, { dscp }, TOKEN.acme);
    const e2 = mustFail(r2, 400, "invalid_request");
    assert.equal(r2.body.error.field, "dscp", JSON.stringify(dscp));
    assert.match(e2, message, JSON.stringify(dscp));
  }
  assert.equal(must(await t.call("GET", BLUE), 200).dscp, undefined, "nothing was changed");
});
