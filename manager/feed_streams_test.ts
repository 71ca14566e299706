/**
 * Issue 32, the streamed feed (feed_streams.ts): one answer per follower carrying a page a line.
 * Through the app with a real store; the slow-reader test through the hub itself, with a real feed.
 */
import assert from "node:assert/strict";
import { ChangeFeed } from "./feed.ts";
import { FeedPages } from "./feed_pages.ts";
import { FeedStreams, MAX_BUFFERED_BYTES } from "./feed_streams.ts";
import { EncodedJson } from "./encoded_json.ts";
import { feedLines, must, mustFail, net, streamFeed, testApp, TOKEN } from "./test_support.ts";

const NET = "tenants/acme/networks/blue";

Deno.test("feed stream: the first line is the page after the cursor, then each change comes as a line", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
  const early = must(await t.call("PUT", `${NET}/ports/early`, { node: "worker2" }), 201);

  const feed = await streamFeed(t, TOKEN.worker1, cursor);
  assert.equal(feed.status, 200);
  const first = await feed.next();
  assert.deepEqual(first.events.map((e: { port: { id: string } }) => e.port.id), [early.id]);

  const late = must(await t.call("PUT", `${NET}/ports/late`, { node: "worker2" }), 201);
  const second = await feed.next();
  assert.deepEqual(second.events.map((e: { port: { id: string } }) => e.port.id), [late.id]);
  must(await t.call("DELETE", `${NET}/ports/late`), 204);
  const third = await feed.next();
  assert.deepEqual(third.events.map((e: { op: string }) => e.op), ["delete"]);

  // Its cursors resume a long poll where the stream stopped.
  await feed.cancel();
  const idle = must(
    await t.call("GET", `feed?after=${third.cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  assert.deepEqual(idle.events, []);
});

Deno.test("feed stream: nothing happening, an empty page with the current cursor comes every `timeout` seconds", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
  const feed = await streamFeed(t, TOKEN.worker1, cursor, 1);
  const first = await feed.next();
  const beat = await feed.next();
  // On etcd the cursor moves on without events (the feed's marker writes): it still resumes.
  assert.deepEqual(beat.events, []);
  assert.equal(beat.cursor.split(":")[0], first.cursor.split(":")[0]);
  await feed.cancel();
  must(await t.call("GET", `feed?after=${beat.cursor}&timeout=0`, undefined, TOKEN.worker1), 200);
});

Deno.test("feed stream: refused like a long poll: no token 401, a tenant 403, an old cursor 410", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
  mustFail(
    await t.call("GET", `feed?after=${cursor}&stream=ndjson`, undefined, null),
    401,
    "unauthorized",
  );
  mustFail(
    await t.call("GET", `feed?after=${cursor}&stream=ndjson`, undefined, TOKEN.acme),
    403,
    "forbidden",
  );
  mustFail(
    await t.call("GET", `feed?after=deadbeef:0&stream=ndjson`, undefined, TOKEN.worker1),
    410,
    "feed_expired",
  );
  mustFail(
    await t.call("GET", `feed?after=${cursor}&stream=sse`, undefined, TOKEN.worker1),
    400,
    "invalid_request",
  );
});

Deno.test("feed stream: a stream holds its place among its node's requests until it ends", async () => {
  await using t = await testApp({ tenants: ["acme"], fairness: { node: { concurrent: 1 } } });
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
  const feed = await streamFeed(t, TOKEN.worker1, cursor);
  await feed.next();
  mustFail(await t.call("GET", "feed", undefined, TOKEN.worker1), 429, "too_many_requests");
  await feed.cancel();
  must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
});

Deno.test("feed stream: closing the feed (the manager stopping) ends every stream", async () => {
  await using t = await testApp({ tenants: ["acme"] });
  const { cursor } = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200);
  const feed = await streamFeed(t, TOKEN.worker1, cursor);
  await feed.next();
  t.ctx.feed.close();
  assert.equal(await feed.next(), undefined, "the answer ends");
});

Deno.test("feed stream: a follower that stops reading is cut off, and the others get every change", async () => {
  const feed = new ChangeFeed();
  const streams = new FeedStreams(feed, new FeedPages());
  const view = {
    key: "whole",
    heartbeatMs: 60_000,
    render: (page: { cursor: string; events: unknown[] }) => Promise.resolve(EncodedJson.of(page)),
    lapsed: () => Promise.resolve(undefined),
  };
  const start = feed.cursor();
  const open = () => streams.open(view, start, EncodedJson.of({ cursor: start, events: [] }));
  const slow = open();
  const fast = [open(), open()].map((s) => feedLines(new Response(s.body)));
  for (const f of fast) await f.next();
  // Each event about 10 KB: the slow follower falls behind by more than its bound.
  const labels = { note: "x".repeat(10_000) };
  const events = Math.ceil((2 * MAX_BUFFERED_BYTES) / 10_000);
  for (let i = 0; i < events; i++) {
    const node = {
      name: `n${i}`,
      underlayIp: "192.0.2.1",
      labels,
      registeredAt: "",
      updatedAt: "",
    };
    feed.publish({ type: "node", op: "put", node });
    for (const f of fast) {
      const page = await f.next();
      assert.deepEqual(page.events.map((e: { node: { name: string } }) => e.node.name), [`n${i}`]);
    }
  }
  await slow.ended;
  assert.equal(slow.isOpen, false);
  // What was queued before the cut is lost with it: the follower resumes from its last cursor.
  await assert.rejects(new Response(slow.body).text(), /read nothing of/);
  assert.equal(streams.size, 2);
  feed.close();
});

Deno.test("feed stream: a first page larger than the bound (a long catch-up) is not cut when the next change comes", async () => {
  const feed = new ChangeFeed();
  const streams = new FeedStreams(feed, new FeedPages());
  const view = {
    key: "whole",
    heartbeatMs: 60_000,
    render: (page: { cursor: string; events: unknown[] }) => Promise.resolve(EncodedJson.of(page)),
    lapsed: () => Promise.resolve(undefined),
  };
  const start = feed.cursor();
  const big = { cursor: start, events: [{ note: "x".repeat(2 * MAX_BUFFERED_BYTES) }] };
  const stream = streams.open(view, start, EncodedJson.of(big));
  const other = feedLines(
    new Response(streams.open(view, start, EncodedJson.of({ cursor: start, events: [] })).body),
  );
  await other.next();
  const labels = {};
  feed.publish({
    type: "node",
    op: "put",
    node: { name: "n1", underlayIp: "192.0.2.1", labels, registeredAt: "", updatedAt: "" },
  });
  // The other stream has the change: it was written to both, the big first page still unread.
  assert.equal((await other.next()).events[0].node.name, "n1");
  const lines = feedLines(new Response(stream.body));
  assert.equal((await lines.next()).events[0].note.length, 2 * MAX_BUFFERED_BYTES);
  assert.equal((await lines.next()).events[0].node.name, "n1");
  assert.equal(stream.isOpen, true);
  feed.close();
});
