/**
 * Leaks: ports whose pod no longer exists, because the monitor was down when it was deleted or a
 * release failed. A port younger than the grace period is left alone (its pod may not have reached
 * the watch yet); a stable StatefulSet port is kept while a pod of its name exists, and released
 * when none has for the retention period.
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
import type { PodLike } from "./kube.ts";
import type { PodTracker } from "./pods.ts";

export interface ReclaimSettings {
  graceMs: number;
  stableRetentionMs: number;
}

export class Reclaimer {
  /** Stable ports whose pod name was missing, and since when. */
  private readonly missingSince = new Map<string, number>();
  runs = 0;
  private readonly one = new Mutex();

  constructor(
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
    let released = 0;
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
      await this.reclaim(p);
      released++;
    }
    for (const id of [...this.missingSince.keys()]) {
      if (!stillMissing.has(id)) this.missingSince.delete(id);
    }
    this.runs++;
    if (released > 0) this.log.info("reclaimed leaked ports", { released });
    return released;
  }

  private async reclaim(p: Port): Promise<void> {
    const pod = p.pod ?? stablePodOf(p.id, p.interface);
    await this.tracker.releasePort(p, `pod ${pod?.namespace}/${pod?.name} no longer exists`);
  }
}
