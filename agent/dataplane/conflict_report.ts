/**
 * Tells the manager which remote ports this node leaves out of its flows (agent/PIPELINE.md,
 * "Conflicting entries"), so that the ports' status says so (manager/service/conflicts.ts). The
 * whole current set goes each time, and only when it differs from what the manager has: the first
 * set after a start (usually empty) clears what an earlier process left there. A manager that is
 * away gets the latest set once it answers; a refusal (4xx) is logged and not repeated.
 */
import { Backoff, type Logger, ManagerError, sleep } from "@knitter/common";

/** One left-out port, as the manager's PUT /nodes/{node}/conflicts takes it. */
export interface ReportedConflict {
  networkId: string;
  /** The left-out port's tenant and ID. */
  tenant: string;
  id: string;
  field: "mac" | "ip";
  /** The shared MAC or address, canonical. */
  value: string;
  reason: "local" | "remote";
  /** The other claimant: a local pod's port (`local`) or another remote port (`remote`). */
  with?: { tenant: string; id: string };
}

/** What the reporter needs of the manager's client (ManagerClient has it). */
export interface ConflictSink {
  request(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<unknown>;
}

/** Between attempts while the manager is away. */
const BACKOFF = { firstMs: 200, maxMs: 5000 };

export class ConflictReporter {
  /** The set to report, as the request body's text. */
  private wanted: string | null = null;
  /** What the manager has (or refused). */
  private sent: string | null = null;
  private running: Promise<void> | null = null;
  private readonly stopped = new AbortController();

  constructor(
    private readonly manager: ConflictSink,
    private readonly node: string,
    private readonly log: Logger,
  ) {}

  /** The node's current set: sent after any report in flight, unless the manager has it already. */
  set(items: ReportedConflict[]): void {
    this.wanted = JSON.stringify({ items });
    this.kick();
  }

  /** Resolves once no report is in flight (the last set is in, refused, or the reporter stopped). */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.settled();
  }

  private kick(): void {
    if (this.running || this.stopped.signal.aborted || this.wanted === this.sent) return;
    this.running = this.send().finally(() => {
      this.running = null;
      this.kick();
    });
  }

  private async send(): Promise<void> {
    const backoff = new Backoff(BACKOFF);
    while (!this.stopped.signal.aborted && this.wanted !== this.sent) {
      const body = this.wanted!;
      try {
        await this.manager.request(
          "PUT",
          `/api/v1/nodes/${encodeURIComponent(this.node)}/conflicts`,
          JSON.parse(body),
          this.stopped.signal,
        );
        this.sent = body;
        backoff.reset();
      } catch (err) {
        if (this.stopped.signal.aborted) return;
        if (err instanceof ManagerError) {
          this.log.warn("the manager refused the node's conflict report", { error: err.message });
          this.sent = body;
          continue;
        }
        const inMs = backoff.next();
        this.log.debug("conflict report not delivered; trying again", {
          error: String((err as Error).message ?? err),
          inMs,
        });
        await sleep(inMs, this.stopped.signal);
      }
    }
  }
}
