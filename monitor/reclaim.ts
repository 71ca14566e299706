/**
 * Leaks: ports whose pod no longer exists, because the monitor was down when it was deleted, its
 * watch was broken, or a release failed. Memory only picks the candidates; before a port is
 * released a fresh read from the API server must show its pod gone (404, or another pod under the
 * name: a new UID). A pod the read finds alive is left alone, and the pods watch, whose memory it
 * contradicts, is started again. A port younger than the grace period is left alone too (its pod
 * may be being created), and looked at again the moment its grace ends, so that a leak found young
 * (a monitor restarted just after the deletion) does not wait for the next interval. A stable
 * StatefulSet port is kept while a pod of its name exists, and released when none has for the
 * retention period. Candidates come from the manager's ports as the monitor follows them
 * (port_index.ts), so a pass costs no listing; the release itself is by ID at the manager.
 */
import { isStablePortId, type Logger, Mutex, type Port, stablePodOf } from "@knitter/common";
import type { Informer } from "./informer.ts";
import type { Kube, PodLike } from "./kube.ts";
import type { PodTracker } from "./pods.ts";
import type { PortIndex } from "./port_index.ts";

export interface ReclaimSettings {
  graceMs: number;
  stableRetentionMs: number;
  /** Fresh reads at a time. */
  concurrency: number;
}

/** What a fresh read says of a port's pod. */
type Verdict = "gone" | "alive" | "unknown";

export class Reclaimer {
  /** Stable ports whose pod name was missing, and since when. */
  private readonly missingSince = new Map<string, number>();
  runs = 0;
  /** Candidates a fresh read found alive: the watch's memory was behind. */
  contradicted = 0;
  private readonly one = new Mutex();
  /** The next look at ports whose grace period is running. */
  private later?: { at: number; timer: ReturnType<typeof setTimeout> };
  private stopped = false;

  constructor(
    private readonly kube: Kube,
    private readonly ports: PortIndex,
    private readonly pods: Informer<PodLike>,
    private readonly tracker: PodTracker,
    private readonly settings: ReclaimSettings,
    private readonly log: Logger,
  ) {}

  /** One pass over every port (one at a time); answers how many were released. */
  run(now?: number): Promise<number> {
    return this.one.run(() => this.pass(now ?? Date.now()));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.later?.timer);
  }

  /** Only with a synced pod list. */
  private async pass(now: number): Promise<number> {
    if (!this.pods.isSynced || this.stopped) return 0;
    const candidates: Port[] = [];
    const stillMissing = new Set<string>();
    let graceEnds = Infinity;
    for (const p of [...this.ports.all()]) {
      if (isStablePortId(p.id)) {
        const owner = stablePodOf(p.id, p.interface);
        if (!owner || this.pods.get(owner.name, owner.namespace)) continue;
        const since = this.missingSince.get(p.id) ?? now;
        this.missingSince.set(p.id, since);
        stillMissing.add(p.id);
        if (now - since < this.settings.stableRetentionMs) continue;
      } else {
        if (!p.pod?.uid) continue; // not a Kubernetes pod's port
        if (this.tracker.live.has(p.pod.uid)) continue;
        const ends = Date.parse(p.createdAt) + this.settings.graceMs;
        if (now < ends) {
          graceEnds = Math.min(graceEnds, ends);
          continue;
        }
      }
      candidates.push(p);
    }
    for (const id of [...this.missingSince.keys()]) {
      if (!stillMissing.has(id)) this.missingSince.delete(id);
    }
    let released = 0;
    const alive: string[] = [];
    await pool(candidates, this.settings.concurrency, async (p) => {
      const verdict = await this.confirm(p);
      if (verdict === "alive") alive.push(podName(p));
      if (verdict !== "gone") return;
      const pod = p.pod ?? stablePodOf(p.id, p.interface);
      await this.tracker.releasePort(p, `pod ${pod?.namespace}/${pod?.name} no longer exists`);
      released++;
    });
    this.runs++;
    if (graceEnds < Infinity) this.lookAgainAt(graceEnds);
    if (alive.length > 0) {
      this.contradicted += alive.length;
      this.pods.restart(
        `a fresh read found ${alive.length} pod(s) the watch had not reported (${
          alive.slice(0, 3).join(", ")
        })`,
      );
    }
    if (released > 0) this.log.info("reclaimed leaked ports", { released });
    return released;
  }

  /** One more pass when the youngest leak candidate's grace period is over. */
  private lookAgainAt(at: number): void {
    if (this.stopped || (this.later && this.later.at <= at)) return;
    clearTimeout(this.later?.timer);
    const timer = setTimeout(() => {
      this.later = undefined;
      this.run().catch((err) =>
        this.log.warn("reclaim failed; next run as scheduled", { error: String(err) })
      );
    }, Math.max(0, at - Date.now()) + 100);
    this.later = { at, timer };
  }

  /**
   * Reads the port's pod from the API server: gone when it does not exist, or (for a port bound to
   * a UID) another pod now has the name. Unknown when the read fails: nothing is released on doubt.
   */
  private async confirm(p: Port): Promise<Verdict> {
    const ref = p.pod ?? stablePodOf(p.id, p.interface);
    if (!ref) return "unknown";
    let pod: PodLike | undefined;
    try {
      pod = await this.kube.getPod(ref.namespace, ref.name);
    } catch (err) {
      this.log.warn("cannot confirm that a pod is gone; its port is kept for now", {
        port: p.id,
        pod: `${ref.namespace}/${ref.name}`,
        error: String((err as Error)?.message ?? err),
      });
      return "unknown";
    }
    if (!pod) return "gone";
    // A stable port is a candidate only when no pod of its name was known: any pod of the name
    // says otherwise.
    const uid = isStablePortId(p.id) ? undefined : p.pod?.uid;
    if (uid !== undefined && pod.metadata?.uid !== uid) return "gone";
    return "alive";
  }
}

function podName(p: Port): string {
  const ref = p.pod ?? stablePodOf(p.id, p.interface);
  return `${ref?.namespace}/${ref?.name}`;
}

/** Runs `fn` on every item, at most `n` at a time. */
async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}
