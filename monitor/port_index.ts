/**
 * The manager's ports in memory, by pod UID, kept current by following the manager's change feed
 * (list, then follow from the cursor taken before the list; list again when the cursor expires).
 */
import type { Logger, ManagerClient, Port } from "@knitter/common";
import { ManagerUnavailableError } from "@knitter/common";

const FEED_WAIT_S = 25;
const MAX_BACKOFF_MS = 10_000;

export type PortChange = (port: Port, op: "put" | "delete") => void;

export class PortIndex {
  private readonly ports = new Map<string, Port>();
  private readonly byUid = new Map<string, Set<string>>();
  private readonly stopping = new AbortController();
  private loop?: Promise<void>;
  private readonly ready: Promise<void>;
  private markReady!: () => void;

  constructor(
    private readonly manager: ManagerClient,
    private readonly onChange: PortChange,
    private readonly log: Logger,
  ) {
    this.ready = new Promise((resolve) => (this.markReady = resolve));
  }

  start(): void {
    this.loop = this.follow();
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  forPod(uid: string): Port[] {
    return [...this.byUid.get(uid) ?? []].map((k) => this.ports.get(k)!);
  }

  get size(): number {
    return this.ports.size;
  }

  /** Every port the manager holds, as its feed last said. */
  all(): IterableIterator<Port> {
    return this.ports.values();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
  }

  private async follow(): Promise<void> {
    let cursor: string | undefined;
    let backoff = 200;
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        if (cursor === undefined) cursor = await this.relist();
        const page = await this.manager.feedSince(cursor, FEED_WAIT_S, signal);
        if (page === "expired") {
          this.log.info("manager feed expired; listing ports again");
          cursor = undefined;
          continue;
        }
        for (const e of page.events) if (e.type === "port") this.apply(e.port, e.op);
        cursor = page.cursor;
        backoff = 200;
      } catch (err) {
        if (signal.aborted) return;
        if (!(err instanceof ManagerUnavailableError)) {
          this.log.error("following the manager's feed failed", { error: String(err) });
        }
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  /** Takes a cursor, lists every port, and answers the cursor to follow from. */
  private async relist(): Promise<string> {
    const cursor = await this.manager.feedCursor();
    const listed = await this.manager.listPorts();
    const seen = new Set<string>();
    for (const p of listed) {
      seen.add(keyOf(p));
      this.apply(p, "put");
    }
    for (const [k, p] of [...this.ports]) if (!seen.has(k)) this.apply(p, "delete");
    this.markReady();
    return cursor;
  }

  private apply(port: Port, op: "put" | "delete"): void {
    const k = keyOf(port);
    const old = this.ports.get(k);
    if (old?.pod?.uid) this.byUid.get(old.pod.uid)?.delete(k);
    if (old?.pod?.uid && this.byUid.get(old.pod.uid)?.size === 0) this.byUid.delete(old.pod.uid);
    if (op === "delete") this.ports.delete(k);
    else {
      this.ports.set(k, port);
      const uid = port.pod?.uid;
      if (uid) {
        let set = this.byUid.get(uid);
        if (!set) this.byUid.set(uid, set = new Set());
        set.add(k);
      }
    }
    this.onChange(port, op);
  }
}

function keyOf(p: Port): string {
  return `${p.networkId}/${p.id}`;
}
