import assert from "node:assert/strict";
import { FakeClock, settle } from "./clock_fake.ts";
import { FeedFollower, type FeedSource } from "./feed_follower.ts";
import type { Logger } from "./log.ts";
import { type FeedEvent, ManagerUnavailableError } from "./manager_client.ts";
import type { Port } from "./api_types.ts";

type Page = { cursor: string; events: FeedEvent[] } | "expired";

/** A manager's feed whose every answer the test gives by hand. */
class FakeFeed implements FeedSource {
  /** Every call, in order: "cursor", "list", "since C". */
  readonly calls: string[] = [];
  private pending: { resolve: (p: Page) => void; reject: (e: unknown) => void }[] = [];
  epoch = "e1";
  seq = 0;
  cursorFails: unknown = undefined;

  feedCursor(): Promise<string> {
    this.calls.push("cursor");
    if (this.cursorFails) return Promise.reject(this.cursorFails);
    return Promise.resolve(`${this.epoch}:${this.seq}`);
  }

  feedSince(cursor: string, _timeoutS: number, signal?: AbortSignal): Promise<Page> {
    this.calls.push(`since ${cursor}`);
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject };
      this.pending.push(entry);
      signal?.addEventListener("abort", () => {
        this.pending = this.pending.filter((p) => p !== entry);
        reject(signal.reason);
      }, { once: true });
    });
  }

  /** Answers the open poll. */
  async answer(page: Page | Error): Promise<void> {
    const p = this.pending.shift();
    if (!p) throw new Error("no poll is open");
    if (page instanceof Error) p.reject(page);
    else p.resolve(page);
    await settle();
  }

  get open(): number {
    return this.pending.length;
  }
}

function port(id: string): Port {
  return { id, networkId: "n1", network: "net", tenant: "t", networkTenant: "t" } as Port;
}

function put(seq: number, id: string): FeedEvent {
  return { seq, type: "port", op: "put", port: port(id) };
}

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function follower(feed: FakeFeed, clock: FakeClock, stream = false) {
  const applied: string[] = [];
  let lists = 0;
  let listFails: Error | undefined;
  const f = new FeedFollower({
    what: "ports",
    source: feed,
    relist() {
      feed.calls.push("list");
      if (listFails) return Promise.reject(listFails);
      lists++;
      return Promise.resolve();
    },
    apply: (events) => applied.push(...events.map((e) => `${e.seq}`)),
    waitSeconds: 25,
    hangMs: 5000,
    backoff: { jitter: 0 },
    clock,
    log: quiet,
    stream,
  });
  return {
    f,
    applied,
    lists: () => lists,
    failLists: (e?: Error) => (listFails = e),
  };
}

Deno.test("FeedFollower takes a cursor, lists, then follows from that cursor, page by page", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock);
  await f.start();
  await settle();
  assert.equal(f.isSynced, true);
  assert.deepEqual(feed.calls, ["cursor", "list", "since e1:0"]);
  await feed.answer({ cursor: "e1:2", events: [put(1, "a"), put(2, "b")] });
  await feed.answer({ cursor: "e1:2", events: [] }); // the manager's wait ended: nothing new
  await feed.answer({ cursor: "e1:3", events: [put(3, "c")] });
  assert.deepEqual(applied, ["1", "2", "3"]);
  assert.deepEqual(feed.calls.slice(2), ["since e1:0", "since e1:2", "since e1:2", "since e1:3"]);
  assert.equal(f.health().lists, 1);
  await f.stop();
  assert.equal(feed.open, 0);
});

Deno.test("FeedFollower lists again after a 410 (the manager restarted: a new epoch) and follows the new cursor", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f, lists } = follower(feed, clock);
  await f.start();
  await settle();
  feed.epoch = "e2";
  await feed.answer("expired");
  assert.deepEqual(feed.calls, ["cursor", "list", "since e1:0", "cursor", "list", "since e2:0"]);
  assert.equal(lists(), 2);
  assert.deepEqual(clock.slept.filter((ms) => ms !== 30_000), [], "no backoff for a 410");
  await f.stop();
});

Deno.test("FeedFollower retries a failed poll from the same cursor after a growing backoff, without listing, and resets it after a success", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock);
  await f.start();
  await settle();
  const down = () => new ManagerUnavailableError("connection refused");
  await feed.answer(down());
  assert.equal(feed.open, 0, "waits before the next poll");
  await clock.advance(200);
  await feed.answer(down());
  await clock.advance(399);
  assert.equal(feed.open, 0, "the second wait is 400 ms");
  await clock.advance(1);
  await feed.answer({ cursor: "e1:1", events: [put(1, "a")] });
  await feed.answer(down());
  await clock.advance(200);
  assert.equal(feed.open, 1, "after a success the backoff starts over");
  assert.deepEqual(feed.calls.filter((c) => c === "list").length, 1);
  assert.deepEqual(
    feed.calls.filter((c) => c.startsWith("since")),
    ["since e1:0", "since e1:0", "since e1:0", "since e1:1", "since e1:1"],
  );
  assert.deepEqual(applied, ["1"]);
  assert.equal(f.health().errors, 3);
  await f.stop();
});

Deno.test("FeedFollower abandons a poll that outlives waitSeconds + hangMs, is stale meanwhile, and resumes", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock);
  await f.start();
  await settle();
  assert.equal(f.notReady(), undefined);
  await clock.advance(29_999);
  assert.equal(feed.open, 1, "still within waitSeconds + hangMs");
  await clock.advance(1);
  // The hung poll was aborted and counted; a retry waits its backoff.
  assert.equal(feed.open, 0);
  assert.equal(f.health().hung, 1);
  assert.equal(f.isStale, false, "exactly at the deadline it is not stale yet");
  await clock.advance(1);
  assert.equal(f.isStale, true);
  assert.match(
    f.notReady()!,
    /^ports: nothing heard for 30 s \(a live feed answers within 30 s\)$/,
  );
  await clock.advance(199);
  assert.equal(feed.open, 1);
  await feed.answer({ cursor: "e1:1", events: [put(1, "a")] });
  assert.equal(f.isStale, false);
  assert.equal(f.notReady(), undefined);
  assert.deepEqual(applied, ["1"]);
  await f.stop();
});

Deno.test("FeedFollower: a failed list is retried with backoff, and the follower is behind until it succeeds", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f, failLists, lists } = follower(feed, clock);
  await f.start();
  await settle();
  failLists(new ManagerUnavailableError("down"));
  await feed.answer("expired");
  assert.deepEqual(feed.calls.slice(3), ["cursor", "list"]);
  await clock.advance(200);
  assert.deepEqual(feed.calls.slice(5), ["cursor", "list"]);
  failLists(undefined);
  await clock.advance(400);
  assert.deepEqual(feed.calls.slice(7), ["cursor", "list", "since e1:0"]);
  assert.equal(lists(), 2);
  await f.stop();
});

Deno.test("FeedFollower.start() throws when the first list fails, runs nothing, and may be called again", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f } = follower(feed, clock);
  assert.match(f.notReady()!, /ports: not listed yet/);
  feed.cursorFails = new ManagerUnavailableError("down");
  await assert.rejects(f.start(), /down/);
  await settle();
  assert.deepEqual(feed.calls, ["cursor"]);
  feed.cursorFails = undefined;
  await f.start();
  await f.start(); // already following: nothing more
  await settle();
  assert.deepEqual(feed.calls, ["cursor", "cursor", "list", "since e1:0"]);
  await f.whenSynced();
  await f.stop();
});

Deno.test("FeedFollower.stop() ends a backoff wait at once", async () => {
  const feed = new FakeFeed();
  const clock = new FakeClock();
  const { f } = follower(feed, clock);
  await f.start();
  await settle();
  await feed.answer(new Error("boom"));
  assert.equal(clock.sleeping, 1);
  await f.stop();
  assert.equal(feed.open, 0);
});

type Outcome = "ended" | "expired" | "unsupported";

/** A manager that streams its feed: each stream's pages and end given by hand. */
class StreamingFeed extends FakeFeed {
  private stream?: {
    page: (p: { cursor: string; events: FeedEvent[] }) => void;
    end: (o: Outcome | Error) => void;
  };

  feedStream(
    cursor: string,
    _heartbeatS: number,
    page: (p: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<Outcome> {
    this.calls.push(`stream ${cursor}`);
    return new Promise((resolve, reject) => {
      const end = (o: Outcome | Error) => {
        this.stream = undefined;
        if (o instanceof Error) reject(o);
        else resolve(o);
      };
      this.stream = { page, end };
      signal?.addEventListener("abort", () => end(signal.reason), { once: true });
    });
  }

  async line(page: { cursor: string; events: FeedEvent[] }): Promise<void> {
    this.stream!.page(page);
    await settle();
  }

  async end(o: Outcome | Error): Promise<void> {
    this.stream!.end(o);
    await settle();
  }

  get streaming(): boolean {
    return this.stream !== undefined;
  }
}

Deno.test("FeedFollower streaming: one stream carries every page; when the manager ends it, the next resumes from the last cursor", async () => {
  const feed = new StreamingFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock, true);
  await f.start();
  await settle();
  assert.deepEqual(feed.calls, ["cursor", "list", "stream e1:0"]);
  await feed.line({ cursor: "e1:0", events: [] });
  await feed.line({ cursor: "e1:2", events: [put(1, "a"), put(2, "b")] });
  await feed.line({ cursor: "e1:3", events: [put(3, "c")] });
  assert.deepEqual(applied, ["1", "2", "3"]);
  await feed.end("ended");
  assert.deepEqual(feed.calls.slice(3), ["stream e1:3"], "resumed at once, from the last cursor");
  await feed.end("expired");
  assert.deepEqual(feed.calls.slice(4), ["cursor", "list", "stream e1:0"], "expired: listed again");
  await f.stop();
  assert.equal(feed.streaming, false);
});

Deno.test("FeedFollower streaming: a manager without streams is long-polled from then on", async () => {
  const feed = new StreamingFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock, true);
  await f.start();
  await settle();
  await feed.end("unsupported");
  assert.deepEqual(feed.calls, ["cursor", "list", "stream e1:0", "since e1:0"]);
  await feed.answer({ cursor: "e1:1", events: [put(1, "a")] });
  assert.deepEqual(applied, ["1"]);
  assert.equal(f.streaming, false);
  await f.stop();
});

Deno.test("FeedFollower streaming: a stream silent past the hang deadline is abandoned, and a new one opened after the backoff", async () => {
  const feed = new StreamingFeed();
  const clock = new FakeClock();
  const { f } = follower(feed, clock, true);
  await f.start();
  await settle();
  await feed.line({ cursor: "e1:0", events: [] });
  await clock.advance(29_999);
  assert.equal(feed.streaming, true);
  await clock.advance(1);
  assert.equal(feed.streaming, false, "25 s + 5 s without a line: abandoned");
  assert.equal(f.health().hung, 1);
  await clock.advance(200);
  assert.deepEqual(feed.calls.slice(2), ["stream e1:0", "stream e1:0"]);
  await f.stop();
});

Deno.test("FeedFollower streaming: a stream that breaks off is resumed after the backoff, its pages kept", async () => {
  const feed = new StreamingFeed();
  const clock = new FakeClock();
  const { f, applied } = follower(feed, clock, true);
  await f.start();
  await settle();
  await feed.line({ cursor: "e1:1", events: [put(1, "a")] });
  await feed.end(new ManagerUnavailableError("broke off"));
  assert.equal(feed.streaming, false);
  await clock.advance(200);
  assert.deepEqual(feed.calls.slice(2), ["stream e1:0", "stream e1:1"]);
  assert.deepEqual(applied, ["1"]);
  await f.stop();
});
