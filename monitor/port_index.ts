/**
 * The manager's ports in memory, by pod UID, kept current by following the manager's change feed
 * with the shared follower (common/feed_follower.ts) over a WebSocket as the agents do (then a
 * stream, then long polls, common/feed_source.ts): list, then follow from the cursor taken
 * before the list; list again when the cursor expires (a manager restart); resume after a failure
 * with backoff; abandon a hung poll. While the feed is stale the monitor is not ready.
 */
import {
  FeedFollower,
  type FeedHealth,
  isStablePortId,
  type Logger,
  type ManagerClient,
  type Port,
  retry,
  socketFirst,
} from "@knitter/common";

export interface PortFeedSettings {
  /** How long the manager may hold a poll open when nothing happens. */
  waitSeconds: number;
  /** How much longer a poll may take before it is abandoned as hung. */
  hangMs: number;
}

/** The longest wait between attempts when the manager does not answer. */
const MAX_BACKOFF_MS = 2000;

/** A port changed; `before` is what the index held (a pod it was bound to until now). */
export type PortChange = (port: Port, op: "put" | "delete", before?: Port) => void;

export class PortIndex {
  private readonly ports = new Map<string, Port>();
  private readonly byUid = new Map<string, Set<string>>();
  /** Stable ports with no pod (held for their pod's return), by key. */
  private readonly unbound = new Set<string>();
  /** Ports bound to a pod, by "namespace/name" (whatever the UID). */
  private readonly byName = new Map<string, Set<string>>();
  private readonly stopping = new AbortController();
  private readonly feed: FeedFollower;
  private starting?: Promise<void>;

  constructor(
    private readonly manager: ManagerClient,
    private readonly onChange: PortChange,
    private readonly log: Logger,
    settings: PortFeedSettings = { waitSeconds: 25, hangMs: 15_000 },
  ) {
    this.feed = new FeedFollower({
      what: "the manager's ports",
      // A socket (or a stream) for every page, as the agents follow it: a page of a busy cluster
      // is not a request of its own.
      source: socketFirst(manager, log),
      stream: true,
      relist: () => this.relist(),
      apply: (events) => {
        for (const e of events) if (e.type === "port") this.apply(e.port, e.op);
      },
      // One client, and a refused connection costs the manager nothing: come back soon.
      backoff: { maxMs: MAX_BACKOFF_MS },
      ...settings,
      log,
    });
  }

  /** Lists in the background until the manager answers, then follows its feed. */
  start(): void {
    this.starting = retry(() => this.feed.start(), {
      signal: this.stopping.signal,
      maxMs: MAX_BACKOFF_MS,
      jitter: 0.2,
      onError: (err, retryInMs) =>
        this.log.info("cannot list the manager's ports yet", { error: String(err), retryInMs }),
    }).catch(() => {/* stopped before the manager answered */});
  }

  whenReady(): Promise<void> {
    return this.feed.whenSynced();
  }

  /** Why the ports in memory may not be acted on (not listed yet, the feed stale); else undefined. */
  notReady(): string | undefined {
    return this.feed.notReady();
  }

  health(): FeedHealth {
    return this.feed.health();
  }

  forPod(uid: string): Port[] {
    return [...this.byUid.get(uid) ?? []].map((k) => this.ports.get(k)!);
  }

  /** Stable ports with no pod: addresses held for their pod's return. */
  heldStable(): Port[] {
    return [...this.unbound].map((k) => this.ports.get(k)!);
  }

  /** The ports bound to a pod of this name, whatever its UID. */
  forPodName(namespace: string, name: string): Port[] {
    return [...this.byName.get(`${namespace}/${name}`) ?? []].map((k) => this.ports.get(k)!);
  }

  /** A port by its network's ID and its own. */
  get(networkId: string, id: string): Port | undefined {
    return this.ports.get(portKey(networkId, id));
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
    await this.starting;
    await this.feed.stop();
  }

  /** Lists every port and replaces the memory with them: what went meanwhile is deleted. */
  private async relist(): Promise<void> {
    const listed = await this.manager.listPorts();
    const seen = new Set<string>();
    for (const p of listed) {
      const k = keyOf(p);
      seen.add(k);
      // Unchanged ports queue nothing: after a manager restart the list is mostly what was known.
      const known = this.ports.get(k);
      if (known && JSON.stringify(known) === JSON.stringify(p)) continue;
      this.apply(p, "put");
    }
    for (const [k, p] of [...this.ports]) if (!seen.has(k)) this.apply(p, "delete");
  }

  private apply(port: Port, op: "put" | "delete"): void {
    const k = keyOf(port);
    const old = this.ports.get(k);
    if (old?.pod) {
      unindex(this.byUid, old.pod.uid, k);
      unindex(this.byName, `${old.pod.namespace}/${old.pod.name}`, k);
    }
    this.unbound.delete(k);
    if (op === "delete") this.ports.delete(k);
    else {
      this.ports.set(k, port);
      if (!port.pod && isStablePortId(port.id)) this.unbound.add(k);
      if (port.pod) {
        index(this.byUid, port.pod.uid, k);
        index(this.byName, `${port.pod.namespace}/${port.pod.name}`, k);
      }
    }
    this.onChange(port, op, old);
  }
}

function index(m: Map<string, Set<string>>, at: string | undefined, k: string): void {
  if (at === undefined) return;
  let set = m.get(at);
  if (!set) m.set(at, set = new Set());
  set.add(k);
}

function unindex(m: Map<string, Set<string>>, at: string | undefined, k: string): void {
  if (at === undefined) return;
  const set = m.get(at);
  set?.delete(k);
  if (set?.size === 0) m.delete(at);
}

function keyOf(p: Port): string {
  return portKey(p.networkId, p.id);
}

function portKey(networkId: string, id: string): string {
  return `${networkId}/${id}`;
}
