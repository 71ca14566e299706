/**
 * Leaks: ports whose pod no longer exists, because the monitor was down when it was deleted, its
 * watch was broken, or a release failed. Memory only picks the candidates; before a port is
 * released a fresh read from the API server must show its pod gone (404, or another pod under the
 * name: a new UID). A pod the read finds alive is left alone, and the pods watch, whose memory it
 * contradicts, is started again. A port younger than the grace period is left alone too (its pod
 * may be being created); a stable StatefulSet port is kept while a pod of its name exists, and
 * released when none has for the retention period.
 */
import {
  isStablePortId,
  type Logger,
  type ManagerClient,
  Mutex,
  type Port,
  stablePodOf,
} from "@knitter/common";
import type { Informer } from "./informer.ts";
import type { Kube, PodLike } from "./kube.ts";
import type { PodTracker } from "./pods.ts";

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

  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly pods: Informer<PodLike>,
    private readonly tracker: PodTracker,
    private readonly settings: ReclaimSettings,
    private readonly log: Logger,
  ) {}

  /** One pass over every port (one at a time); answers how many were released. */
  run(now?: number): Promise<number> {
    return this.one.run(() => this.pass(now ?? Date.now()));
  }

  /** Only with a synced pod list. */
  private async pass(now: number): Promise<number> {
    if (!this.pods.isSynced) return 0;
    const ports = await this.manager.listPorts();
    const candidates: Port[] = [];
    const stillMissing = new Set<string>();
    for (const p of ports) {
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
        if (now - Date.parse(p.createdAt) < this.settings.graceMs) continue;
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
