/**
 * The change feed streamed: one long-lived answer per follower (NDJSON, one feed page a line; or a
 * WebSocket, one message a page: feed_sockets.ts), in place of a request per page. Followers that
 * read the feed alike (a view: cluster_view.ts viewKey) and stand at the same cursor form a group;
 * each group has one waiter on the feed and makes each page once (FeedPages), then writes the same
 * bytes to every follower of the group. A waiting follower holds no promise or closure of its own:
 * it is an entry in its group's set.
 *
 * A follower that does not read is cut off once more than MAX_BUFFERED_BYTES wait for it (the
 * answer is aborted; it resumes from its last cursor), and never delays the others: a write only
 * queues shared bytes. When nothing a view sees happens, its streams get an empty page (with the
 * current cursor) every `heartbeatMs`, so that a follower can tell a quiet feed from a dead one.
 */
import type { ChangeFeed, FeedPage } from "./feed.ts";
import type { EncodedJson } from "./encoded_json.ts";
import type { FeedPages } from "./feed_pages.ts";
import { ApiError } from "./errors.ts";
import { StoreUnavailableError } from "./store/store.ts";

/** Bytes queued for one stream beyond which its follower is cut off. */
export const MAX_BUFFERED_BYTES = 1 << 20;

/** How a group reads the feed: how it makes its pages, and whether its view still holds. */
export interface StreamView {
  /** What makes followers read the feed alike (cluster_view.ts viewKey). */
  key: string;
  /** The longest its streams go without a line (an empty page when nothing happened). */
  heartbeatMs: number;
  /** The page as this view reads it, encoded. */
  render(page: FeedPage): Promise<EncodedJson>;
  /** Undefined while the view still holds; otherwise the error line that ends its streams. */
  lapsed(): Promise<Uint8Array | undefined>;
}

/**
 * Where one follower's pages go (a stream's body, a socket): each write queues shared bytes, never
 * waits; a follower that falls behind is cut off. It ends once, whatever the reason.
 */
export abstract class FeedSink {
  /** Resolves when it ended (for whoever holds a place for it). */
  readonly ended: Promise<void>;
  /** Called once when it ends (its group forgets it). */
  onEnd: () => void = () => {};
  private open = true;
  private markEnded!: () => void;

  constructor() {
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Queues a page's line; cuts the follower off instead when it is behind. */
  abstract write(line: Uint8Array): void;
  /** Ends it after what is queued (a last line, if given). */
  abstract close(last?: Uint8Array): void;

  protected finish(): void {
    if (!this.open) return;
    this.open = false;
    this.markEnded();
    this.onEnd();
  }
}

/** One follower's answer: its body. */
export class FeedStream extends FeedSink {
  readonly body: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;

  /** `first`: its first line, queued now, which may be larger than the bound by itself. */
  constructor(first: Uint8Array) {
    super();
    const highWaterMark = MAX_BUFFERED_BYTES + first.length;
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.controller = controller;
      },
      cancel: () => this.finish(),
    }, new ByteLengthQueuingStrategy({ highWaterMark }));
    this.controller.enqueue(first);
  }

  /**
   * Queues `line`; a follower already behind by more than MAX_BUFFERED_BYTES (beyond its first
   * line, a catch-up page that may be larger) is cut off instead.
   */
  write(line: Uint8Array): void {
    if (!this.isOpen) return;
    if ((this.controller.desiredSize ?? 0) < 0) {
      this.controller.error(
        new Error(`the follower read nothing of ${MAX_BUFFERED_BYTES} bytes queued for it`),
      );
      this.finish();
      return;
    }
    this.controller.enqueue(line);
  }

  /** Ends the answer after what is queued (a last line, if given). */
  close(last?: Uint8Array): void {
    if (!this.isOpen) return;
    if (last) this.controller.enqueue(last);
    this.controller.close();
    this.finish();
  }
}

/** Followers of one view at one cursor, fed by one waiter on the feed. */
class Group {
  readonly streams = new Set<FeedSink>();
  private stop = new AbortController();

  constructor(readonly view: StreamView, public cursor: string) {}

  add(stream: FeedSink): void {
    // A group left empty stopped its wait; a stream that joins before it is gone starts it again.
    if (this.stop.signal.aborted) this.stop = new AbortController();
    this.streams.add(stream);
    stream.onEnd = () => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stop.abort();
    };
  }

  get signal(): AbortSignal {
    return this.stop.signal;
  }

  /** Writes `line` to every stream (in one turn: a write only queues shared bytes). */
  write(line: Uint8Array): void {
    for (const stream of [...this.streams]) stream.write(line);
  }

  closeAll(last?: Uint8Array): void {
    for (const stream of [...this.streams]) stream.close(last);
  }
}

export class FeedStreams {
  private readonly groups = new Map<string, Group>();

  constructor(private readonly feed: ChangeFeed, private readonly pages: FeedPages) {}

  /** Streams waiting now (for tests and the benchmark). */
  get size(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.streams.size;
    return n;
  }

  /**
   * A stream of `view` whose first line is `first` (the page after the follower's cursor, which
   * ends at `cursor`), then every page after `cursor` its view sees.
   */
  open(view: StreamView, cursor: string, first: EncodedJson): FeedStream {
    const stream = new FeedStream(lineOf(first));
    this.join(stream, view, cursor);
    return stream;
  }

  /**
   * Adds `sink` (its first line, the page after the follower's cursor, already queued) to the
   * followers of `view` at `cursor`.
   */
  join(stream: FeedSink, view: StreamView, cursor: string): void {
    if (!stream.isOpen) return;
    const key = groupKey(view, cursor);
    const found = this.groups.get(key);
    if (found) return found.add(stream);
    const group = new Group(view, cursor);
    group.add(stream);
    this.groups.set(key, group);
    this.pump(group).catch((err) => group.closeAll(errorLine(err)));
  }

  /**
   * Waits for the group's next page, writes it to every stream, moves the group to the page's
   * cursor (into the group already there, if any), and again, while it has streams.
   */
  private async pump(group: Group): Promise<void> {
    const { view } = group;
    let written = performance.now();
    try {
      while (group.streams.size > 0) {
        const wait = Math.max(0, written + view.heartbeatMs - performance.now());
        const page = await this.feed.since(group.cursor, wait, group.signal);
        if (group.streams.size === 0) return;
        if (page === "expired") return group.closeAll(EXPIRED_LINE);
        // A closed feed (the manager stopping) ends every stream: its server waits for them.
        if (this.feed.isClosed) return group.closeAll();
        const lapsed = await view.lapsed();
        if (lapsed) return group.closeAll(lapsed);
        const answer = await this.pages.answer(
          view.key,
          group.cursor,
          page,
          () => view.render(page),
        );
        if (answer.events > 0 || performance.now() >= written + view.heartbeatMs) {
          group.write(lineOf(answer));
          written = performance.now();
        }
        if (!this.move(group, page.cursor)) return;
      }
    } finally {
      const key = groupKey(view, group.cursor);
      if (this.groups.get(key) === group) this.groups.delete(key);
    }
  }

  /** Moves `group` to `cursor`; false when another group stood there and took its streams. */
  private move(group: Group, cursor: string): boolean {
    const from = groupKey(group.view, group.cursor);
    if (this.groups.get(from) === group) this.groups.delete(from);
    group.cursor = cursor;
    const to = groupKey(group.view, cursor);
    const there = this.groups.get(to);
    if (!there || there === group) {
      this.groups.set(to, group);
      return true;
    }
    for (const stream of [...group.streams]) there.add(stream);
    group.streams.clear();
    return false;
  }
}

function groupKey(view: StreamView, cursor: string): string {
  return `${view.key}|${view.heartbeatMs}|${cursor}`;
}

const ENCODER = new TextEncoder();
const LINES = new WeakMap<EncodedJson, Uint8Array>();

/** A page as a line of the stream (a socket's message): its JSON and a newline, made once. */
export function lineOf(answer: EncodedJson): Uint8Array {
  let line = LINES.get(answer);
  if (!line) {
    line = new Uint8Array(answer.bytes.length + 1);
    line.set(answer.bytes);
    line[answer.bytes.length] = 0x0a;
    LINES.set(answer, line);
  }
  return line;
}

/**
 * An error as the stream's last line, `{error: {code, message}}` as the API answers it: the
 * follower resumes from its last cursor (or lists again after feed_expired).
 */
export function errorLine(err: unknown): Uint8Array {
  const api = err instanceof ApiError
    ? err
    : err instanceof StoreUnavailableError
    ? new ApiError("store_unavailable", err.message)
    : new ApiError("internal", `The feed stream failed: ${(err as Error)?.message ?? err}`);
  return ENCODER.encode(JSON.stringify(api.toBody()) + "\n");
}

const EXPIRED_LINE = errorLine(
  new ApiError(
    "feed_expired",
    "The cursor is too old or from before a manager restart: take a new cursor (the feed without 'after'), list ports and nodes again, then follow from that cursor",
  ),
);
