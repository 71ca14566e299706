/**
 * The manager's ports in memory, by pod UID, kept current by following the manager's change feed
 * (list, then follow from the cursor taken before the list; list again when the cursor expires).
 */
import { isStablePortId, type Logger, type ManagerClient, type Port } from "@knitter/common";
import { ManagerUnavailableError } from "@knitter/common";

const FEED_WAIT_S = 25;
const MAX_BACKOFF_MS = 10_000;

export type PortChange = (port: Port, op: "put" | "delete") => void;

export class PortIndex {
  private readonly ports = new Map<string, Port>();
  private readonly byUid = new Map<string, Set<string>>();
  /** Stable ports with no pod (held for their pod's return), by key. */
  private readonly unbound = new Set<string>();
  /** Ports bound to a pod, by "namespace/name" (whatever the UID). */
  private readonly byName = new Map<string, Set<string>>();
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

  /** Stable ports with no pod: addresses held for their pod's return. */
  heldStable(): Port[] {
    return [...this.unbound].map((k) => this.ports.get(k)!);
  }

  /** The ports bound to a pod of this name, whatever its UID. */
  forPodName(namespace: string, name: string): Port[] {
    return [...this.byName.get(`${namespace}/${name}`) ?? []].map((k) => this.ports.get(k)!);
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
    this.onChange(port, op);
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
  return `${p.networkId}/${p.id}`;
}
