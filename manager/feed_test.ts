/** The change feed: what agents follow to learn of ports and nodes on other nodes. */
import assert from "node:assert/strict";
import { ChangeFeed } from "./feed.ts";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const node = (name: string) => ({
  name,
  underlayIp: "192.0.2.1",
  labels: {},
  registeredAt: "",
  updatedAt: "",
});

Deno.test("feed: events after a cursor, in order, and an empty page when nothing happened", async () => {
  const feed = new ChangeFeed();
  const start = feed.cursor();
  feed.publish({ type: "node", op: "put", node: node("a") });
  feed.publish({ type: "node", op: "delete", node: node("a") });
  const page = await feed.since(start, 0);
  assert.ok(page !== "expired");
  assert.deepEqual(page.events.map((e) => [e.seq, e.op]), [[1, "put"], [2, "delete"]]);
  const idle = await feed.since(page.cursor, 0);
  assert.ok(idle !== "expired");
  assert.deepEqual(idle.events, []);
  assert.equal(idle.cursor, page.cursor);
});

Deno.test("feed: a waiting follower wakes on the next event", async () => {
  const feed = new ChangeFeed();
  const waiting = feed.since(feed.cursor(), 30_000);
  feed.publish({ type: "node", op: "put", node: node("b") });
  const page = await waiting;
  assert.ok(page !== "expired");
  assert.equal(page.events.length, 1);
});

Deno.test("feed: cursors of another epoch, from the future, or past the kept window are expired", async () => {
  const feed = new ChangeFeed(3);
  const old = feed.cursor();
  for (let i = 0; i < 5; i++) feed.publish({ type: "node", op: "put", node: node(`n${i}`) });
  assert.equal(await feed.since(old, 0), "expired");
  assert.equal(await feed.since("deadbeef:1", 0), "expired");
  assert.equal(await feed.since(`${feed.epoch}:99`, 0), "expired");
  const recent = await feed.since(`${feed.epoch}:2`, 0);
  assert.ok(recent !== "expired");
  assert.deepEqual(recent.events.map((e) => e.seq), [3, 4, 5]);
});

Deno.test("feed over the API: a node follows ports and nodes; tenants may not read it", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);

  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.0.2.2" }, TOKEN.worker2), 201);
  const port = must(
    await t.call(
      "PUT",
      "tenants/acme/networks/blue/ports/p1",
      { interface: "eth1" },
      TOKEN.worker2,
    ),
    201,
  );
  // A repeated PUT that changes nothing is not news.
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/p1", {}, TOKEN.worker2), 200);
  must(
    await t.call("DELETE", "tenants/acme/networks/blue/ports/p1", undefined, TOKEN.worker2),
    204,
  );

  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.deepEqual(
    page.events.map((e: { type: string; op: string }) => `${e.type}:${e.op}`),
    ["node:put", "port:put", "port:delete"],
  );
  assert.deepEqual(page.events[1].port, port);
  assert.equal(page.events[1].port.node, "worker2");
  assert.equal(page.events[2].port.ip, port.ip);

  mustFail(await t.call("GET", "feed", undefined, TOKEN.acme), 403, "forbidden");
  mustFail(
    await t.call("GET", "feed?after=00000000:1", undefined, TOKEN.worker1),
    410,
    "feed_expired",
    {
      message: /list ports and nodes again/,
    },
  );
  mustFail(
    await t.call("GET", "feed?after=nonsense", undefined, TOKEN.worker1),
    400,
    "invalid_request",
    {
      field: "query.after",
    },
  );
});

Deno.test("feed: close answers waiting followers at once, and later ones without waiting", async () => {
  const feed = new ChangeFeed();
  const waiting = feed.since(feed.cursor(), 30_000);
  feed.close();
  const page = await waiting;
  assert.ok(page !== "expired");
  assert.deepEqual(page.events, []);
  const later = await feed.since(feed.cursor(), 30_000);
  assert.ok(later !== "expired");
  assert.equal(later.cursor, feed.cursor());
});

Deno.test("feed: a follower whose events were dropped while it waited is told to list again", async () => {
  const feed = new ChangeFeed(2);
  const waiting = feed.since(feed.cursor(), 30_000);
  // Three events at once, more than the feed keeps: the first is gone when the follower reads.
  for (let i = 0; i < 3; i++) feed.publish({ type: "node", op: "put", node: node(`d${i}`) });
  assert.equal(await waiting, "expired");
});

Deno.test("feed: thousands of waiting followers are all answered, in order of waiting", async () => {
  const feed = new ChangeFeed();
  const answered: number[] = [];
  const waiting = Array.from(
    { length: 1000 },
    (_, i) => feed.since(feed.cursor(), 30_000).then(() => answered.push(i)),
  );
  feed.publish({ type: "node", op: "put", node: node("many") });
  await Promise.all(waiting);
  assert.deepEqual(answered, [...answered.keys()]);
});
