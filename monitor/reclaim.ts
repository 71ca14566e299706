/**
 * Leaks: ports whose pod no longer exists, because the monitor was down when it was deleted, its
 * watch was broken, or a release failed. Memory only picks the candidates; before a port is
 * released a fresh read from the API server must show its pod gone (404, or another pod under the
 * name: a new UID). A pod the read finds alive is left alone, and the pods watch, whose memory it
 * contradicts, is started again. A port younger than the grace period is left alone too (its pod
 * may be being created), and looked at again the moment its grace ends, so that a leak found young
 * (a monitor restarted just after the deletion) does not wait for the next interval.
 *
 * Stable StatefulSet ports: one still bound to a pod that is gone (by UID: a replacement of the
 * same name does not keep it bound) is unbound, keeping its address for the pod's next
 * incarnation on any node; an unbound one is released once no pod of its name has come back for
 * the retention period, counted from when it was unbound (`unboundAt`, kept by the manager, so a
 * monitor restart does not move the date).
 *
 * Candidates come from the manager's ports as the monitor follows them (port_index.ts), so a pass
 * costs no listing; the release itself is by ID at the manager.
 */
import { isStablePortId, type Logger, Mutex, type Port, stablePodOf } from "@knitter/common";
import type { Informer } from "./informer.ts";
import type { Kube, PodLike } from "./kube.ts";
import { type PodTracker, readPod } from "./pods.ts";
import type { PortIndex } from "./port_index.ts";

export interface ReclaimSettings {
  graceMs: number;
  stableRetentionMs: number;
  /** Fresh reads at a time. */
  concurrency: number;
}

/** How long the watch may take to tell of a pod a fresh read found. */
const CATCH_UP_MS = 2000;

/** What a candidate port would have done to it, once a fresh read agrees. */
type Action = "release" | "unbind";

/** When an unbound stable port's address is released (no pod of its name having come back). */
export function stableReleaseAt(p: Port, retentionMs: number): number {
  return Date.parse(p.unboundAt ?? p.createdAt) + retentionMs;
}

export class Reclaimer {
  runs = 0;
  /** Ports the passes released. */
  reclaimed = 0;
  /** Candidates a fresh read found alive: the watch's memory was behind. */
  contradicted = 0;
  private readonly one = new Mutex();
  /** The next look at ports whose grace or retention period is running. */
  private later?: { at: number; timer: ReturnType<typeof setTimeout> };
  private stopped = false;
  private readonly checks = new Set<ReturnType<typeof setTimeout>>();

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
    for (const t of this.checks) clearTimeout(t);
  }

  /** Only with a synced pod list. */
  private async pass(now: number): Promise<number> {
    if (!this.pods.isSynced || this.stopped) return 0;
    const candidates: [Port, Action][] = [];
    let next = Infinity;
    for (const p of [...this.ports.all()]) {
      const uid = p.pod?.uid;
      if (isStablePortId(p.id)) {
        const owner = stablePodOf(p.id, p.interface);
        if (!owner) continue;
        if (uid !== undefined) {
          // Bound: to a pod that is gone (another UID may have the name now)?
          if (!this.tracker.live.has(uid)) candidates.push([p, "unbind"]);
          continue;
        }
        if (p.pod || this.pods.get(owner.name, owner.namespace)) continue; // its pod is back
        const at = stableReleaseAt(p, this.settings.stableRetentionMs);
        if (now < at) next = Math.min(next, at);
        else candidates.push([p, "release"]);
      } else {
        if (uid === undefined) continue; // not a Kubernetes pod's port
        if (this.tracker.live.has(uid)) continue;
        const ends = Date.parse(p.createdAt) + this.settings.graceMs;
        if (now < ends) next = Math.min(next, ends);
        else candidates.push([p, "release"]);
      }
    }
    let released = 0;
    const alive: PodLike[] = [];
    await pool(candidates, this.settings.concurrency, async ([p, action]) => {
      const ref = p.pod ?? stablePodOf(p.id, p.interface)!;
      // An unbound stable port waits for any pod of its name; a bound port for its own UID.
      const { verdict, pod } = await readPod(this.kube, ref, p.pod?.uid, this.log);
      if (verdict === "alive") alive.push(pod!);
      if (verdict !== "gone") return;
      if (action === "unbind") return await this.tracker.unbind(p);
      await this.tracker.releasePort(
        p,
        isStablePortId(p.id)
          ? `no pod ${ref.namespace}/${ref.name} came back within the retention period`
          : `pod ${ref.namespace}/${ref.name} no longer exists`,
      );
      released++;
    });
    this.runs++;
    this.reclaimed += released;
    if (next < Infinity) this.lookAgainAt(next);
    this.checkBehind(alive);
    if (released > 0) this.log.info("reclaimed leaked ports", { released });
    return released;
  }

  /**
   * Pods a fresh read found but the watch had not told of: an agent may bind a port a moment
   * before the pod's event arrives, so only those the watch still has not told of after a while
   * mean that its memory is behind; then it is started again.
   */
  private checkBehind(found: PodLike[]): void {
    const behind = () =>
      found.filter((p) => !this.tracker.live.has(p.metadata?.uid ?? "")).map((p) =>
        `${p.metadata?.namespace}/${p.metadata?.name}`
      );
    if (behind().length === 0) return;
    const timer = setTimeout(() => {
      this.checks.delete(timer);
      const late = behind();
      if (late.length === 0 || this.stopped) return;
      this.contradicted += late.length;
      this.pods.restart(
        `a fresh read found ${late.length} pod(s) the watch had not reported (${
          late.slice(0, 3).join(", ")
        })`,
      );
    }, CATCH_UP_MS);
    this.checks.add(timer);
  }

  /** One more pass when the first grace or retention period of a candidate is over. */
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
