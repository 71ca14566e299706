/**
 * What the agent knows of the rest of the cluster: every port and every node's tunnel endpoint,
 * listed once and then followed through the manager's change feed. A broken or expired feed is
 * listed again; nothing here is ever guessed.
 */
import type { FeedEvent, Logger, ManagerClient, Port } from "@knitter/common";

const FEED_WAIT_S = 25;
const MAX_BACKOFF_MS = 5000;

export class RemoteView {
  private readonly portsByKey = new Map<string, Port>();
  private readonly nodeIps = new Map<string, string>();
  private stopped = new AbortController();
  private loop?: Promise<void>;

  constructor(
    private readonly manager: ManagerClient,
    /** This node: its own ports are the journal's business, not the feed's. */
    private readonly nodeName: string,
    private readonly onChange: () => void,
    private readonly log: Logger,
  ) {}

  ports(): Iterable<Port> {
    return this.portsByKey.values();
  }

  nodeIp(node: string): string | undefined {
    return this.nodeIps.get(node);
  }

  /** Lists everything once (so the first flows are complete), then follows the feed in the background. */
  async start(): Promise<void> {
    const cursor = await this.relist();
    this.loop = this.follow(cursor);
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  /** Takes a cursor first, then lists: events during the listing are replayed, never lost. */
  private async relist(): Promise<string> {
    const cursor = await this.manager.feedCursor();
    const [ports, nodes] = await Promise.all([this.manager.listPorts(), this.manager.listNodes()]);
    this.portsByKey.clear();
    for (const p of ports) this.portsByKey.set(key(p), p);
    this.nodeIps.clear();
    for (const n of nodes) this.nodeIps.set(n.name, n.underlayIp);
    this.onChange();
    return cursor;
  }

  private async follow(cursor: string): Promise<void> {
    let backoff = 100;
    while (!this.stopped.signal.aborted) {
      try {
        const page = await this.manager.feedSince(cursor, FEED_WAIT_S, this.stopped.signal);
        if (page === "expired") {
          this.log.info("change feed expired, listing again");
          cursor = await this.relist();
        } else {
          cursor = page.cursor;
          // Our own ports' events echo what this agent just did: no flow change follows from them.
          if (page.events.map((e) => this.apply(e)).some(Boolean)) this.onChange();
        }
        backoff = 100;
      } catch (err) {
        if (this.stopped.signal.aborted) return;
        this.log.warn("change feed interrupted", {
          error: (err as Error).message,
          retryInMs: backoff,
        });
        await abortableDelay(backoff, this.stopped.signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  /** Applies one event; true when it can change this node's flows. */
  private apply(e: FeedEvent): boolean {
    if (e.type === "port") {
      if (e.op === "put") this.portsByKey.set(key(e.port), e.port);
      else this.portsByKey.delete(key(e.port));
      return e.port.node !== this.nodeName;
    }
    if (e.op === "put") this.nodeIps.set(e.node.name, e.node.underlayIp);
    else this.nodeIps.delete(e.node.name);
    return e.node.name !== this.nodeName;
  }
}

function key(p: Port): string {
  return `${p.networkId}/${p.id}`;
}

function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      resolve();
    }
  });
}
