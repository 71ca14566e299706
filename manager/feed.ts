/**
 * The change feed agents follow: ports, nodes and security groups as they appear, change and leave. It lives in the
 * manager's memory, numbered within an epoch (one per process start), like a Kubernetes watch: a
 * follower resumes from its cursor, and when the cursor is too old or from another epoch it is told
 * to list everything again (410) and continue from the cursor the list gave it.
 */
import { setImmediate } from "node:timers";
import type { MirrorInfo, Port, RouterInfo, ServiceInfo } from "@knitter/common";
import type { SecurityGroup } from "@knitter/common";
import type { NodeRecord } from "./model.ts";

export type FeedEvent =
  | { seq: number; type: "port"; op: "put" | "delete"; port: Port }
  | { seq: number; type: "node"; op: "put" | "delete"; node: NodeRecord }
  | { seq: number; type: "router"; op: "put" | "delete"; router: RouterInfo }
  | { seq: number; type: "mirror"; op: "put" | "delete"; mirror: MirrorInfo }
  | { seq: number; type: "service"; op: "put" | "delete"; service: ServiceInfo }
  | {
    seq: number;
    type: "securityGroup";
    op: "put" | "delete";
    securityGroup: SecurityGroup;
  };

/** Waiting followers answered in one turn of the event loop (wakeAll). */
const WAKE_BATCH = 256;

type Unnumbered<T> = T extends unknown ? Omit<T, "seq"> : never;

export interface FeedPage {
  cursor: string;
  events: FeedEvent[];
}

export class ChangeFeed {
  readonly epoch: string = crypto.randomUUID().slice(0, 8);
  private readonly events: FeedEvent[] = [];
  private seq = 0;
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(private readonly capacity = 20000) {}

  publish(event: Unnumbered<FeedEvent>): void {
    this.events.push({ ...event, seq: ++this.seq } as FeedEvent);
    if (this.events.length > this.capacity) {
      this.events.splice(0, this.events.length - this.capacity);
    }
    this.wakeAll();
  }

  /**
   * Answers the waiting followers WAKE_BATCH at a time, a turn of the event loop apart: the
   * answers of one batch are written out before the next batch is computed, so the first
   * followers do not wait for thousands of others' answers to be made. The turns are
   * setImmediate's: nested setTimeout(0) would be held 4 ms each after the fifth (HTML timers).
   */
  private wakeAll(): void {
    if (this.waiters.size === 0) return;
    const woken = [...this.waiters];
    this.waiters.clear();
    const batch = (from: number) => {
      for (const wake of woken.slice(from, from + WAKE_BATCH)) wake();
      if (from + WAKE_BATCH < woken.length) setImmediate(() => batch(from + WAKE_BATCH));
    };
    batch(0);
  }

  /**
   * Answers every waiting follower now, and later ones without waiting: a graceful server
   * shutdown waits for pending requests, and long polls would hold it for their whole timeout.
   */
  close(): void {
    this.closed = true;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  /** Whether close() was called: waits end at once, and streams end (feed_streams.ts). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Where a follower that has just listed everything continues from. */
  cursor(): string {
    return `${this.epoch}:${this.seq}`;
  }

  /**
   * The events after `cursor`, waiting up to `timeoutMs` for the first one. "expired" when the
   * cursor cannot be served: another epoch, or events it needs were already dropped.
   */
  async since(
    cursor: string,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<FeedPage | "expired"> {
    const [epoch, seqText] = cursor.split(":");
    const after = Number(seqText);
    if (epoch !== this.epoch || !Number.isInteger(after) || after < 0 || after > this.seq) {
      return "expired";
    }
    if (this.dropped(after)) return "expired";
    if (after === this.seq && timeoutMs > 0 && !this.closed) await this.wait(timeoutMs, signal);
    // Events it needs may have been dropped while it waited (more than `capacity` at once).
    if (this.dropped(after)) return "expired";
    return { cursor: this.cursor(), events: this.eventsAfter(after) };
  }

  /** Whether events after `seq` were already dropped. */
  private dropped(seq: number): boolean {
    const oldest = this.events.length ? this.events[0].seq : this.seq + 1;
    return seq + 1 < oldest;
  }

  /** The events after `seq`: numbered without gaps, so found by position, not by a scan. */
  private eventsAfter(seq: number): FeedEvent[] {
    if (this.events.length === 0) return [];
    return this.events.slice(Math.max(0, seq + 1 - this.events[0].seq));
  }

  private wait(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
      signal?.addEventListener("abort", done);
    });
  }
}
